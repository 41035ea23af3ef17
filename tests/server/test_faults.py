"""API faults: the controller converges, loses no update, and retries on backoff."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.manifests import EXAMPLES, apply_text, install_crds
from controller.errors import TooManyRequests
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, GPU_QUOTA, INFERENCE_SERVICE, MODEL
from controller.transport import Throttle
from objtypes import Obj
from tests.support.clock import FakeClock
from tests.support.manager import manager_for, reconciles
from tests.support.manifests import (
    DRA_CLUSTER_YAML,
    TWO_GPU_CLAIMS,
    gpu_template,
    model_yaml,
    quota_yaml,
    reapply,
)
from tests.support.quota import isvc_yaml as quota_isvc_yaml
from tests.support.waiting import eventually, wait_condition
from testserver.process import ApiServerProcess

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


async def converged(kube: KubeClient, timeout: float = 20.0) -> None:
    """The multi-GPU seed example is fully served: Deployment with TP 2, status written."""
    # AcceleratorReady checks the DeviceClass and ResourceSlices too (a restarted, empty
    # server has lost them).
    await reapply(kube, DRA_CLUSTER_YAML)

    async def deployment_ok() -> bool:
        d = await kube.get(DEPLOYMENT, "default", "qwen3-32b")
        if not d:
            return False
        args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        return bool(args[args.index("--tensor-parallel-size") + 1] == "2")

    await eventually(deployment_ok, timeout, what="Deployment with --tensor-parallel-size 2")
    await wait_condition(
        kube, INFERENCE_SERVICE, "qwen3-32b", "ModelResolved", "True", timeout=timeout
    )
    await wait_condition(kube, MODEL, "qwen3-32b", "AcceleratorReady", "True", timeout=timeout)


@pytest.fixture
async def fast_client(apiserver: ApiServerProcess) -> AsyncIterator[KubeClient]:
    """A client that gives up on a request after half a second."""
    client = await KubeClient.connect(apiserver.url, timeout=0.5)
    yield client
    await client.close()


async def test_server_errors_are_retried_until_they_pass(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    await apiserver.fault(path=DEPLOYMENTS, method="PATCH", status=500, times=3)
    await apiserver.fault(path="/status$", method="PATCH", status=503, times=4)
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    await converged(kube)
    assert reconciles(controller, "inferenceservice", "error") >= 3


async def test_timeouts_are_retried(
    kube: KubeClient, fast_client: KubeClient, apiserver: ApiServerProcess
) -> None:
    # Slower than the client waits: each of these requests times out on the client side.
    await apiserver.fault(path=DEPLOYMENTS, method="PATCH", delay=1.5, times=2)
    manager = manager_for(fast_client)
    await manager.start()
    try:
        await manager.wait_synced()
        await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
        await converged(kube)
        assert reconciles(manager, "inferenceservice", "error") >= 1
    finally:
        await manager.stop()


async def test_conflicts_on_update_are_resolved(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    await converged(kube)
    # Every write (apply) of the Deployment answers 409 five times in a row.
    await apiserver.fault(path=f"{DEPLOYMENTS}/qwen3-32b$", method="PATCH", status=409, times=5)
    await apply_text(
        kube,
        model_yaml(
            "qwen3-32b",
            """\
      enabled: true
      count: 1
      resourceClaims:
        - {name: gpus, resourceClaimTemplateName: two-gpus}""",
        ),
    )

    async def updated() -> bool:
        d = await kube.get(DEPLOYMENT, "default", "qwen3-32b")
        args = (
            (d or {})
            .get("spec", {})
            .get("template", {})
            .get("spec", {})
            .get("containers", [{}])[0]
            .get("args", [])
        )
        return bool(args) and "--tensor-parallel-size" not in args  # count 1: no TP

    await eventually(updated, timeout=15, what="the update after five conflicts")


async def test_real_conflicts_with_a_concurrent_writer(
    kube: KubeClient, controller: Manager
) -> None:
    """Someone else keeps writing the Deployment while the controller must update it."""
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    await converged(kube)
    stop = asyncio.Event()

    async def meddle() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            await kube.patch(
                DEPLOYMENT,
                "default",
                "qwen3-32b",
                {"metadata": {"annotations": {"meddler": str(i)}}},
            )
            await asyncio.sleep(0.002)

    meddler = asyncio.create_task(meddle())
    try:
        await apply_text(
            kube,
            (EXAMPLES / "multi-gpu.yaml").read_text().replace("runtime: vllm", "runtime: sglang"),
        )

        async def sglang() -> bool:
            d = await kube.get(DEPLOYMENT, "default", "qwen3-32b")
            assert d is not None
            return "--tp-size" in d["spec"]["template"]["spec"]["containers"][0]["args"]

        await eventually(sglang, timeout=15, what="the switch to sglang")
    finally:
        stop.set()
        await meddler
    d = await kube.get(DEPLOYMENT, "default", "qwen3-32b")
    assert d is not None and d["metadata"]["annotations"]["meddler"], "their annotation is kept"


async def test_watch_streams_cut_mid_event_lose_nothing(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    # The next twenty watch streams of any resource are cut after one event each.
    await apiserver.fault(path="^/api", watch=True, cut_after=1, times=20)
    await apiserver.control("POST", "expire-watches")
    for i in range(10):
        await apply_text(kube, model_yaml(f"m{i}", "      enabled: true\n      count: 1"))
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    await converged(kube)
    for i in range(10):
        await wait_condition(kube, MODEL, f"m{i}", "AcceleratorReady", "True")


async def test_gone_while_disconnected_relists_and_sees_deletions(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    await converged(kube)
    # Watches fail for a while; meanwhile the Model is deleted and history is compacted.
    await apiserver.fault(watch=True, status=500, times=-1)
    await apiserver.control("POST", "expire-watches")
    await kube.delete(MODEL, "default", "qwen3-32b")
    await apiserver.control("POST", "compact")
    await apiserver.control("DELETE", "faults")
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "qwen3-32b", "ModelResolved", "False", "ModelNotFound", timeout=20
    )
    assert isvc["status"]["phase"] == "Pending"
    informer = controller.cache.informers[MODEL]
    assert informer.lists >= 2


async def test_recreated_while_disconnected_is_reconciled_as_new(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    """Deleted and created again under the same name while the watch was down: the relist
    sees the same generation but another uid, and must not take it for a status echo."""
    manifest = model_yaml("again", "      enabled: false")
    await apply_text(kube, manifest)
    first = await wait_condition(kube, MODEL, "again", "Ready", "True")

    async def echo_cached() -> bool:  # nothing left in flight for the first object
        cached = controller.cache.get(MODEL, "default", "again") or {}
        return bool(cached.get("status", {}).get("conditions"))

    await eventually(echo_cached, 10, what="the status echo in the cache")
    await controller.wait_idle()
    informer = controller.cache.informers[MODEL]
    lists = informer.lists
    await apiserver.fault(watch=True, status=500, times=-1)
    await apiserver.control("POST", "expire-watches")

    async def relisted() -> bool:  # after the expiry, before the delete: then watches fail
        return informer.lists > lists

    await eventually(relisted, 10, what="the relist after the expiry")
    await kube.delete(MODEL, "default", "again")
    await apply_text(kube, manifest)
    await apiserver.control("POST", "compact")
    await apiserver.control("DELETE", "faults")
    second = await wait_condition(kube, MODEL, "again", "Ready", "True", timeout=20)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["metadata"]["generation"] == first["metadata"]["generation"]


async def test_a_status_write_cut_without_an_answer_is_retried_not_a_panic(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    await apiserver.fault(path="/models/cut/status$", method="PATCH", disconnect=True, times=2)
    await apply_text(kube, model_yaml("cut", "      enabled: false"))
    await wait_condition(kube, MODEL, "cut", "Ready", "True", timeout=20)
    sample = controller.metrics.registry.get_sample_value
    assert (sample("controller_runtime_reconcile_errors_total", {"controller": "model"}) or 0) >= 2
    assert not sample("controller_runtime_reconcile_panics_total", {"controller": "model"})


async def test_slow_apiserver_still_converges(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    await apiserver.fault(path="^/api", method="PATCH", delay=0.2, times=-1)
    await apiserver.fault(path="^/api", method="PUT", delay=0.2, times=-1)
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    await converged(kube)


async def test_restart_mid_reconcile_converges(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    # Status writes hang long enough for the controller to be stopped with them in flight.
    await apiserver.fault(path="/status$", method="PATCH", delay=3, times=-1)
    first = manager_for(kube)
    await first.start()
    await first.wait_synced()
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    await eventually(lambda: asyncio.sleep(0, first.queue.processing > 0), what="work in flight")
    await first.stop()
    await apiserver.control("DELETE", "faults")
    second = manager_for(kube)
    await second.start()
    try:
        await converged(kube)
    finally:
        await second.stop()


async def test_a_persistent_failure_backs_off_instead_of_hot_looping(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    """Each failed reconcile is retried once after its backoff: 5 ms doubling."""
    clock = FakeClock()
    manager = manager_for(kube, clock=clock)
    await manager.start()
    await manager.wait_synced()
    status = "/apis/inference.llmkube.dev/v1alpha1/namespaces/default/models/stuck/status"
    try:
        await apiserver.fault(path="/models/stuck/status$", method="PATCH", status=500, times=-1)
        await apiserver.control("DELETE", "requests")
        await apply_text(kube, model_yaml("stuck", "      enabled: true\n      count: 1"))
        delays = [await clock.next() for _ in range(8)]
        assert delays == [0.005 * 2**i for i in range(8)]
        await clock.waiting()  # the ninth try failed too and waits
        assert (await apiserver.requests()).get(f"PATCH {status}", 0) == 9
        # Other objects are not held up by the stuck one.
        await apply_text(kube, model_yaml("fine", "      enabled: true\n      count: 1"))
        await wait_condition(kube, MODEL, "fine", "AcceleratorReady", "True")
        await apiserver.control("DELETE", "faults")
        # Once the fault clears, the next retry succeeds.
        assert clock.pending() == [0.005 * 2**8]
        await clock.next()
        await wait_condition(kube, MODEL, "stuck", "AcceleratorReady", "True")
        assert clock.pending() == [], "succeeded: nothing more to retry"
    finally:
        await manager.stop()


# -- 429 and Retry-After -------------------------------------------------------------


async def test_retry_after_is_honoured_per_path(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    """A 429 (or 503) with Retry-After is waited out and retried; other paths are not held."""
    from controller.resources import SERVICE

    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "default"},
        "spec": {"ports": [{"port": 80}]},
    }
    await kube.create(SERVICE, service)
    path = "/api/v1/namespaces/default/services/s$"
    await apiserver.fault(path=path, method="PATCH", status=429, retry_after=1, times=1)
    await apiserver.fault(path=path, method="PATCH", status=503, retry_after=1, times=1)
    await apiserver.control("DELETE", "requests")
    patched = await kube.patch(SERVICE, "default", "s", {"metadata": {"labels": {"a": "1"}}})
    assert patched["metadata"]["labels"] == {"a": "1"}
    assert kube.throttle.waits == 2, "each retry waited for the time the server asked"
    requests = await apiserver.requests()
    assert requests["PATCH /api/v1/namespaces/default/services/s"] == 3
    # While one path waits out a long Retry-After, another path of the client is not held.
    await apiserver.fault(path=path, method="PATCH", status=429, retry_after=30, times=-1)
    waiting = asyncio.create_task(
        kube.patch(SERVICE, "default", "s", {"metadata": {"labels": {"a": "2"}}})
    )
    await eventually(lambda: asyncio.sleep(0, kube.throttle.waits == 3), what="the wait")
    assert await kube.get(SERVICE, "default", "missing") is None
    assert kube.throttle.waits == 3 and not waiting.done()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)


async def test_too_many_requests_is_its_own_error(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    await apiserver.fault(path="/services/none$", status=429, times=1)
    with pytest.raises(TooManyRequests) as raised:  # no Retry-After: not retried here
        await kube.request("GET", "/api/v1/namespaces/default/services/none")
    assert raised.value.retry_after is None and raised.value.status == 429


async def test_a_throttling_server_is_not_hammered(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    """A throttled status write is sent again only once the Retry-After (1 s) has passed:
    one write per second of the (fake) clock, through the client's retries and requeues."""
    clock = FakeClock()
    kube.throttle = Throttle(clock)
    manager = manager_for(kube, clock=clock)
    await manager.start()
    await manager.wait_synced()
    status = "/apis/inference.llmkube.dev/v1alpha1/namespaces/default/models/m/status"
    await apiserver.fault(path=status + "$", status=429, retry_after=1, times=-1)

    async def status_writes() -> int:
        counts = await apiserver.requests()
        return sum(n for k, n in counts.items() if k.endswith("/models/m/status"))

    try:
        await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
        sent: list[float] = []  # the clock's time at each write (nothing runs between steps)
        await clock.waiting()
        for _ in range(12):
            sent += [clock.t] * (await status_writes() - len(sent))
            await clock.next()
            await clock.waiting()
        assert sent == pytest.approx([1000.0 + i for i in range(len(sent))]), sent
        assert len(sent) >= 8, sent
    finally:
        await manager.stop()


# -- an API server restored empty (an etcd restore: resourceVersions go backwards) --------


async def charged(kube: KubeClient, services: list[str]) -> Obj:
    """The GPUQuota once it charges exactly these services (2 GPUs each), each once."""

    async def probe() -> Obj | None:
        q = await kube.get(GPU_QUOTA, "default", "team")
        status = (q or {}).get("status") or {}
        names = sorted(s["name"] for s in status.get("services") or [])
        return q if names == services and status.get("usedGPUCount") == 2 * len(services) else None

    return await eventually(probe, 60, what=f"GPUQuota charging exactly {services}")


async def _cache_matches_server(kube: KubeClient, controller: Manager) -> str:
    """ "" when every informer's cache holds exactly what the server lists (by key and
    uid); else the first difference, for the failure message."""
    for rt, informer in controller.cache.informers.items():
        items, _ = await kube.list(rt, informer.namespace, label_selector=informer.label_selector)
        server = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["uid"]
            for o in items
        }
        cached = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["uid"]
            for o in informer.store.list()
        }
        if server != cached:
            ghosts = sorted(set(cached.items()) - set(server.items()))
            missing = sorted(set(server.items()) - set(cached.items()))
            return f"{rt.plural}: ghosts {ghosts[:3]}, missing {missing[:3]}"
    return ""


async def test_an_api_server_restored_empty_is_relisted_by_every_informer(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    """The server restarts with nothing stored and its resourceVersions start over, as
    after an etcd restore. Objects created right after it and 15 s later are reconciled;
    the GPUQuota charges only the services that exist, each once; no cache keeps a ghost."""
    old = [f"old-{i}" for i in range(5)]
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", TWO_GPU_CLAIMS))
    await reapply(kube, quota_yaml(40))
    for name in old:
        await reapply(kube, quota_isvc_yaml(name, "m", replicas=1))
    await charged(kube, old)

    async def in_sync() -> bool:
        return not await _cache_matches_server(kube, controller)

    await eventually(in_sync, 60, what="every cache to match the server")

    await apiserver.restart_empty()
    # Restored from a backup that has the CRDs, the template, the Model and the quota but
    # none of the services; one new service and one new Model at once, more 15 s later.
    await install_crds(kube)
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", TWO_GPU_CLAIMS))
    await reapply(kube, quota_yaml(40))
    await reapply(kube, model_yaml("early", "      enabled: false"))
    await reapply(kube, quota_isvc_yaml("early", "m", replicas=1))
    await asyncio.sleep(15)
    await reapply(kube, model_yaml("late", "      enabled: false"))
    await reapply(kube, quota_isvc_yaml("late", "m", replicas=1))

    for name in ("early", "late"):
        await wait_condition(kube, MODEL, name, "Ready", "True", timeout=60)
        await wait_condition(kube, INFERENCE_SERVICE, name, "QuotaAdmitted", "True", timeout=60)
        await eventually(
            lambda name=name: kube.get(DEPLOYMENT, "default", name),  # type: ignore[misc]
            60,
            what=f"the Deployment of {name}",
        )
    await charged(kube, ["early", "late"])
    try:
        await eventually(in_sync, 60, what="every cache to match the restored server")
    except AssertionError as e:
        raise AssertionError(f"{e}: {await _cache_matches_server(kube, controller)}") from e

    async def no_ghost_deployments() -> bool:  # none made again for a service now gone
        return all([await kube.get(DEPLOYMENT, "default", name) is None for name in old])

    await eventually(no_ghost_deployments, 60, what="no Deployment of a service now gone")
