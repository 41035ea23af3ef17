"""Why no published device can serve a claim's request: the claim, the request, the
selector that leaves too few devices, and what the ResourceSlices offer instead.

The scheduler says "cannot allocate all claims" and nothing more; this names the part
that fails, e.g. `ResourceClaimTemplate big request gpu: 0 of 8 device(s) of DeviceClass
"gpu.nvidia.com" match device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("96Gi"))
>= 0 (one pod needs 1); published: 8 x NVIDIA H100 80GB HBM3, 80Gi`.

Each request is checked on its own against every published device (allocated ones too:
the question is whether it could ever be served), one pod's devices coming from one
node, as the scheduler allocates them: class selectors first, then the request's own, in
order, the first that leaves fewer devices on the best node than the request needs is
named; then its capacity requests (KEP-5075: a share of a device's memory), each
device's capacity at least the amount asked. Then the devices left must be enough
without those tainted NoSchedule or NoExecute that the request does not tolerate
(taints.py); else each tainted device (`driver/pool/device`) and its taint
(`key=value:Effect`) is named. firstAvailable fails only when every alternative does.
Pure."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from objtypes import Obj
from reconcilers.devices.selectors import Device, SelectorError, matches, quantity_value
from reconcilers.devices.taints import untolerated

# Tainted devices a message names before it counts the rest.
_SHOWN = 4


@dataclass(frozen=True)
class Shortfall:
    claim: str  # "ResourceClaimTemplate two-gpus"
    request: str
    selector: str | None  # the selector that leaves too few; None: the count alone
    message: str


def _selectors(spec: Any) -> list[str]:
    return [
        str((s.get("cel") or {}).get("expression") or "")
        for s in (spec.get("selectors") if isinstance(spec, Mapping) else None) or []
        if isinstance(s, Mapping)
    ]


def _best_node(found: list[Device]) -> int:
    """The most devices one pod can get: one node's, plus those every node reaches."""
    shared = sum(1 for d in found if not d.node)
    per_node = Counter(d.node for d in found if d.node)
    return shared + max(per_node.values(), default=0)


def published(found: Iterable[Device]) -> str:
    """What devices there are: `8 x NVIDIA H100 80GB HBM3, 80Gi`, by product and memory."""
    groups = Counter(
        (str(d.attribute("productName") or f"{d.driver} device"), d.memory()) for d in found
    )
    if not groups:
        return "none"
    return ", ".join(
        f"{n} x {product}" + (f", {memory}" if memory else "")
        for (product, memory), n in sorted(groups.items(), key=lambda g: (-g[1], g[0][0]))
    )


# A DeviceClass's usual selector, read without the interpreter (it runs on every device).
_DRIVER_ONLY = re.compile(r"""^\s*device\.driver\s*==\s*(["'])([^"'\\]*)\1\s*$""")


def _filter(expression: str, found: list[Device]) -> list[Device]:
    only = _DRIVER_ONLY.match(expression)
    if only:
        return [d for d in found if d.driver == only.group(2)]
    return [d for d in found if matches(expression, d)]


def _one(
    claim: str,
    request: str,
    spec: Mapping[str, Any],
    classes: Mapping[str, Obj],
    all_: list[Device],
) -> Shortfall | None:
    name = str(spec.get("deviceClassName") or "")
    cls = classes.get(name)
    if cls is None:
        return None  # DeviceClassNotFound is said elsewhere
    mode = spec.get("allocationMode") or "ExactCount"
    need = 1 if mode == "All" else int(spec.get("count") or 1)
    where = f"{claim} request {request!r}"
    try:
        candidates = all_
        for expression in _selectors(cls.get("spec")):
            candidates = _filter(expression, candidates)
        matching = candidates
        for expression in _selectors(spec):
            narrowed = _filter(expression, matching)
            if _best_node(narrowed) < need:
                return Shortfall(
                    claim,
                    request,
                    expression,
                    f"{where}: {len(narrowed)} of {len(candidates)} device(s) of DeviceClass "
                    f"{name!r} match {expression} (one pod needs {need}"
                    + (f", the most on one node is {_best_node(narrowed)}" if narrowed else "")
                    + f"); published: {published(candidates)}",
                )
            matching = narrowed
        for capacity, wanted in _capacity_requests(spec):
            narrowed = [d for d in matching if _holds(d, capacity, wanted)]
            if _best_node(narrowed) < need:
                return Shortfall(
                    claim,
                    request,
                    None,
                    f"{where}: {len(narrowed)} of {len(matching)} matching device(s) have "
                    f"{capacity} capacity of at least {wanted} (one pod needs {need}); "
                    f"published: {published(matching)}",
                )
            matching = narrowed
    except SelectorError as e:
        return Shortfall(claim, request, None, f"{where}: a selector fails: {e}")
    if _best_node(matching) < need:
        return Shortfall(
            claim,
            request,
            None,
            f"{where}: one pod needs {need} device(s) of DeviceClass {name!r}, the most one "
            f"node publishes is {_best_node(matching)}; published: {published(candidates)}",
        )
    return _tainted(claim, request, where, need, spec.get("tolerations"), matching)


def _capacity_requests(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A request's `capacity.requests` (KEP-5075): each must fit in a device's capacity,
    as a selector `device.capacity[...].name.compareTo(quantity(wanted)) >= 0` would."""
    requests = (spec.get("capacity") or {}).get("requests") if isinstance(spec, Mapping) else None
    return [(str(k), str(v)) for k, v in (requests or {}).items()]


def _holds(device: Device, capacity: str, wanted: str) -> bool:
    have = device.capacity_of(capacity)
    return have is not None and quantity_value(have) >= quantity_value(wanted)


def _tainted(
    claim: str,
    request: str,
    where: str,
    need: int,
    tolerations: Any,
    matching: list[Device],
) -> Shortfall | None:
    """Too few of the matching devices are free of NoSchedule/NoExecute taints the
    request does not tolerate: name each tainted device and its taints."""
    blocked = {d.path: untolerated(d.taints, tolerations) for d in matching}
    free = [d for d in matching if not blocked[d.path]]
    if _best_node(free) >= need:
        return None
    tainted = sorted((path, taints) for path, taints in blocked.items() if taints)
    shown = ", ".join(
        f"{path} ({', '.join(str(t) for t in taints)})" for path, taints in tainted[:_SHOWN]
    )
    more = f" and {len(tainted) - _SHOWN} more" if len(tainted) > _SHOWN else ""
    return Shortfall(
        claim,
        request,
        None,
        f"{where}: {len(tainted)} of {len(matching)} matching device(s) are tainted and the "
        f"request does not tolerate it: {shown}{more} (one pod needs {need}, the most "
        f"untainted on one node is {_best_node(free)})",
    )


def shortfalls(
    claim: str, claim_spec: Mapping[str, Any], classes: Mapping[str, Obj], found: list[Device]
) -> list[Shortfall]:
    """The requests of one ResourceClaimSpec no published device can serve."""
    out = []
    for request in (claim_spec.get("devices") or {}).get("requests") or []:
        if not isinstance(request, Mapping):
            continue
        name = str(request.get("name") or "")
        if isinstance(request.get("exactly"), Mapping):
            short = _one(claim, name, request["exactly"], classes, found)
            if short:
                out.append(short)
            continue
        alternatives = [a for a in request.get("firstAvailable") or [] if isinstance(a, Mapping)]
        failed = [_one(claim, f"{name}/{a.get('name')}", a, classes, found) for a in alternatives]
        if alternatives and all(failed) and failed[0] is not None:
            out.append(failed[0])
    return out
