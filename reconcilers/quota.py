"""GPUQuota accounting: which services each quota covers, and how many replicas fit.

A GPUQuota covers the InferenceServices of `spec.namespaceRef`, or, with
`spec.selector`, those in its own namespace whose pods carry matching labels. Services
are served first come, first served (creation time, then name), so an older service is
never scaled down to make room for a newer one; a service under several quotas gets
what fits under all of them. A service whose replicas cost nothing is admitted in full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api import GPUQuotaSpec, InvalidSpec, parse_gpu_quota, parse_inference_service, parse_model
from controller.cache import Cache
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE, MODEL

from .gpu import replica_charge
from .workload import pod_labels

Obj = dict[str, Any]


@dataclass(frozen=True)
class Demand:
    name: str
    created: str
    replicas: int
    gpus_per_replica: int
    quotas: tuple[str, ...] = ()  # keys of the quotas covering it


@dataclass(frozen=True)
class Allocation:
    name: str
    requested_replicas: int
    admitted_replicas: int
    gpus_per_replica: int
    quotas: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return self.admitted_replicas * self.gpus_per_replica


def allocate(limits: dict[str, int], demands: list[Demand]) -> dict[str, Allocation]:
    remaining = dict(limits)
    result = {}
    for d in sorted(demands, key=lambda d: (d.created, d.name)):
        admitted = d.replicas
        if d.gpus_per_replica > 0:
            for q in d.quotas:
                admitted = min(admitted, remaining[q] // d.gpus_per_replica)
            for q in d.quotas:
                remaining[q] -= admitted * d.gpus_per_replica
        result[d.name] = Allocation(d.name, d.replicas, admitted, d.gpus_per_replica, d.quotas)
    return result


def quota_key(quota: Obj) -> str:
    return f"{quota['metadata'].get('namespace', '')}/{quota['metadata']['name']}"


def quota_scope(quota: Obj, spec: GPUQuotaSpec) -> str:
    """The namespace whose services the quota covers."""
    return spec.namespace_ref or quota["metadata"].get("namespace", "")


def quotas_for(cache: Cache, namespace: str) -> dict[str, tuple[Obj, GPUQuotaSpec]]:
    """The valid GPUQuotas (in any namespace) whose scope is this namespace."""
    found = {}
    for quota in cache.list(GPU_QUOTA):
        try:
            spec = parse_gpu_quota(quota.get("spec"))
        except InvalidSpec:
            continue  # an invalid quota reports itself; it limits nothing
        if quota_scope(quota, spec) == namespace:
            found[quota_key(quota)] = (quota, spec)
    return found


def namespace_demands(
    cache: Cache, namespace: str, quotas: dict[str, tuple[Obj, GPUQuotaSpec]]
) -> list[Demand]:
    """What each valid InferenceService with a valid Model asks for, and who covers it."""
    demands = []
    for isvc in cache.list(INFERENCE_SERVICE, namespace):
        meta = isvc["metadata"]
        try:
            service = parse_inference_service(isvc.get("spec"))
            model_obj = cache.get(MODEL, namespace, service.model_ref)
            if model_obj is None:
                continue
            model = parse_model(model_obj.get("spec"))
        except InvalidSpec:
            continue
        labels = pod_labels(isvc, service)
        covering = tuple(
            key
            for key, (q, spec) in sorted(quotas.items())
            if spec.covers(q["metadata"].get("namespace", ""), namespace, labels)
        )
        demands.append(
            Demand(
                meta["name"],
                str(meta.get("creationTimestamp", "")),
                service.wanted_replicas,
                replica_charge(model, service),
                covering,
            )
        )
    return demands


@dataclass(frozen=True)
class NamespaceQuota:
    limits: dict[str, int]  # quota key -> gpuCount
    allocations: dict[str, Allocation]  # service name -> allocation

    def limit_for(self, allocation: Allocation | None) -> int | None:
        """The tightest gpuCount among the quotas covering a service (None: uncovered)."""
        if allocation is None or not allocation.quotas:
            return None
        return min(self.limits[q] for q in allocation.quotas)


def namespace_allocations(cache: Cache, namespace: str) -> NamespaceQuota:
    """The quotas over this namespace and what each service is admitted.

    Without a GPUQuota every service is admitted in full, so the namespace's services
    and Models are not parsed on every reconcile for nothing.
    """
    quotas = quotas_for(cache, namespace)
    if not quotas:
        return NamespaceQuota({}, {})
    limits = {key: spec.gpu_count for key, (_, spec) in quotas.items()}
    return NamespaceQuota(limits, allocate(limits, namespace_demands(cache, namespace, quotas)))
