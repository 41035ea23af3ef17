"""The GPUQuota rule: how many replicas of each service fit under the quotas over it.

The rule runs over every service under a group of quotas at once (a selector quota can
span namespaces: its gpuCount is shared by all of them). Services are served first
come, first served (creation time, then namespace and name), so an older service is
never scaled down to make room for a newer one; a service under several
quotas gets what fits under all of them. A service whose replicas cost nothing is
admitted in full.

One replica is charged the guide's GPU count (`replica_charge`), except a claims
service whose devices DRA has allocated: it is charged what its pods really hold,
`status.allocation.devicesPerPod` (ceil(allocatedDevices / allocatedPods), kept by the
InferenceService while its pods are gone so that the charge does not flip back).

Pure: no cache, no I/O. quota_index.py keeps the same answer up to date from events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api import InferenceServiceSpec, ModelSpec

from .gpu import replica_charge

Obj = dict[str, Any]


Key = tuple[str, str]  # (namespace, name) of a service


@dataclass(frozen=True)
class Demand:
    name: str
    created: str
    replicas: int
    gpus_per_replica: int
    quotas: tuple[str, ...] = ()  # keys of the quotas covering it
    allocated_gpus: int = 0  # devices DRA allocated to its pods (status.allocation)
    namespace: str = ""

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

    @property
    def gpus(self) -> int:
        return self.admitted_replicas * self.gpus_per_replica


def admit(d: Demand, remaining: dict[str, int]) -> Allocation:
    """d's turn: the replicas that fit under every quota covering it (taken from remaining)."""
    admitted = d.replicas
    if d.gpus_per_replica > 0:
        for q in d.quotas:
            admitted = min(admitted, remaining[q] // d.gpus_per_replica)
        for q in d.quotas:
            remaining[q] -= admitted * d.gpus_per_replica
    return Allocation(
        d.name,
        d.replicas,
        admitted,
        d.gpus_per_replica,
        d.quotas,
        d.allocated_gpus,
        d.namespace,
    )


def allocate(limits: dict[str, int], demands: list[Demand]) -> dict[Key, Allocation]:
    """The rule, over every service under a group of quotas: first come, first served."""
    remaining = dict(limits)
    return {d.key: admit(d, remaining) for d in sorted(demands, key=lambda d: d.turn)}


def _non_negative_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _allocation(isvc: Obj) -> Obj:
    """status.allocation, or {} when absent or malformed."""
    status = isvc.get("status")
    allocation = status.get("allocation") if isinstance(status, dict) else None
    return allocation if isinstance(allocation, dict) else {}


def allocated_devices(isvc: Obj) -> tuple[int, int]:
    """(allocatedDevices, allocatedPods) from status.allocation; (0, 0) when absent."""
    allocation = _allocation(isvc)
    return (
        _non_negative_int(allocation.get("allocatedDevices")),
        _non_negative_int(allocation.get("allocatedPods")),
    )


def charge_per_replica(isvc: Obj, model: ModelSpec, service: InferenceServiceSpec) -> int:
    """What one replica costs: the devices DRA allocated per pod for a claims service
    whose pods hold (or last held) devices, otherwise the guide's rule."""
    if model.uses_claims:
        devices, pods = allocated_devices(isvc)
        if pods > 0:
            return -(-devices // pods)
        kept = _non_negative_int(_allocation(isvc).get("devicesPerPod"))
        if kept:
            return kept
    return replica_charge(model, service)


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
