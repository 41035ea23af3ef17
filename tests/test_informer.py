"""Informers over raw watch streams, against the test API server process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from controller.informer import Event, Informer
from controller.kube import KubeClient
from controller.resources import POD, SERVICE
from testserver.process import ApiServerProcess

from .conftest import eventually


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
    informer = Informer(client, POD, min_backoff=0.05, max_backoff=0.4)
    task = await started(informer)
    try:
        await apiserver.fault(path="/api/v1/pods", watch=True, status=500, times=-1)
        await apiserver.control("POST", "expire-watches")  # end the healthy stream
        await apiserver.control("DELETE", "requests")
        await asyncio.sleep(1.5)
        attempts = (await apiserver.requests()).get("WATCH /api/v1/pods", 0)
        # 0.05 doubling to 0.4 s (with jitter) fits about 5 to 10 tries in 1.5 s, not hundreds.
        assert 2 <= attempts <= 15, attempts
        await apiserver.control("DELETE", "faults")
        await client.create(POD, pod("recovered"))
        await eventually(lambda: asyncio.sleep(0, informer.store.get("default", "recovered")))
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
