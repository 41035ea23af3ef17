"""GPUQuota in linear time: the incremental index agrees with the rule, and only the
services whose admission moved are reconciled again.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_quota_index.py.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from app.controllers import reconcilers
from controller.cache import Cache
from controller.events import EventRecorder
from controller.informer import Event, Informer
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig, ReconcilerSetup
from controller.reconcile import Reconciler, Request, Result, Watch
from controller.resources import (
    GPU_QUOTA,
    INFERENCE_SERVICE,
    MODEL,
    NAMESPACE,
    ResourceType,
    object_key,
)
from objtypes import Obj
from reconcilers.quota.index import (
    admission_changes,
    namespace_allocations,
    quota_index,
    recomputed_allocations,
)
from tests.support.manifests import quota_yaml, reapply
from tests.support.quota import isvc_yaml, replicas
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess

GROUP = "/apis/inference.llmkube.dev/v1alpha1"


# -- on the test server ------------------------------------------------------------------


async def _informers(client: KubeClient) -> AsyncIterator[Cache]:
    cache = Cache()
    tasks = []
    for rt in (MODEL, INFERENCE_SERVICE, GPU_QUOTA, NAMESPACE):
        informer = Informer(client, rt, watch_timeout=30)
        cache.add(informer)
        tasks.append(asyncio.create_task(informer.run()))
    await asyncio.gather(*(i.synced.wait() for i in cache.informers.values()))
    yield cache
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def cache(kube: KubeClient, apiserver: ApiServerProcess) -> AsyncIterator[Cache]:
    # status.allocation is written by hand below, as the DRA reconciler would.
    await apiserver.control("PUT", "schema-validation", {"enforce": False})
    async for c in _informers(kube):
        yield c


async def _seen(cache: Cache, rt: ResourceType, written: Obj | None, key: tuple[str, str]) -> None:
    """Until the cache holds what was written (None: until it is gone)."""

    async def probe() -> bool:
        cached = cache.get(rt, *key)
        if written is None:
            return cached is None
        rv = written["metadata"]["resourceVersion"]
        return cached is not None and cached["metadata"]["resourceVersion"] == rv

    await eventually(probe, what=f"{rt.plural} {key} in the cache")


def _model(name: str, count: int, claims: bool, ns: str = "default") -> Obj:
    gpu: Obj = {"enabled": True}
    if count:
        gpu["count"] = count
    if claims:
        gpu["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "t"}]
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "source": "Qwen/Qwen3-8B",
            "format": "safetensors",
            "hardware": {"accelerator": "cuda", "gpu": gpu},
        },
    }


def _service(
    name: str, model: str, replicas: int, team: str, gpu: int | None, ns: str = "default"
) -> Obj:
    spec: Obj = {"modelRef": model, "runtime": "vllm", "replicas": replicas}
    spec["podLabels"] = {"team": team}
    if gpu is not None:
        spec["resources"] = {"gpu": gpu}
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def _namespace(name: str, team: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"team": team}},
    }


def _quota(name: str, limit: int, selector: bool) -> Obj:
    spec: Obj = {"gpuCount": limit}
    if selector:
        spec["selector"] = {"matchLabels": {"team": "a"}}
    else:
        spec["namespaceRef"] = "default"
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "GPUQuota",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


async def test_index_matches_recomputing_on_randomized_changes(
    kube: KubeClient, cache: Cache
) -> None:
    """Services in two namespaces; "wide" covers `default` by namespaceRef, "team-a" the
    namespaces labelled team=a (relabelled at random: the two namespaces share its
    gpuCount while both carry the label)."""
    rng = random.Random(15)
    index = quota_index(cache)
    reported: set[tuple[str, str]] = set()
    spaces = ("default", "other")

    def collect(event: Event) -> None:
        reported.update(admission_changes(cache, event))

    for informer in cache.informers.values():
        informer.add_handler(collect)  # after the cache's own handler, as event mappers are

    async def write(rt: ResourceType, obj: Obj) -> Obj:
        key = object_key(obj)
        if cache.get(rt, *key) is None:
            return await kube.create(rt, obj)
        if rt == NAMESPACE:
            return await kube.patch(rt, "", key[1], {"metadata": obj["metadata"]})
        return await kube.patch(rt, key[0], key[1], {"spec": obj["spec"]})

    for ns in spaces:
        namespace = _namespace(ns, rng.choice("ab"))
        await _seen(cache, NAMESPACE, await write(NAMESPACE, namespace), ("", ns))
        for i in range(4):
            m = _model(f"m{i}", rng.choice([0, 1, 2]), claims=rng.random() < 0.5, ns=ns)
            await _seen(cache, MODEL, await write(MODEL, m), (ns, f"m{i}"))
    previous = {ns: recomputed_allocations(cache, ns).allocations for ns in spaces}
    spanned = False
    for step in range(90):
        roll = rng.random()
        ns = rng.choice(spaces)
        if roll < 0.3:  # create or change a service (replicas, model, resources.gpu)
            name = f"s{rng.randrange(12)}"
            gpu = rng.choice([None, 1, 2])
            obj = _service(
                name, f"m{rng.randrange(5)}", rng.randrange(4), rng.choice("ab"), gpu, ns
            )
            await _seen(cache, INFERENCE_SERVICE, await write(INFERENCE_SERVICE, obj), (ns, name))
        elif roll < 0.42:  # DRA allocated (or released) a service's devices
            services = cache.list(INFERENCE_SERVICE, ns)
            if not services:
                continue
            name = rng.choice(services)["metadata"]["name"]
            pods = rng.randrange(3)
            allocation = {"allocatedPods": pods, "allocatedDevices": pods * rng.randrange(1, 4)}
            written = await kube.patch(
                INFERENCE_SERVICE,
                ns,
                name,
                {"status": {"allocation": allocation}},
                subresource="status",
            )
            await _seen(cache, INFERENCE_SERVICE, written, (ns, name))
        elif roll < 0.5:
            name = rng.choice(
                [s["metadata"]["name"] for s in cache.list(INFERENCE_SERVICE, ns)] or ["s0"]
            )
            await kube.delete(INFERENCE_SERVICE, ns, name)
            await _seen(cache, INFERENCE_SERVICE, None, (ns, name))
        elif roll < 0.6:  # a Model's count or claims change
            i = rng.randrange(4)
            m = _model(f"m{i}", rng.choice([0, 1, 2, 3]), claims=rng.random() < 0.5, ns=ns)
            await _seen(cache, MODEL, await write(MODEL, m), (ns, f"m{i}"))
        elif roll < 0.75:  # a namespace moves in or out of the selector's reach
            written = await write(NAMESPACE, _namespace(ns, rng.choice("ab")))
            await _seen(cache, NAMESPACE, written, ("", ns))
        elif roll < 0.93:  # a quota appears or its limit changes
            name = rng.choice(["wide", "team-a"])
            q = _quota(name, rng.randrange(0, 10), selector=name == "team-a")
            await _seen(cache, GPU_QUOTA, await write(GPU_QUOTA, q), ("default", name))
        else:
            name = rng.choice(["wide", "team-a"])
            if cache.get(GPU_QUOTA, "default", name) is not None:
                await kube.delete(GPU_QUOTA, "default", name)
                await _seen(cache, GPU_QUOTA, None, ("default", name))
        for ns in spaces:
            want = recomputed_allocations(cache, ns)
            got = namespace_allocations(cache, ns)
            assert got.allocations == want.allocations, f"step {step}, {ns}"
            assert got.limits == want.limits, f"step {step}, {ns}"
            moved = {
                (ns, n)
                for n in want.allocations.keys() | previous[ns].keys()
                if want.allocations.get(n) != previous[ns].get(n)
            }
            assert moved <= reported, f"step {step}: {moved - reported} changed unreported"
            previous[ns] = dict(want.allocations)
        reported = set()
        scope = index.scopes.get("default")
        spanned |= scope is not None and set(scope.covering) == set(spaces)
    assert spanned, "the two namespaces never shared a group: the case is not exercised"


async def test_a_relabel_inside_a_group_recharges_its_services(
    kube: KubeClient, cache: Cache
) -> None:
    """The group ({a, b}, both quotas) stays the same, but a's services come under the
    second quota too: they are re-read, not left with the quotas they had."""
    for ns, labels in (("a", {"team": "x"}), ("b", {"team": "x", "tier": "gold"})):
        meta: Obj = {"name": ns, "labels": labels}
        await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        await kube.create(MODEL, _model("m", 1, claims=False, ns=ns))
    for name, selector, limit in (("team", {"team": "x"}, 9), ("gold", {"tier": "gold"}, 1)):
        quota = _quota(name, limit, selector=True)
        quota["spec"]["selector"] = {"matchLabels": selector}
        await kube.create(GPU_QUOTA, quota)
    written = await kube.create(INFERENCE_SERVICE, _service("s", "m", 3, "x", None, "a"))
    await _seen(cache, INFERENCE_SERVICE, written, ("a", "s"))

    def quotas_of_s() -> tuple[str, ...] | None:
        allocation = namespace_allocations(cache, "a").allocations.get("s")
        return allocation.quotas if allocation else None

    await eventually(lambda: _ready(quotas_of_s() == ("default/team",)), what="s under team")
    assert set(quota_index(cache).scopes["a"].covering) == {"a", "b"}
    rebuilds = quota_index(cache).rebuilds
    relabel: Obj = {"metadata": {"labels": {"tier": "gold"}}}
    await _seen(cache, NAMESPACE, await kube.patch(NAMESPACE, "", "a", relabel), ("", "a"))
    assert quotas_of_s() == ("default/gold", "default/team")
    assert namespace_allocations(cache, "a").allocations["s"].admitted_replicas == 1
    assert namespace_allocations(cache, "a") == recomputed_allocations(cache, "a")
    assert quota_index(cache).rebuilds == rebuilds  # the group was kept, not rebuilt


async def test_charges_what_dra_allocated(kube: KubeClient, cache: Cache) -> None:
    """Contract 3: allocatedPods > 0 charges ceil(allocatedDevices / allocatedPods) a
    replica; otherwise the guide's rule (claims without count: resources.gpu or nothing)."""
    await kube.create(MODEL, _model("claims", 0, claims=True))
    await kube.create(MODEL, _model("counted", 2, claims=False))
    await kube.create(GPU_QUOTA, _quota("wide", 20, selector=False))
    await kube.create(INFERENCE_SERVICE, _service("free", "claims", 2, "a", None))
    await kube.create(INFERENCE_SERVICE, _service("sized", "claims", 2, "a", 1))
    written = await kube.create(INFERENCE_SERVICE, _service("plugin", "counted", 1, "a", None))
    await _seen(cache, INFERENCE_SERVICE, written, ("default", "plugin"))
    await eventually(
        lambda: _ready(len(namespace_allocations(cache, "default").allocations) == 3),
        what="three services accounted",
    )

    def charge(name: str) -> tuple[int, int]:
        a = namespace_allocations(cache, "default").allocations[name]
        return a.gpus_per_replica, a.allocated_gpus

    assert charge("free") == (0, 0)  # the guide: claims, no count, no resources.gpu
    assert charge("sized") == (1, 0)
    assert charge("plugin") == (2, 0)

    async def allocated(name: str, devices: int, pods: int) -> None:
        status = {"allocation": {"allocatedDevices": devices, "allocatedPods": pods}}
        written = await kube.patch(
            INFERENCE_SERVICE, "default", name, {"status": status}, subresource="status"
        )
        await _seen(cache, INFERENCE_SERVICE, written, ("default", name))

    await allocated("free", 3, 2)  # two pods hold three devices: 2 a replica
    assert charge("free") == (2, 3)
    await allocated("sized", 4, 1)
    assert charge("sized") == (4, 4)
    await allocated("sized", 0, 0)  # nothing allocated yet: back to resources.gpu
    assert charge("sized") == (1, 0)
    # Pods gone, but the service remembers what one held: that is charged, not the count.
    kept = {"allocation": {"allocatedDevices": 0, "allocatedPods": 0, "devicesPerPod": 4}}
    written = await kube.patch(
        INFERENCE_SERVICE, "default", "sized", {"status": kept}, subresource="status"
    )
    await _seen(cache, INFERENCE_SERVICE, written, ("default", "sized"))
    assert charge("sized") == (4, 0)
    await allocated("plugin", 8, 1)  # no claims: a device-plugin charge ignores it
    assert charge("plugin") == (2, 0)


async def test_a_models_status_write_costs_no_quota_work(kube: KubeClient, cache: Cache) -> None:
    """A Model counts by its spec: its status echo re-reads no service, a spec change does."""
    index = quota_index(cache)
    events: list[Event] = []
    cache.informers[MODEL].add_handler(events.append)
    await kube.create(MODEL, _model("m", 1, claims=False))
    await kube.create(GPU_QUOTA, _quota("wide", 3, selector=False))
    written = await kube.create(INFERENCE_SERVICE, _service("s", "m", 2, "a", None))
    await _seen(cache, INFERENCE_SERVICE, written, ("default", "s"))

    def admitted() -> int:
        return namespace_allocations(cache, "default").allocations["s"].admitted_replicas

    await eventually(lambda: _ready("s" in namespace_allocations(cache, "default").allocations))
    assert admitted() == 2  # 2 replicas x 1 GPU under 3
    computed = index.demands_computed
    status = {"status": {"phase": "Ready", "acceleratorReady": True}}
    written = await kube.patch(MODEL, "default", "m", status, subresource="status")
    await _seen(cache, MODEL, written, ("default", "m"))
    assert index.demands_computed == computed
    assert admission_changes(cache, events[-1]) == frozenset()
    assert admitted() == 2

    # A spec change still moves the charge: 2 GPUs a replica, one replica fits under 3.
    written = await kube.patch(MODEL, "default", "m", {"spec": _model("m", 2, False)["spec"]})
    await _seen(cache, MODEL, written, ("default", "m"))
    assert index.demands_computed == computed + 1
    assert admission_changes(cache, events[-1]) == frozenset({("default", "s")})
    assert admitted() == 1


async def _ready(value: bool) -> bool | None:
    return value or None


# -- re-queues, through the manager --------------------------------------------------------


class Counting:
    """A reconciler that counts what it is asked to reconcile, then does it."""

    def __init__(self, inner: Reconciler) -> None:
        self.inner = inner
        self.name = inner.name
        self.seen: Counter[str] = Counter()

    @property
    def primary(self) -> ResourceType:
        return self.inner.primary

    def watches(self) -> list[Watch]:
        return self.inner.watches()

    async def reconcile(self, request: Request) -> Result:
        self.seen[request.name] += 1
        return await self.inner.reconcile(request)


@pytest.fixture
async def counted(kube: KubeClient) -> AsyncIterator[tuple[Manager, dict[str, Counting]]]:
    wrapped: dict[str, Counting] = {}

    def counting(setup: ReconcilerSetup) -> ReconcilerSetup:
        def build(client: KubeClient, cache: Cache, recorder: EventRecorder) -> list[Reconciler]:
            counted = [Counting(r) for r in setup(client, cache, recorder)]
            wrapped.update((r.name, r) for r in counted)
            return list[Reconciler](counted)

        return build

    config = ManagerConfig(http_port=None, workers=2, watch_timeout=30)
    manager = Manager(kube, config, reconcilers=counting(reconcilers()))
    await manager.start()
    await manager.wait_synced()
    yield manager, wrapped
    await manager.stop()


async def test_only_services_whose_admission_moved_are_requeued(
    kube: KubeClient, counted: tuple[Manager, dict[str, Counting]]
) -> None:
    manager, wrapped = counted
    services, quotas = wrapped["inferenceservice"], wrapped["gpuquota"]
    await reapply(kube, _yaml(_model("m", 1, claims=False)))
    await reapply(kube, quota_yaml(4))
    for name in ("a", "b", "c"):  # created in this order: a, b are admitted 2, c none
        await reapply(kube, isvc_yaml(name, "m", replicas=2))
        await manager.wait_idle()
    await replicas(kube, "b", 2)
    await replicas(kube, "c", 0)
    await manager.wait_idle()

    # A change that moves no charge: the service itself only, and no quota.
    services.seen.clear()
    quotas.seen.clear()
    await kube.patch(INFERENCE_SERVICE, "default", "a", {"metadata": {"annotations": {"x": "1"}}})
    await manager.wait_idle()
    assert set(services.seen) == {"a"}
    assert not quotas.seen

    # a gives up a replica: c gets it; b, admitted as before, is left alone.
    services.seen.clear()
    await kube.patch(INFERENCE_SERVICE, "default", "a", {"spec": {"replicas": 1}})
    await replicas(kube, "c", 1)
    await manager.wait_idle()
    assert "c" in services.seen and "a" in services.seen
    assert "b" not in services.seen
    assert set(quotas.seen) == {"team"}
    await replicas(kube, "a", 1)


def _yaml(obj: Obj) -> str:
    return json.dumps(obj)  # JSON is YAML
