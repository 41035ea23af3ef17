"""The GPUQuota rule: how many replicas of each service fit under the quotas over it.

The rule runs over every service under a group of quotas at once (a selector quota can
span namespaces: its gpuCount is shared by all of them). Services are served first
come, first served (creation time, then namespace and name), so an older service is
never scaled down to make room for a newer one; a service under several
quotas gets what fits under all of them. A service whose replicas cost nothing is
admitted in full, unless its priority is below a covering quota's minPriority (LLMKube
checks the priority whatever the request).

Beside `gpuCount`, a quota may cap VRAM (`vramBytes`, 0: no cap: one replica uses its
Model's `hardware.gpu.memory` times the GPUs it is charged, or, on a shared GPU, the
service's `gpuSharing.memoryLimitGiB`) and refuse services below a
priority (`minPriority`, LLMKube's order critical > high > normal > low > batch; a
service's `priority` defaults to normal). The VRAM cap is one more budget: it lives in
the same leftovers as the GPUs, under the quota's key plus `VRAM`.

One replica is charged the guide's GPU count (`replica_charge`), except a claims
service (its Model's claims, or managed ones) whose devices DRA has allocated: it is
charged what its pods really hold, `status.allocation.devicesPerPod`
(ceil(allocatedDevices / allocatedPods), kept by the InferenceService while its pods are
gone so that the charge does not flip back).

Pure: no cache, no I/O. index.py keeps the same answer up to date from events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api import GPUQuotaSpec, InferenceServiceSpec, ModelSpec, gpu_count
from objtypes import Obj
from runtimes.gpu import uses_gpu

Key = tuple[str, str]  # (namespace, name) of a service


def gpus_per_replica(model: ModelSpec, service: InferenceServiceSpec) -> int:
    """What one replica is charged against a GPUQuota.

    LLMKube's GPU count per replica (count, else spec.resources.gpu): a claims model
    with neither is not charged; a device-plugin model is charged the limit it gets.
    """
    if model.uses_claims:
        return gpu_count(model, service.gpu)
    if uses_gpu(model, service):
        return gpu_count(model, service.gpu) or 1
    return 0


def members_per_replica(service: InferenceServiceSpec) -> int:
    return len(service.multi_node.members) if service.multi_node else 1


def replica_charge(model: ModelSpec, service: InferenceServiceSpec) -> int:
    """GPUs one replica costs: per pod, times the member pods of a multiNode replica."""
    return gpus_per_replica(model, service) * members_per_replica(service)


@dataclass(frozen=True)
class Demand:
    name: str
    created: str
    replicas: int
    gpus_per_replica: int
    quotas: tuple[str, ...] = ()  # keys of the quotas covering it
    allocated_gpus: int = 0  # devices DRA allocated to its pods (status.allocation)
    namespace: str = ""
    vram_per_replica: int = 0  # bytes
    priority: str = "normal"

    @property
    def key(self) -> Key:
        return self.namespace, self.name

    @property
    def turn(self) -> tuple[str, str, str]:
        """Its place in line: creation time, then namespace and name."""
        return self.created, self.namespace, self.name


@dataclass(frozen=True)
class Allocation:
    name: str
    requested_replicas: int
    admitted_replicas: int
    gpus_per_replica: int
    quotas: tuple[str, ...] = ()
    allocated_gpus: int = 0
    namespace: str = ""
    vram_per_replica: int = 0
    held_by: str = ""  # what kept replicas back: GPU_COUNT, VRAM_BYTES or MIN_PRIORITY

    @property
    def gpus(self) -> int:
        return self.admitted_replicas * self.gpus_per_replica

    @property
    def vram_bytes(self) -> int:
        return self.admitted_replicas * self.vram_per_replica


VRAM = "/vram"  # a quota's VRAM budget in limits and leftovers: its key + VRAM
GPU_COUNT, VRAM_BYTES, MIN_PRIORITY = "gpuCount", "vramBytes", "minPriority"
# LLMKube's weights (webhook/quota/decision.go, scheduling.go); unknown reads as normal.
PRIORITY_WEIGHTS = {"critical": 1000000, "high": 100000, "normal": 10000, "low": 1000, "batch": 100}


def priority_weight(priority: str | None) -> int:
    return PRIORITY_WEIGHTS.get(priority or "normal", PRIORITY_WEIGHTS["normal"])


def limits_of(specs: Mapping[str, GPUQuotaSpec]) -> dict[str, int]:
    """Each quota's budgets: gpuCount under its key, vramBytes (when capped) beside it."""
    limits: dict[str, int] = {}
    for key, spec in specs.items():
        limits[key] = spec.gpu_count
        if spec.vram_bytes:
            limits[key + VRAM] = spec.vram_bytes
    return limits


def floors_of(specs: Mapping[str, GPUQuotaSpec]) -> dict[str, int]:
    """The priority weight each quota asks at least (quotas without minPriority: none)."""
    return {k: priority_weight(s.min_priority) for k, s in specs.items() if s.min_priority}


def _budgets(quotas: tuple[str, ...], gpus: int, vram: int) -> list[tuple[str, int, str]]:
    """(budget key, cost per replica, its name) of every budget a replica draws on."""
    return [b for q in quotas for b in ((q, gpus, GPU_COUNT), (q + VRAM, vram, VRAM_BYTES))]


def consume(remaining: dict[str, int], a: Allocation) -> None:
    """Take what a's admitted replicas cost out of remaining."""
    for key, cost, _ in _budgets(a.quotas, a.gpus_per_replica, a.vram_per_replica):
        if cost > 0 and key in remaining:
            remaining[key] -= a.admitted_replicas * cost


def admit(d: Demand, remaining: dict[str, int], floors: Mapping[str, int]) -> Allocation:
    """d's turn: the replicas that fit under every quota covering it (taken from remaining)."""
    admitted, held_by = d.replicas, ""
    if any(priority_weight(d.priority) < floors.get(q, 0) for q in d.quotas):
        admitted, held_by = 0, MIN_PRIORITY
    for key, cost, name in _budgets(d.quotas, d.gpus_per_replica, d.vram_per_replica):
        if cost > 0 and key in remaining and remaining[key] // cost < admitted:
            admitted, held_by = max(0, remaining[key] // cost), name
    allocation = Allocation(
        d.name,
        d.replicas,
        admitted,
        d.gpus_per_replica,
        d.quotas,
        d.allocated_gpus,
        d.namespace,
        d.vram_per_replica,
        held_by if admitted < d.replicas else "",
    )
    consume(remaining, allocation)
    return allocation


def allocate(
    limits: dict[str, int], demands: list[Demand], floors: Mapping[str, int] | None = None
) -> dict[Key, Allocation]:
    """The rule, over every service under a group of quotas: first come, first served."""
    remaining = dict(limits)
    floors = floors or {}
    return {d.key: admit(d, remaining, floors) for d in sorted(demands, key=lambda d: d.turn)}


def _non_negative_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _allocation(isvc: Obj) -> Obj:
    """status.allocation, or {} when absent or malformed."""
    status = isvc.get("status")
    allocation = status.get("allocation") if isinstance(status, dict) else None
    return allocation if isinstance(allocation, dict) else {}


def allocated_totals(isvc: Obj) -> tuple[int, int]:
    """(allocatedDevices, allocatedPods) from status.allocation; (0, 0) when absent."""
    allocation = _allocation(isvc)
    return (
        _non_negative_int(allocation.get("allocatedDevices")),
        _non_negative_int(allocation.get("allocatedPods")),
    )


def served_by_claims(isvc: Obj, model: ModelSpec) -> bool:
    """The service's pods get their GPUs through claims: the Model's, or the template the
    controller made for it (status.managedClaims, reconcilers/devices/managed.py)."""
    status = isvc.get("status")
    return model.uses_claims or bool(isinstance(status, dict) and status.get("managedClaims"))


def charge_per_replica(isvc: Obj, model: ModelSpec, service: InferenceServiceSpec) -> int:
    """What one replica costs: the devices DRA allocated per pod for a claims service
    whose pods hold (or last held) devices, otherwise the guide's rule."""
    if served_by_claims(isvc, model):
        devices, pods = allocated_totals(isvc)
        if pods > 0:
            return -(-devices // pods)
        kept = _non_negative_int(_allocation(isvc).get("devicesPerPod"))
        if kept:
            return kept
    return replica_charge(model, service)


GIB = 2**30


def vram_per_replica(model: ModelSpec, service: InferenceServiceSpec, charge: int) -> int:
    """The GPU memory one replica is charged against a vramBytes cap: in gpuSharing mode
    shared, spec.resources.gpuSharing.memoryLimitGiB when set (LLMKube's podVRAMBytes:
    the footprint the service declares on its shared seat), else the Model's
    hardware.gpu.memory times the GPUs charged."""
    limit = service.sharing.memory_limit_gib
    if service.sharing.mode == "shared" and limit:
        return limit * GIB
    return model.gpu.memory_bytes * charge


@dataclass(frozen=True)
class NamespaceQuota:
    """One namespace's view: the limits over it and its services' allocations."""

    limits: dict[str, int]  # quota key -> gpuCount
    allocations: dict[str, Allocation]  # service name (in this namespace) -> allocation

    def limit_for(self, allocation: Allocation | None) -> int | None:
        """The tightest gpuCount among the quotas covering a service (None: uncovered)."""
        if allocation is None or not allocation.quotas:
            return None
        return min(self.limits[q] for q in allocation.quotas)
