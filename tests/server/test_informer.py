"""Informers over raw watch streams, against the test API server process.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_informer.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from controller.informer import Event, Informer
from controller.kube import KubeClient
from controller.resources import POD, SERVICE
from tests.support.clock import FakeClock
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess


def pod(name: str, ns: str = "default") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"containers": []}}


@pytest.fixture
async def client(apiserver: ApiServerProcess) -> AsyncIterator[KubeClient]:
    c = await KubeClient.connect(apiserver.url)
    yield c
    await c.close()


class Recorder:
    def __init__(self, informer: Informer) -> None:
        self.events: list[Event] = []
        informer.add_handler(self.events.append)

    def names(self, type_: str) -> list[str]:
        return [e.obj["metadata"]["name"] for e in self.events if e.type == type_]


async def started(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 10)
    return task


async def test_list_then_watch_sees_everything_once(client: KubeClient) -> None:
    await client.create(POD, pod("before"))
    informer = Informer(client, POD)
    seen = Recorder(informer)
    task = await started(informer)
    try:
        await client.create(POD, pod("after"))
        await client.patch(POD, "default", "before", {"metadata": {"labels": {"x": "1"}}})
        await client.delete(POD, "default", "after")
        await eventually(lambda: asyncio.sleep(0, "after" in seen.names("DELETED")))
        assert seen.names("ADDED") == ["before", "after"]
        assert seen.names("MODIFIED") == ["before"]
        before = informer.store.get("default", "before")
        assert before is not None and before["metadata"]["labels"] == {"x": "1"}
        assert informer.store.get("default", "after") is None
        assert informer.lists == 1
    finally:
        task.cancel()


async def test_cut_stream_resumes_from_last_resource_version_without_relist(
    client: KubeClient, apiserver: ApiServerProcess
) -> None:
    # The first three watch streams are dropped after one event each, mid-stream.
    await apiserver.fault(path="/api/v1/pods", watch=True, cut_after=1, times=3)
    informer = Informer(client, POD, min_backoff=0.01)
    seen = Recorder(informer)
    task = await started(informer)
    try:
        for i in range(8):
            await client.create(POD, pod(f"p{i}"))
        await eventually(
            lambda: asyncio.sleep(0, len(informer.store) == 8), what="all 8 pods cached"
        )
        assert sorted(seen.names("ADDED")) == [f"p{i}" for i in range(8)]
        assert len(seen.names("ADDED")) == 8, "a resumed watch must not replay events"
        assert informer.watches >= 4, "three cut streams, each resumed"
        assert informer.lists == 1, "a cut stream resumes; it does not relist"
    finally:
        task.cancel()


async def test_gone_relists_and_reports_what_was_deleted_meanwhile(
    client: KubeClient, apiserver: ApiServerProcess
) -> None:
    await client.create(POD, pod("stays"))
    await client.create(POD, pod("goes"))
    informer = Informer(client, POD, min_backoff=0.01, max_backoff=0.05)
    seen = Recorder(informer)
    task = await started(informer)
    try:
        # The watch connection fails for a while; meanwhile a pod goes and history is compacted.
        await apiserver.fault(path="/api/v1/pods", watch=True, status=500, times=-1)
        await apiserver.control("POST", "expire-watches")
        await client.delete(POD, "default", "goes")
        await client.create(POD, pod("new"))
        await apiserver.control("POST", "compact")
        await apiserver.control("DELETE", "faults")
        await eventually(lambda: asyncio.sleep(0, informer.lists >= 2), what="a relist")
        await eventually(lambda: asyncio.sleep(0, "goes" in seen.names("DELETED")))
        # The relist may come before or after "new" was created: wait for it either way.
        await eventually(lambda: asyncio.sleep(0, informer.store.get("default", "new")))
        assert informer.store.get("default", "goes") is None
        assert "new" in seen.names("ADDED")
        # And it watches again from the new list.
        await client.create(POD, pod("later"))
        await eventually(lambda: asyncio.sleep(0, informer.store.get("default", "later")))
    finally:
        task.cancel()


async def test_bookmarks_keep_the_resource_version_fresh(
    client: KubeClient, apiserver: ApiServerProcess
) -> None:
    informer = Informer(client, POD, watch_timeout=1)
    task = await started(informer)
    try:
        listed_rv = int(informer.last_rv)
        # Writes to another resource move the global resourceVersion on.
        for i in range(5):
            await client.create(SERVICE, {"metadata": {"name": f"s{i}", "namespace": "default"}})
        await eventually(
            lambda: asyncio.sleep(0, int(informer.last_rv) >= listed_rv + 5),
            what="a bookmark",
        )
        # History before now is compacted; the stream ends (timeoutSeconds=1) and resumes
        # from the bookmark's resourceVersion, which is still valid: no relist needed.
        await apiserver.control("POST", "compact")
        watches = informer.watches
        await eventually(lambda: asyncio.sleep(0, informer.watches > watches), timeout=5)
        await client.create(POD, pod("after-compaction"))
        await eventually(
            lambda: asyncio.sleep(0, informer.store.get("default", "after-compaction"))
        )
        assert informer.lists == 1
    finally:
        task.cancel()


async def test_watch_errors_back_off_instead_of_hot_looping(
    client: KubeClient, apiserver: ApiServerProcess
) -> None:
    """Each failed watch waits, doubling from min_backoff to max_backoff; one try per wait."""
    clock = FakeClock()
    informer = Informer(client, POD, min_backoff=0.05, max_backoff=0.4, clock=clock)
    # The top of the jitter range (the whole backoff) four times, then the bottom (half).
    jitters = iter([1.0] * 4 + [0.0] * 2)
    informer.jitter = lambda: next(jitters)
    task = await started(informer)
    try:
        await apiserver.fault(path="/api/v1/pods", watch=True, status=500, times=6)
        await apiserver.control("DELETE", "requests")
        await apiserver.control("POST", "expire-watches")  # end the healthy stream
        delays = [await clock.next() for _ in range(6)]
        assert delays == [0.05, 0.1, 0.2, 0.4, 0.2, 0.2]
        await client.create(POD, pod("recovered"))
        await eventually(lambda: asyncio.sleep(0, informer.store.get("default", "recovered")))
        assert clock.pending() == [], "the seventh watch is served: no more waiting"
        attempts = (await apiserver.requests()).get("WATCH /api/v1/pods", 0)
        assert attempts == 7, "one try after each wait, not a hot loop"
    finally:
        task.cancel()


async def test_label_selector_turns_relabels_into_adds_and_deletes(client: KubeClient) -> None:
    informer = Informer(client, POD, label_selector="app.kubernetes.io/managed-by=llmkube")
    seen = Recorder(informer)
    task = await started(informer)
    try:
        await client.create(POD, pod("p"))
        await client.patch(
            POD,
            "default",
            "p",
            {"metadata": {"labels": {"app.kubernetes.io/managed-by": "llmkube"}}},
        )
        await eventually(lambda: asyncio.sleep(0, seen.names("ADDED") == ["p"]))
        await client.patch(
            POD, "default", "p", {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}
        )
        await eventually(lambda: asyncio.sleep(0, seen.names("DELETED") == ["p"]))
        assert informer.store.get("default", "p") is None
    finally:
        task.cancel()


# -- defects: nothing an object or a handler does ends the informer ------------------


async def test_a_raising_handler_is_logged_counted_and_the_watch_goes_on(
    client: KubeClient,
) -> None:
    """structlog's exception() once raised TypeError in the safety net and ended the task."""
    informer = Informer(client, POD)
    seen = Recorder(informer)

    def broken(event: Event) -> None:
        if event.obj["metadata"]["name"] == "poison":
            raise TypeError("spec is a list")

    informer.add_handler(broken)
    task = await started(informer)
    try:
        await client.create(POD, pod("poison"))
        await client.create(POD, pod("after"))
        await eventually(lambda: asyncio.sleep(0, "after" in seen.names("ADDED")))
        assert informer.handler_errors == 1
        assert informer.restarts == 0, "the safety net itself raised"
        assert not task.done()
        assert informer.failure is None
    finally:
        task.cancel()


async def test_a_server_restarted_empty_is_relisted_without_ghosts(
    apiserver: ApiServerProcess, client: KubeClient
) -> None:
    """resourceVersions start over: objects created meanwhile are seen, old ones dropped."""
    for i in range(30):
        await client.create(POD, pod(f"old-{i}"))
    informer = Informer(client, POD, min_backoff=0.05, max_backoff=0.5)
    seen = Recorder(informer)
    task = await started(informer)
    try:
        await apiserver.restart_empty()
        for i in range(5):
            await client.create(POD, pod(f"new-{i}"))

        async def settled() -> bool:
            names = {o["metadata"]["name"] for o in informer.store.list()}
            return names == {f"new-{i}" for i in range(5)}

        await eventually(settled, timeout=20, what="cache to match the restarted server")
        assert informer.lists >= 2
        assert sorted(seen.names("DELETED")) == sorted(f"old-{i}" for i in range(30))
    finally:
        task.cancel()


async def test_a_server_back_behind_our_resource_version_is_asked_and_relisted(
    apiserver: ApiServerProcess, client: KubeClient
) -> None:
    """The watch broke and, before the informer tries again, the server is back restored
    (older resourceVersions): resuming the watch would wait silently for resourceVersions
    the server has not reached; asking first (a one-item list from last_rv) gets 504
    Too large resource version."""
    for i in range(30):
        await client.create(POD, pod(f"old-{i}"))
    clock = FakeClock()
    informer = Informer(client, POD, clock=clock)
    seen = Recorder(informer)
    task = await started(informer)
    try:
        # The next stream is cut after one event; the informer then waits its backoff.
        await apiserver.fault(path="/api/v1/pods", watch=True, cut_after=1, times=1)
        watches = informer.watches
        await apiserver.control("POST", "expire-watches")  # 410: relist, watch again
        await eventually(lambda: asyncio.sleep(0, informer.watches > watches))
        await client.create(POD, pod("old-30"))
        await clock.waiting()
        last_rv = int(informer.last_rv)
        await apiserver.restart_empty()
        for i in range(5):
            await client.create(POD, pod(f"new-{i}"))
        await clock.next()

        async def settled() -> bool:
            names = {o["metadata"]["name"] for o in informer.store.list()}
            return names == {f"new-{i}" for i in range(5)}

        await eventually(settled, timeout=20, what="cache to match the restored server")
        assert informer.probes == 1 and informer.resets == 1
        assert int(informer.last_rv) < last_rv
        assert sorted(seen.names("DELETED")) == sorted(f"old-{i}" for i in range(31))
        await client.create(POD, pod("later"))  # and it watches the new server
        await eventually(lambda: asyncio.sleep(0, informer.store.get("default", "later")))
    finally:
        task.cancel()


async def test_a_server_that_refuses_the_question_is_relisted_not_asked_forever(
    apiserver: ApiServerProcess, client: KubeClient
) -> None:
    """After a cut stream the informer asks whether the server reached its
    resourceVersion; a 400 to that question is not weather: it relists and watches on."""
    await client.create(POD, pod("before"))
    clock = FakeClock()
    informer = Informer(client, POD, clock=clock)
    task = await started(informer)
    try:
        await apiserver.fault(path="/api/v1/pods", watch=True, cut_after=1, times=1)
        watches = informer.watches
        await apiserver.control("POST", "expire-watches")  # 410: relist, watch again
        await eventually(lambda: asyncio.sleep(0, informer.watches > watches))
        await apiserver.fault(path="/api/v1/pods$", method="GET", watch=False, status=400, times=1)
        lists = informer.lists
        await client.create(POD, pod("cut"))  # the one event before the cut
        await clock.next()
        await eventually(lambda: asyncio.sleep(0, informer.lists > lists), what="a relist")
        assert informer.probes == 1 and informer.resets == 0
        await client.create(POD, pod("after"))
        await eventually(lambda: asyncio.sleep(0, informer.store.get("default", "after")))
    finally:
        task.cancel()


async def test_a_server_that_was_unreachable_is_relisted_even_when_it_has_moved_past(
    apiserver: ApiServerProcess, client: KubeClient
) -> None:
    """Restored, and busy enough to pass our resourceVersion before we reconnect: no
    resourceVersion can tell, so a server that could not be reached is relisted."""
    for i in range(10):
        await client.create(POD, pod(f"old-{i}"))
    clock = FakeClock()
    informer = Informer(client, POD, clock=clock)
    seen = Recorder(informer)
    task = await started(informer)
    try:
        last_rv = int(informer.last_rv)
        apiserver.proc.kill()  # down, not yet back
        await apiserver.proc.wait()
        await clock.next()  # the stream broke: the next try cannot connect
        await clock.waiting()
        await apiserver.restart_empty()
        for i in range(last_rv + 5):  # past our resourceVersion before we look again
            await client.create(POD, pod(f"new-{i}"))
        await clock.next()

        async def settled() -> bool:
            return len(informer.store) == last_rv + 5 and not any(
                o["metadata"]["name"].startswith("old-") for o in informer.store.list()
            )

        await eventually(settled, timeout=20, what="cache to match the restored server")
        assert sorted(seen.names("DELETED")) == sorted(f"old-{i}" for i in range(10))
        assert len(seen.names("ADDED")) == 10 + last_rv + 5
    finally:
        task.cancel()


async def test_healthz_names_a_failed_informer(client: KubeClient) -> None:
    from controller import health

    informer = Informer(client, POD)
    assert health.problems([informer]) == []
    informer.failure = "RecursionError: too deep"
    assert health.problems([informer]) == ["informer pods: RecursionError: too deep"]
    assert health.unsynced([informer]) == ["pods"]


async def test_the_environment_proxy_is_decided_once(
    apiserver: ApiServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY pointing nowhere: a loopback server is never proxied (as in Go), and the
    aiohttp session never looks the environment up itself (a thread per request).
    tests/server/test_proxy.py covers going through a proxy."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "")
    plain = await KubeClient.connect(apiserver.url)
    try:
        assert plain.proxy is None
        assert await plain.get(POD, "default", "none") is None
        assert plain.session.trust_env is False
    finally:
        await plain.close()
    named = await KubeClient.connect("http://kube.test:8080")
    assert named.proxy is not None and named.proxy.url == "http://127.0.0.1:9"
    ignoring = await KubeClient.connect("http://kube.test:8080", proxy_env=False)
    assert ignoring.proxy is None
