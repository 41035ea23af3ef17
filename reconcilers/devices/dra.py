"""What DRA (resource.k8s.io/v1) objects say, read from plain dict API objects.

Pure functions over ResourceClaim(Template)s, Pods, DeviceClasses and ResourceSlices as
the API server returns them: no I/O, no spec types, only the standard library. The
reconcilers use them to size runtimes from claims, check that the cluster can serve a
pod, show what DRA allocated and charge quota (Kueue's verdict is reconcilers/devices/kueue.py).

Counting rules (one pod's claims):
- `exactly` with `allocationMode: ExactCount` (the default) asks for `count` devices
  (default 1);
- `exactly` with `allocationMode: All` asks for every matching device of a node: the
  number is unknown until allocation, so the total is None and a reason says why;
- `firstAvailable`: when every alternative asks for the same number of devices, that
  number; otherwise which one is granted is known only at allocation, so the total is
  None (a reason gives the range). by_class holds the FIRST alternative (the one the
  allocator tries first; what Kueue would see, were it to support firstAvailable);
  minimum_by_class the smallest. The claim's allocation results are the truth.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = Mapping[str, Any]

# The implicit extended resource every DeviceClass gets under KEP-5004.
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
ALL = "All"
EXACT_COUNT = "ExactCount"

_DRIVER_EQ = re.compile(r"""^\(?\s*device\.driver\s*==\s*(["'])([^"']+)\1\s*\)?$""")


def _get(obj: Any, *path: str) -> Any:
    """obj[path[0]][path[1]]...; None as soon as a step is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(value: Any) -> int:
    try:
        return max(int(value), 0) if value is not None else 1
    except (TypeError, ValueError):
        return 1


# -- devices requested ------------------------------------------------------------


@dataclass
class DeviceDemand:
    """Devices asked for. total None: unknown (All); by_class: the known part, per class."""

    total: int | None = 0
    by_class: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    all_mode: bool = False
    first_available: bool = False
    # The fewest devices per class that could satisfy the requests: All needs at least
    # one device, firstAvailable its smallest alternative. What capacity is checked against.
    minimum_by_class: dict[str, int] = field(default_factory=dict)
    # Every DeviceClass a request or alternative names.
    classes: set[str] = field(default_factory=set)

    def add(self, other: DeviceDemand) -> None:
        self.total = None if self.total is None or other.total is None else self.total + other.total
        for cls, n in other.by_class.items():
            self.by_class[cls] = self.by_class.get(cls, 0) + n
        for cls, n in other.minimum_by_class.items():
            self.minimum_by_class[cls] = self.minimum_by_class.get(cls, 0) + n
        self.classes |= other.classes
        self.reasons.extend(other.reasons)
        self.all_mode |= other.all_mode
        self.first_available |= other.first_available


def claim_spec(obj: Obj) -> Obj:
    """The ResourceClaimSpec of a ResourceClaim or of a ResourceClaimTemplate."""
    if obj.get("kind") == "ResourceClaimTemplate" or isinstance(_get(obj, "spec", "spec"), Mapping):
        spec = _get(obj, "spec", "spec")
    else:
        spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def requested_devices(obj: Obj) -> DeviceDemand:
    """Devices a ResourceClaim or ResourceClaimTemplate asks for (see the module rules)."""
    demand = DeviceDemand()
    for req in _list(_get(claim_spec(obj), "devices", "requests")):
        name = str(_get(req, "name") or "")
        exactly = _get(req, "exactly")
        if isinstance(exactly, Mapping):
            _add_request(demand, exactly, f'request "{name}"')
            _add_minimum(demand, exactly)
            continue
        subs = [s for s in _list(_get(req, "firstAvailable")) if isinstance(s, Mapping)]
        if not subs:
            continue
        demand.first_available = True
        demand.classes |= {str(sub.get("deviceClassName") or "") for sub in subs}
        _add_minimum(demand, min(subs, key=_minimum))
        first = subs[0]
        where = f'request "{name}" (firstAvailable, first of {len(subs)}: "{first.get("name")}")'
        counted = _add_request(demand, first, where)
        if counted is None:
            continue
        counts = sorted({_minimum(sub) for sub in subs} | {counted})
        if len(counts) > 1 or any(sub.get("allocationMode") == ALL for sub in subs):
            # Which alternative is granted is known only at allocation.
            demand.total = None
            demand.reasons.append(
                f"{where}: {counts[0]} to {counts[-1]} device(s), known only at allocation"
            )
        else:
            demand.reasons.append(f"{where} counted as {counted} device(s)")
    return demand


def _add_request(demand: DeviceDemand, request: Obj, where: str) -> int | None:
    cls = str(request.get("deviceClassName") or "")
    if request.get("allocationMode") == ALL:
        demand.all_mode = True
        demand.total = None
        demand.reasons.append(f"{where} uses allocationMode All: the device count is unknown")
        return None
    n = _count(request.get("count"))
    if demand.total is not None:
        demand.total += n
    demand.by_class[cls] = demand.by_class.get(cls, 0) + n
    return n


def _minimum(request: Obj) -> int:
    return 1 if request.get("allocationMode") == ALL else _count(request.get("count"))


def _add_minimum(demand: DeviceDemand, request: Obj) -> None:
    cls = str(request.get("deviceClassName") or "")
    demand.classes.add(cls)
    demand.minimum_by_class[cls] = demand.minimum_by_class.get(cls, 0) + _minimum(request)


def pod_demand(claims: Iterable[Obj]) -> DeviceDemand:
    """Devices one pod asks for through its claims and templates, summed."""
    total = DeviceDemand()
    for claim in claims:
        total.add(requested_devices(claim))
    return total


def count_mismatch(count: int | None, demand: DeviceDemand) -> str | None:
    """A message when the Model's `count` and what the claims ask for disagree."""
    if count is None or demand.total is None or demand.total == count:
        return None
    sized = (
        f"count ({count})"
        if count < demand.total
        else f"the {demand.total} device(s) a pod gets: it cannot run more"
    )
    return (
        f"count is {count} but the claims ask for {demand.total} device(s) per pod; "
        f"the runtime is sized for {sized}"
    )


# -- what DRA allocated -----------------------------------------------------------


@dataclass(frozen=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


def allocated_devices(claim: Obj) -> list[AllocatedDevice]:
    """status.allocation.devices.results of a claim ([] while unallocated)."""
    results = _get(claim, "status", "allocation", "devices", "results")
    return [
        AllocatedDevice(
            str(r.get("request") or ""),
            str(r.get("driver") or ""),
            str(r.get("pool") or ""),
            str(r.get("device") or ""),
        )
        for r in _list(results)
        if isinstance(r, Mapping)
    ]


def is_allocated(claim: Obj) -> bool:
    return isinstance(_get(claim, "status", "allocation"), Mapping)


def reserved_for(claim: Obj) -> list[str]:
    """Names of the consumers (pods) a claim is reserved for."""
    return [str(r.get("name")) for r in _list(_get(claim, "status", "reservedFor")) if r]


def pod_claim_names(pod: Obj) -> dict[str, str | None]:
    """pod.spec.resourceClaims entry name -> the ResourceClaim it uses.

    resourceClaimName entries name the claim directly; template entries are found in
    pod.status.resourceClaimStatuses (None until the claim was created). The claim the
    scheduler makes for DRA-backed extended resources is listed under "" when present.
    """
    statuses = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in _list(_get(pod, "status", "resourceClaimStatuses"))
        if isinstance(s, Mapping)
    }
    names: dict[str, str | None] = {}
    for ref in _list(_get(pod, "spec", "resourceClaims")):
        if not isinstance(ref, Mapping):
            continue
        entry = str(ref.get("name") or "")
        if ref.get("resourceClaimName"):
            names[entry] = str(ref["resourceClaimName"])
        else:
            found = statuses.get(entry)
            names[entry] = str(found) if found else None
    extended = _get(pod, "status", "extendedResourceClaimStatus", "resourceClaimName")
    if extended:
        names[""] = str(extended)
    return names


def pod_allocated_devices(pod: Obj, claims: Mapping[str, Obj]) -> list[AllocatedDevice]:
    """Devices allocated to a pod, from `claims` (claim name -> claim, pod's namespace).

    A claim shared by several pods (resourceClaimName) counts for each of them.
    """
    found: list[AllocatedDevice] = []
    for name in pod_claim_names(pod).values():
        if name and name in claims:
            found.extend(allocated_devices(claims[name]))
    return found


# -- classes and slices -----------------------------------------------------------


@dataclass(frozen=True)
class ClassDrivers:
    """Drivers a DeviceClass can match. drivers None: any driver (no selector) or not
    known (a selector this module cannot read). exact False: other CEL terms narrow the
    devices further, so counts of published devices are an upper bound."""

    drivers: frozenset[str] | None
    exact: bool
    readable: bool = True


def class_drivers(device_class: Obj) -> ClassDrivers:
    """Drivers from the class's CEL selectors, reading `device.driver == "x"`.

    Each selector must hold; within one, `||` alternatives each need a driver term
    and `&&` terms beside it make the match inexact. Anything else is unreadable.
    """
    drivers: frozenset[str] | None = None
    exact = True
    for sel in _list(_get(device_class, "spec", "selectors")):
        expr = _get(sel, "cel", "expression")
        if not isinstance(expr, str):
            return ClassDrivers(None, False, readable=False)
        found: set[str] = set()
        for alternative in expr.split("||"):
            terms = [t.strip() for t in alternative.split("&&")]
            matches = [m for t in terms if (m := _DRIVER_EQ.match(t))]
            if not matches:
                return ClassDrivers(None, False, readable=False)
            exact &= len(terms) == 1
            found.add(matches[0].group(2))
        drivers = frozenset(found) if drivers is None else drivers & found
    return ClassDrivers(drivers, exact)


def published_devices(slices: Iterable[Obj]) -> dict[str, dict[str, int]]:
    """Devices published per node and driver: {node: {driver: n}}; "" is every node.

    Only the newest generation of each (driver, pool) counts, as the allocator does
    while a driver rewrites its pool. Slices selecting nodes by label count under "".
    """
    slices = [s for s in slices if isinstance(s, Mapping)]
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (str(_get(s, "spec", "driver") or ""), str(_get(s, "spec", "pool", "name") or ""))
        gen = int(_get(s, "spec", "pool", "generation") or 0)
        newest[key] = max(newest.get(key, gen), gen)
    counts: dict[str, dict[str, int]] = {}
    for s in slices:
        driver = str(_get(s, "spec", "driver") or "")
        key = (driver, str(_get(s, "spec", "pool", "name") or ""))
        if int(_get(s, "spec", "pool", "generation") or 0) < newest[key]:
            continue
        node = str(_get(s, "spec", "nodeName") or "")
        per_node = counts.setdefault(node, {})
        per_node[driver] = per_node.get(driver, 0) + len(_list(_get(s, "spec", "devices")))
    return counts


def _attribute(entries: Any, driver: str, name: str) -> Any:
    """A device attribute or capacity by its name, unqualified (the driver's own domain,
    as NVIDIA's driver publishes) or qualified `<driver>/<name>`."""
    if not isinstance(entries, Mapping):
        return None
    return entries.get(name, entries.get(f"{driver}/{name}"))


def device_facts(pool_slices: Iterable[Obj], driver: str, device: str) -> dict[str, str]:
    """What the pool's newest slices publish of one device: productName (NVIDIA's
    attribute) and its memory capacity, as far as they say; {} when it is not there."""
    pool = [
        s for s in pool_slices if isinstance(s, Mapping) and _get(s, "spec", "driver") == driver
    ]
    newest = max((int(_get(s, "spec", "pool", "generation") or 0) for s in pool), default=0)
    for s in pool:
        if int(_get(s, "spec", "pool", "generation") or 0) < newest:
            continue
        for d in _list(_get(s, "spec", "devices")):
            if not isinstance(d, Mapping) or d.get("name") != device:
                continue
            facts = {}
            product = _attribute(d.get("attributes"), driver, "productName")
            if isinstance(product, Mapping) and isinstance(product.get("string"), str):
                facts["productName"] = product["string"]
            memory = _attribute(d.get("capacity"), driver, "memory")
            if isinstance(memory, Mapping) and memory.get("value") is not None:
                facts["memory"] = str(memory["value"])
            return facts
    return {}


def devices_per_driver(slices: Iterable[Obj]) -> dict[str, int]:
    """Devices published in the whole cluster per driver."""
    total: dict[str, int] = {}
    for per_node in published_devices(slices).values():
        for driver, n in per_node.items():
            total[driver] = total.get(driver, 0) + n
    return total


def matching_devices_on_best_node(
    device_class: Obj, published: Mapping[str, Mapping[str, int]]
) -> int | None:
    """Most devices of the class one node can reach (a pod's claims come from one node).

    None when the class's selectors cannot be read.
    """
    cd = class_drivers(device_class)
    if not cd.readable:
        return None

    def matching(per_driver: Mapping[str, int]) -> int:
        return sum(n for d, n in per_driver.items() if cd.drivers is None or d in cd.drivers)

    everywhere = matching(published.get("", {}))
    nodes = [matching(per) for node, per in published.items() if node]
    return everywhere + max(nodes, default=0)


@dataclass(frozen=True)
class CapacityProblem:
    reason: str  # DeviceClassNotFound, InsufficientDevices, DevicesUnknown
    device_class: str
    message: str


def capacity_problems(
    demand: DeviceDemand, classes: Mapping[str, Obj], slices: Iterable[Obj]
) -> list[CapacityProblem]:
    """Why one pod's devices could never be allocated on this cluster, per class.

    Checked per class against the node that publishes the most matching devices, for
    the fewest devices the requests accept (minimum_by_class: All needs one,
    firstAvailable its smallest alternative); selectors of the requests themselves are
    not considered.
    """
    published = published_devices(slices)
    problems = []
    for cls, need in sorted(demand.minimum_by_class.items()):
        device_class = classes.get(cls)
        if device_class is None:
            problems.append(
                CapacityProblem("DeviceClassNotFound", cls, f'DeviceClass "{cls}" not found')
            )
            continue
        have = matching_devices_on_best_node(device_class, published)
        if have is None:
            problems.append(
                CapacityProblem(
                    "DevicesUnknown",
                    cls,
                    f'DeviceClass "{cls}" selects devices with CEL this controller does not read',
                )
            )
        elif have < need:
            problems.append(
                CapacityProblem(
                    "InsufficientDevices",
                    cls,
                    f'one pod needs {need} device(s) of DeviceClass "{cls}" but the most '
                    f"any node publishes in ResourceSlices is {have}",
                )
            )
    return problems


def extended_resource_class(classes: Mapping[str, Obj], resource: str) -> str | None:
    """The DeviceClass serving extended resource `resource` through DRA (KEP-5004).

    spec.extendedResourceName first (when two classes name it, the newer wins, then
    the first by name, as the API documents); then the implicit
    deviceclass.resource.kubernetes.io/<class> name.
    """
    best: tuple[str, str] | None = None
    for name, cls in classes.items():
        if _get(cls, "spec", "extendedResourceName") != resource:
            continue
        created = str(_get(cls, "metadata", "creationTimestamp") or "")
        if best is None or created > best[0] or (created == best[0] and name < best[1]):
            best = (created, name)
    if best is not None:
        return best[1]
    if resource.startswith(IMPLICIT_EXTENDED_PREFIX):
        name = resource[len(IMPLICIT_EXTENDED_PREFIX) :]
        return name if name in classes else None
    return None
