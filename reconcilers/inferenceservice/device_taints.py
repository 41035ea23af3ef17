"""Pods of a service evicted by a NoExecute device taint (KEP-5055), said on its status.

kube-controller-manager's device-taint-eviction-controller deletes a pod whose allocated
device gets a NoExecute taint its claim does not tolerate; the Deployment recreates it,
and without this the service would only show a pod that vanished. The last written
`status.allocation` names each pod's devices, so a reconcile that finds such a pod
marked (or gone) with its device tainted names the pod, the device and the taint: in the
DeviceTaintEviction condition (kept until the service is Ready again with every live pod
Ready), beside
Ready's message, and in a Warning Event, once per eviction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from api import ModelSpec
from api import conditions as c
from controller.events import WARNING
from controller.resources import RESOURCE_SLICE
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.devices import dra
from reconcilers.devices.lookup import BY_POOL, claim_objects, managed_templates, resource_slices
from reconcilers.devices.taints import (
    NO_EXECUTE,
    Taint,
    devices_to_reread,
    evictions,
    request_tolerations,
    slice_taints,
)
from reconcilers.inferenceservice.pods import live_pods, pod_ready, service_pods
from reconcilers.writes.conditions import Condition

EVICTED = "EvictedByDeviceTaint"  # the condition's reason
WARNED = "PodEvictedByDeviceTaint"  # the Warning Event's (the condition's own is Normal)
Tainted = Mapping[tuple[str, str, str], tuple[Taint, ...]]


def _previous(status: Obj) -> Obj | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == c.DEVICE_TAINT_EVICTION:
            return cond
    return None


async def _taints(
    ctx: Context, allocation: Obj | None, pods: dict[str, Obj], rules: Tainted
) -> Tainted:
    """The slices' taints and the DeviceTaintRules' (`rules`); for a departing pod's
    device the cache does not show tainted NoExecute yet (the slice's watch behind the
    pod's), its pool's slices as the API server has them now. Read only then, in the one
    reconcile after a pod goes."""
    taints = slice_taints(resource_slices(ctx.cache))
    for key, more in rules.items():
        taints[key] = (*taints.get(key, ()), *more)
    for driver, pool, device in devices_to_reread(allocation, pods):
        if any(t.effect == NO_EXECUTE for t in taints.get((driver, pool, device), ())):
            continue
        try:
            cached = ctx.cache.by_index(RESOURCE_SLICE, BY_POOL, f"{driver}/{pool}")
        except KeyError:  # index_slices not run: this manager reads no slices
            continue
        fresh = [await ctx.client.get(RESOURCE_SLICE, None, s["metadata"]["name"]) for s in cached]
        for key, published in slice_taints(s for s in fresh if s is not None).items():
            taints[key] = (*published, *rules.get(key, ()))
    return taints


def serving_again(workload: list[Condition], pods: Iterable[Obj]) -> bool:
    """Ready, and every live pod Ready by its own conditions: the Deployment's
    readyReplicas, behind Ready, may still count the evicted pod while its replacement
    is pending, and the eviction must still be said then."""
    ready = any(w.type == c.READY and w.status for w in workload)
    return ready and all(pod_ready(p) for p in live_pods(pods))


async def eviction_conditions(
    ctx: Context,
    isvc: Obj,
    model: ModelSpec,
    workload: list[Condition],
    rules: Tainted | None = None,
) -> tuple[list[Condition], tuple[str, ...]]:
    """The service's WorkloadReady/Ready (`workload`, told of an eviction while not
    True) and DeviceTaintEviction, or that condition to clear. `rules`: the
    DeviceTaintRules' taints (read by the reconciler when a pod departs)."""
    meta = isvc["metadata"]
    ns = str(meta.get("namespace") or "")
    status = ctx.status.current(isvc)
    claims = claim_objects(ctx.cache, ns, model) + managed_templates(ctx.cache, ns, meta["uid"])
    tolerations = [t for obj in claims for t in request_tolerations(dra.claim_spec(obj))]
    pods = {p["metadata"]["name"]: p for p in service_pods(ctx.cache, isvc)}
    allocation = status.get("allocation")
    taints = await _taints(ctx, allocation, pods, dict(rules or {}))
    found = evictions(allocation, pods, taints, tolerations)
    previous = _previous(status)
    told = str(previous.get("message") or "") if previous else ""
    serving = serving_again(workload, pods.values())
    if found:
        message = "; ".join(str(e) for e in found)
        for e in found:
            if str(e) not in told:
                ctx.recorder.emit(isvc, WARNING, WARNED, str(e))
    elif previous is not None and previous.get("status") == "True" and not serving:
        message = told  # the pod is gone; say why until the service serves again
    else:
        return workload, (c.DEVICE_TAINT_EVICTION,)
    said = [
        w
        if w.status or w.type not in (c.WORKLOAD_READY, c.READY)
        else replace(w, message=f"{w.message}; {message}")
        for w in workload
    ]
    return [*said, Condition(c.DEVICE_TAINT_EVICTION, True, EVICTED, message)], ()
