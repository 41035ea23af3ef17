"""What the cluster's DRA objects say about one Model or InferenceService, from the cache.

The cache-reading side of reconcilers/devices/dra.py (which stays pure): the claims and
templates a Model names, its DeviceClasses and ResourceSlices, and what DRA allocated
to a service's pods, in the `status.allocation` shape other components read:

    expectedDevices   devices the current pods should hold (per pod x pods)
    allocatedDevices  devices DRA allocated to the pods' claims (sum over pods)
    allocatedPods     pods whose claims are all allocated
    summary           "allocated/expected", for the printer column
    requestedPerPod   devices one pod's claims ask for (absent when unknown)
    devicesPerPod     devices one allocated pod holds; kept while no pod is allocated
                      and the claims ask for the same (what a GPUQuota charges)
    pods              [{name, devices: [{claim, request, driver, pool, device,
                      productName, memory}]}]: the last two as the device's ResourceSlice
                      publishes them (absent when it says nothing of them)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from api import ModelSpec
from controller.cache import Cache
from controller.resources import (
    DEVICE_CLASS,
    NODE,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from objtypes import Obj
from reconcilers.devices import dra, explain, selectors
from reconcilers.devices.managed import MANAGED_CLAIM_LABEL
from reconcilers.devices.taint_rules import with_rule_taints
from reconcilers.devices.taints import Taint


def claim_objects(cache: Cache, namespace: str, model: ModelSpec) -> list[Obj]:
    """The ResourceClaims and ResourceClaimTemplates the Model names that exist."""
    found = []
    for ref in model.gpu.claims:
        obj = (
            cache.get(RESOURCE_CLAIM_TEMPLATE, namespace, ref.template_name)
            if ref.template_name
            else cache.get(RESOURCE_CLAIM, namespace, ref.claim_name or "")
        )
        if obj is not None:
            found.append(obj)
    return found


def model_demand(cache: Cache, namespace: str, model: ModelSpec) -> dra.DeviceDemand:
    """Devices one pod of the Model asks for through the claims and templates it names."""
    return dra.pod_demand(claim_objects(cache, namespace, model))


def templates(cache: Cache, namespace: str, model: ModelSpec) -> dict[str, Obj]:
    """Template name -> template, for the Model's template entries that exist."""
    found = {}
    for ref in model.gpu.claims:
        if ref.template_name:
            obj = cache.get(RESOURCE_CLAIM_TEMPLATE, namespace, ref.template_name)
            if obj is not None:
                found[ref.template_name] = obj
    return found


def claim_shortfalls(
    cache: Cache,
    namespace: str,
    model: ModelSpec,
    made: Obj | None = None,
    rule_taints: Mapping[tuple[str, str, str], tuple[Taint, ...]] | None = None,
) -> list[str]:
    """The requests of the Model's claims and templates (and `made`, a template written
    in this reconcile, not cached yet) that no published device can serve, each naming
    the claim, the request, the selector and what is published (explain.py). An
    allocated claim has been served: not checked. `rule_taints`: the DeviceTaintRules'
    taints (taint_rules.py), beside the slices'."""
    messages: list[str] = []
    for ref in model.gpu.claims:
        if ref.template_name:
            obj = cache.get(RESOURCE_CLAIM_TEMPLATE, namespace, ref.template_name)
            if made is not None and made["metadata"]["name"] == ref.template_name:
                obj = made
            label = f"ResourceClaimTemplate {ref.template_name}"
        else:
            obj = cache.get(RESOURCE_CLAIM, namespace, ref.claim_name or "")
            label = f"ResourceClaim {ref.claim_name}"
        if obj is None or dra.is_allocated(obj):
            continue
        messages += spec_shortfalls(cache, label, dra.claim_spec(obj), rule_taints)
    return messages


def spec_shortfalls(
    cache: Cache,
    label: str,
    spec: Mapping[str, Any],
    rule_taints: Mapping[tuple[str, str, str], tuple[Taint, ...]] | None = None,
) -> list[str]:
    """explain.shortfalls of one ResourceClaimSpec against the cached slices and classes,
    as messages naming `label`. Worked out for a placeholder name and remembered, so that
    services whose claims ask the same (every service of one Model on managed claims)
    share one answer until a slice, a class or a rule's taint changes."""
    slices, class_list = resource_slices(cache), cache.list(DEVICE_CLASS)
    world = _world(slices, class_list, rule_taints)
    key = (world, json.dumps(spec, sort_keys=True)) if world else None
    known = _SHORTFALLS.get(key) if key else None
    if known is None:
        classes = device_classes(cache)
        found = selectors.devices(slices)
        if rule_taints:
            found = with_rule_taints(found, rule_taints)
        known = [s.message for s in explain.shortfalls(_CLAIM, spec, classes, found)]
        if key:
            _remember(key, known)
    return [m.replace(_CLAIM, label) for m in known]


# spec_shortfalls' answers by what they are worked out from: every reconcile of a
# service on claims asked again, and each CEL evaluation against every published device
# was most of the product's CPU on a cluster with DRA. Bounded; the key holds every input.
_SHORTFALLS: dict[tuple[object, ...], list[str]] = {}
_SHORTFALLS_MAX = 4096
_CLAIM = "\x00claim\x00"  # the claim's name in a remembered answer


def _world(
    slices: list[Obj],
    classes: list[Obj],
    rule_taints: Mapping[tuple[str, str, str], tuple[Taint, ...]] | None,
) -> tuple[object, ...] | None:
    """What a shortfall depends on beside the claim: the slices and classes by name and
    resourceVersion, and the rules' taints; None where an object has no resourceVersion
    (then nothing tells two versions apart, and nothing is remembered)."""
    versions = (_versions(slices), _versions(classes))
    if None in versions:
        return None
    return (*versions, tuple(sorted((rule_taints or {}).items())))


def _versions(objs: list[Obj]) -> tuple[tuple[object, object], ...] | None:
    """(name, resourceVersion) of each object; None where one has no resourceVersion."""
    found = []
    for obj in objs:
        meta = obj.get("metadata") or {}
        if not meta.get("resourceVersion"):
            return None
        found.append((meta.get("name"), meta["resourceVersion"]))
    return tuple(found)


def _remember(key: tuple[object, ...], messages: list[str]) -> None:
    if len(_SHORTFALLS) >= _SHORTFALLS_MAX:
        _SHORTFALLS.clear()
    _SHORTFALLS[key] = messages


def device_classes(cache: Cache) -> dict[str, Obj]:
    return {c["metadata"]["name"]: c for c in cache.list(DEVICE_CLASS)}


def resource_slices(cache: Cache) -> list[Obj]:
    return cache.list(RESOURCE_SLICE)


def plugin_nodes(cache: Cache, resource: str) -> int:
    """Nodes whose status.allocatable offers the device-plugin resource (more than 0)."""
    found = 0
    for node in cache.list(NODE):
        value = str(((node.get("status") or {}).get("allocatable") or {}).get(resource, "0"))
        found += value not in ("0", "")
    return found


BY_OWNER = "managed-by-owner"


def managed_owners(template: Obj) -> list[str]:
    """The index function: the owners' uids of a template this controller made."""
    meta = template.get("metadata") or {}
    if (meta.get("labels") or {}).get(MANAGED_CLAIM_LABEL) != "true":
        return []
    return [str(r["uid"]) for r in meta.get("ownerReferences") or [] if r.get("uid")]


def index_managed_templates(cache: Cache) -> None:
    cache.add_index(RESOURCE_CLAIM_TEMPLATE, BY_OWNER, managed_owners)


def managed_templates(cache: Cache, namespace: str, owner_uid: str) -> list[Obj]:
    """The ResourceClaimTemplates this controller made for one service (managed.py),
    through the owner index where the manager keeps it (a scan of the namespace's
    templates per reconcile grew with the number of services)."""
    try:
        return cache.by_index(RESOURCE_CLAIM_TEMPLATE, BY_OWNER, owner_uid, namespace)
    except KeyError:  # index_managed_templates not run
        return [
            t
            for t in cache.list(RESOURCE_CLAIM_TEMPLATE, namespace)
            if owner_uid in managed_owners(t)
        ]


BY_POOL = "driver-pool"


def slice_pool(resource_slice: Obj) -> list[str]:
    """The index function: `<driver>/<pool>`, the allocation result's two names."""
    spec = resource_slice.get("spec") or {}
    driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name")
    return [f"{driver}/{pool}"] if isinstance(driver, str) and isinstance(pool, str) else []


def index_slices(cache: Cache) -> None:
    cache.add_index(RESOURCE_SLICE, BY_POOL, slice_pool)


def device_facts(cache: Cache, device: dra.AllocatedDevice) -> dict[str, str]:
    """productName and memory of an allocated device, from its pool's slices."""
    try:
        pool = cache.by_index(RESOURCE_SLICE, BY_POOL, f"{device.driver}/{device.pool}")
    except KeyError:  # index_slices not run: this manager reads no slices
        return {}
    return dra.device_facts(pool, device.driver, device.device)


def allocation_status(
    cache: Cache, pods: Iterable[Obj], per_pod: int | None, previous: Obj | None = None
) -> Obj:
    """status.allocation for a service's pods (see the module docstring).

    per_pod: devices one pod's claims ask for; None when unknown (allocationMode All),
    then a pod is expected to hold what DRA gave it, once allocated.
    previous: the status.allocation written before, whose devicesPerPod is kept while
    no pod holds devices and the claims ask for the same; a GPUQuota that scaled the
    service to zero for what its pods held would otherwise charge the guide's count
    again, admit it, and scale it down once more, forever. Its rows also keep the devices
    of a bound pod still cached as live whose claims the cache shows unallocated or gone:
    a claim reserved for a bound pod is deallocated only once the pod is gone, so its
    events are behind the claim's (separate watches), and those devices are what names
    the taint that evicted it (device_taints.py).
    """
    held = _previous_devices(previous)
    rows = []
    expected = allocated = allocated_pods = 0
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        ns = pod["metadata"].get("namespace") or ""
        devices = []
        complete = True
        for entry, claim_name in sorted(dra.pod_claim_names(pod).items()):
            claim = cache.get(RESOURCE_CLAIM, ns, claim_name) if claim_name else None
            if claim is None or not dra.is_allocated(claim):
                complete = complete and entry == ""  # the extended-resource claim is extra
                continue
            devices += [
                {
                    "claim": str(claim_name),
                    "request": d.request,
                    "driver": d.driver,
                    "pool": d.pool,
                    "device": d.device,
                    **device_facts(cache, d),
                }
                for d in dra.allocated_devices(claim)
            ]
        bound = bool((pod.get("spec") or {}).get("nodeName"))
        if not devices and bound and held.get(str(pod["metadata"]["name"])):
            devices, complete = held[str(pod["metadata"]["name"])], True
        complete = complete and bool(devices)
        allocated += len(devices)
        allocated_pods += complete
        expected += per_pod if per_pod is not None else (len(devices) if complete else 0)
        rows.append({"name": pod["metadata"]["name"], "devices": devices})
    status: Obj = {
        "expectedDevices": expected,
        "allocatedDevices": allocated,
        "allocatedPods": allocated_pods,
        "summary": f"{allocated}/{expected}",
        "pods": rows,
    }
    if per_pod is not None:
        status["requestedPerPod"] = per_pod
    observed = _observed_per_pod(allocated, allocated_pods, per_pod, previous)
    if observed:
        status["devicesPerPod"] = observed
    return status


def _previous_devices(previous: Obj | None) -> dict[str, list[Obj]]:
    """The devices each pod held in the status.allocation written before, by pod name."""
    rows = previous.get("pods") if isinstance(previous, dict) else None
    return {
        str(row.get("name")): [d for d in row.get("devices") or [] if isinstance(d, dict)]
        for row in rows or []
        if isinstance(row, dict) and row.get("devices")
    }


def _observed_per_pod(
    allocated: int, allocated_pods: int, per_pod: int | None, previous: Obj | None
) -> int:
    """Devices one allocated pod holds (rounded up); else the last seen, same claims."""
    if allocated_pods:
        return -(-allocated // allocated_pods)
    if not isinstance(previous, dict) or previous.get("requestedPerPod") != per_pod:
        return 0
    kept = previous.get("devicesPerPod")
    return kept if isinstance(kept, int) and not isinstance(kept, bool) and kept > 0 else 0
