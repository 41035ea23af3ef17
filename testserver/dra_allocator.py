"""The simulated cluster's DRA allocator, modelled on the scheduler's for resource.k8s.io/v1.

Kept apart from the controller's own reading of DRA objects (reconcilers/devices/dra.py) on
purpose: a simulator that shared the product's code would agree with its bugs.

What it models: devices published by ResourceSlices (driver, pool, device; per node or
allNodes), DeviceClasses whose selectors are the simple CEL `device.driver == "x"`
(several joined with `||`), `exactly` requests in ExactCount (count) and All modes,
`firstAvailable` subrequests (first alternative that fits wins; the result's request is
"<request>/<subrequest>"). Requests are allocated greedily in order, without the real
allocator's backtracking; constraints, config and adminAccess are ignored.

Shared devices (KEP-5075): a device with `allowMultipleAllocations` is selected by the
selector `device.allowMultipleAllocations == true`; a request's
`capacity.requests.memory` takes that much of its `memory` capacity while enough is
left (the result carries `shareID` and `consumedCapacity`), and a request without one
takes the whole device, only while nothing of it is consumed.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from dataclasses import dataclass

from objtypes import Obj

_DRIVER_EQ = re.compile(r"""^\s*device\.driver\s*==\s*(["'])([^"']*)\1\s*$""")
_SHAREABLE = re.compile(r"^\s*device\.allowMultipleAllocations\s*==\s*true\s*$")
_BYTES = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti)?$")
_UNITS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
Consumed = Counter[tuple[str, str, str]]  # bytes of memory taken by shares, per device


class AllocationError(Exception):
    """The claim cannot be allocated on this node; the message says why.

    unresolvable: no node could ever do it (a missing class, an unsupported selector).
    """

    def __init__(self, message: str, *, unresolvable: bool = False) -> None:
        super().__init__(message)
        self.unresolvable = unresolvable


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    shareable: bool = False
    memory: int = 0  # bytes

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


def memory_bytes(value: object) -> int:
    """A binary-suffixed whole quantity (80Gi) in bytes; 0 for anything else."""
    m = _BYTES.match(str(value))
    return int(m.group(1)) * _UNITS[m.group(2)] if m else 0


def consumed_memory(claims: list[Obj]) -> Consumed:
    """What the allocated shares of the claims take of each device's memory."""
    used: Consumed = Counter()
    for c in claims:
        allocation = (c.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or []:
            if r.get("shareID"):
                key = (r.get("driver") or "", r.get("pool") or "", r.get("device") or "")
                used[key] += memory_bytes((r.get("consumedCapacity") or {}).get("memory"))
    return used


def exclusive_keys(claims: list[Obj]) -> set[tuple[str, str, str]]:
    """The devices the allocated claims hold whole (a share holds only its capacity)."""
    return {
        (r.get("driver"), r.get("pool"), r.get("device"))
        for c in claims
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        )
        or []
        if not r.get("shareID")
    }


def node_devices(slices: list[Obj], node: str) -> list[Device]:
    """Devices of the ResourceSlices that a pod on `node` can reach."""
    found = []
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("nodeName") != node and not spec.get("allNodes"):
            continue
        pool = (spec.get("pool") or {}).get("name") or ""
        for d in spec.get("devices") or []:
            memory = ((d.get("capacity") or {}).get("memory") or {}).get("value")
            found.append(
                Device(
                    spec.get("driver") or "",
                    pool,
                    d.get("name") or "",
                    d.get("allowMultipleAllocations") is True,
                    memory_bytes(memory),
                )
            )
    return found


def drivers_of(selectors: list[Obj]) -> set[str] | None:
    """Drivers that satisfy every selector; None when there is no selector (any device).

    Only `device.driver == "x"` (optionally several joined with ||) is understood, and
    `device.allowMultipleAllocations == true` (shareable_only's, skipped here); anything
    else raises AllocationError, as an unevaluable CEL expression fails allocation in a
    real cluster.
    """
    allowed: set[str] | None = None
    for sel in selectors:
        expr = str(((sel or {}).get("cel") or {}).get("expression") or "")
        if _SHAREABLE.match(expr):
            continue
        drivers = set()
        for part in expr.split("||"):
            m = _DRIVER_EQ.match(part)
            if m is None:
                raise AllocationError(
                    f"CEL expression not supported by the simulator: {expr!r}", unresolvable=True
                )
            drivers.add(m.group(2))
        allowed = drivers if allowed is None else allowed & drivers
    return allowed


def _matching(
    devices: list[Device], classes: dict[str, Obj], request: Obj, where: str
) -> list[Device]:
    name = request.get("deviceClassName") or ""
    cls = classes.get(name)
    if cls is None:
        raise AllocationError(f"{where}: device class {name} does not exist", unresolvable=True)
    class_drivers = drivers_of((cls.get("spec") or {}).get("selectors") or [])
    own_drivers = drivers_of(request.get("selectors") or [])
    shareable_only = any(
        _SHAREABLE.match(str(((sel or {}).get("cel") or {}).get("expression") or ""))
        for sel in request.get("selectors") or []
    )
    return [
        d
        for d in devices
        if (class_drivers is None or d.driver in class_drivers)
        and (own_drivers is None or d.driver in own_drivers)
        and (d.shareable or not shareable_only)
    ]


def _share(request: Obj) -> int:
    """The memory a request asks of a device (`capacity.requests.memory`), 0 for none."""
    wanted = ((request.get("capacity") or {}).get("requests") or {}).get("memory")
    return memory_bytes(wanted) if wanted is not None else 0


def _fits(d: Device, taken: set[tuple[str, str, str]], consumed: Consumed, share: int) -> bool:
    if d.key in taken:
        return False
    if share:  # a share of a shareable device's memory, while enough is left
        return d.shareable and consumed[d.key] + share <= d.memory
    return consumed[d.key] == 0  # the whole device


def _pick(
    candidates: list[Device],
    taken: set[tuple[str, str, str]],
    request: Obj,
    consumed: Consumed | None = None,
) -> list[Device]:
    """Devices for one ExactCount/All request, or [] when it does not fit."""
    used = consumed if consumed is not None else Counter()
    free = [d for d in candidates if _fits(d, taken, used, _share(request))]
    if request.get("allocationMode") == "All":
        # All: every matching device, none of them already allocated, at least one.
        return free if candidates and len(free) == len(candidates) else []
    try:
        count = int(request.get("count") or 1)
    except (TypeError, ValueError):
        return []  # the API server rejects such a count; never fits here
    return free[:count] if len(free) >= count else []


def allocate(
    claim: Obj,
    devices: list[Device],
    classes: dict[str, Obj],
    taken: set[tuple[str, str, str]],
    consumed: Consumed | None = None,
) -> list[Obj]:
    """Allocation results for a claim on one node's devices; raises AllocationError.

    `taken` holds the devices other claims hold whole, `consumed` the memory their shares
    take (consumed_memory); `taken` is not modified, `consumed` gains this claim's shares.
    """
    held = set(taken)
    shares: Consumed = consumed if consumed is not None else Counter()
    results: list[Obj] = []
    name = (claim.get("metadata") or {}).get("name", "")
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    for req in requests:
        rname = req.get("name") or ""
        where = f'claim "{name}", request "{rname}"'
        if "exactly" in req:
            alternatives = [(rname, req.get("exactly") or {})]
        else:
            alternatives = [
                (f"{rname}/{sub.get('name') or ''}", sub) for sub in req.get("firstAvailable") or []
            ]
        chosen = next(
            (
                (result_name, picked)
                for result_name, spec in alternatives
                if (picked := _pick(_matching(devices, classes, spec, where), held, spec, shares))
            ),
            None,
        )
        if chosen is None:
            raise AllocationError(f"{where}: not enough free devices")
        result_name, picked = chosen
        spec = next(sp for n, sp in alternatives if n == result_name)
        share = _share(spec)
        for d in picked:
            result: Obj = {
                "request": result_name,
                "driver": d.driver,
                "pool": d.pool,
                "device": d.name,
            }
            if share:
                shares[d.key] += share
                wanted = spec["capacity"]["requests"]["memory"]
                result.update(shareID=str(uuid.uuid4()), consumedCapacity={"memory": wanted})
            else:
                held.add(d.key)
            results.append(result)
    return results


def extended_resource_classes(classes: dict[str, Obj]) -> dict[str, str]:
    """Extended resource name -> DeviceClass (KEP-5004), explicit names and implicit ones.

    Every class is reachable as deviceclass.resource.kubernetes.io/<class>; with two
    classes naming the same extendedResourceName the newer wins, then the first by name,
    as the API documents.
    """
    mapping = {f"deviceclass.resource.kubernetes.io/{n}": n for n in classes}
    ordered = sorted(
        classes.items(),
        key=lambda kv: ((kv[1].get("metadata") or {}).get("creationTimestamp") or "", kv[0]),
    )
    chosen: dict[str, tuple[str, str]] = {}
    for n, cls in ordered:
        ext = (cls.get("spec") or {}).get("extendedResourceName")
        if not ext:
            continue
        created = (cls.get("metadata") or {}).get("creationTimestamp") or ""
        if ext not in chosen or created > chosen[ext][0]:
            chosen[ext] = (created, n)
    mapping.update({ext: n for ext, (_, n) in chosen.items()})
    return mapping
