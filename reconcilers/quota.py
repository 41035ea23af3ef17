"""GPUQuota accounting: who in a namespace gets how many replicas under the limit.

Services are served first come, first served (creation time, then name), so an
older service is never scaled down to make room for a newer one. A service whose
replicas cost nothing (no GPUs charged) is always admitted in full. With several
GPUQuotas in a namespace the smallest limit applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.cache import Cache
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE, MODEL

from .gpu import replica_charge
from .spec import InvalidSpec, parse_gpu_quota, parse_inference_service, parse_model

Obj = dict[str, Any]


@dataclass(frozen=True)
class Demand:
    name: str
    created: str
    replicas: int
    gpus_per_replica: int


@dataclass(frozen=True)
class Allocation:
    name: str
    requested_replicas: int
    admitted_replicas: int
    gpus_per_replica: int

    @property
    def gpus(self) -> int:
        return self.admitted_replicas * self.gpus_per_replica


def allocate(limit: int | None, demands: list[Demand]) -> dict[str, Allocation]:
    remaining = limit
    result = {}
    for d in sorted(demands, key=lambda d: (d.created, d.name)):
        admitted = d.replicas
        if remaining is not None and d.gpus_per_replica > 0:
            admitted = min(d.replicas, remaining // d.gpus_per_replica)
            remaining -= admitted * d.gpus_per_replica
        result[d.name] = Allocation(d.name, d.replicas, admitted, d.gpus_per_replica)
    return result


def namespace_limit(cache: Cache, namespace: str) -> int | None:
    limits = []
    for quota in cache.list(GPU_QUOTA, namespace):
        try:
            limits.append(parse_gpu_quota(quota.get("spec")).limit)
        except InvalidSpec:
            continue  # an invalid quota reports itself; it limits nothing
    return min(limits) if limits else None


def namespace_demands(cache: Cache, namespace: str) -> list[Demand]:
    """What each valid InferenceService with a valid Model asks for."""
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
        per_replica = replica_charge(model, service)
        demands.append(
            Demand(
                meta["name"], str(meta.get("creationTimestamp", "")), service.replicas, per_replica
            )
        )
    return demands


def namespace_allocations(cache: Cache, namespace: str) -> tuple[int | None, dict[str, Allocation]]:
    """The namespace's limit and what each service is admitted; nothing to admit without one.

    Without a GPUQuota every service is admitted in full, so the namespace's services
    and Models are not parsed on every reconcile for nothing.
    """
    limit = namespace_limit(cache, namespace)
    if limit is None:
        return None, {}
    return limit, allocate(limit, namespace_demands(cache, namespace))
