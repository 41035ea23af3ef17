"""Device taints an admin puts on devices with a DeviceTaintRule (KEP-5055), beside the
taints drivers publish in their ResourceSlices (taints.py).

A rule's `spec.taint` applies to every published device its `spec.deviceSelector`
selects: each of `driver`, `pool` and `device` that is set must equal the device's; on
resource.k8s.io/v1alpha3 (1.34, served only with its runtime-config on) also
`deviceClassName` (the class's selectors) and `selectors` (CEL, all must match). No
selector selects every device. The scheduler and the device-taint-eviction-controller
honour such taints as they honour a slice's.

The type is GA in resource.k8s.io/v1 from 1.37 and may be served in neither version, so
it is not watched (an informer of an unserved type fails): the rules are listed, from
the first version discovery finds served, only when a service has a pending pod or a
departing one whose devices are explained.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from controller.clock import REAL, Clock
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.resources import ResourceType
from objtypes import Obj
from reconcilers.devices.selectors import Device, SelectorError, matches
from reconcilers.devices.taints import Taint
from reconcilers.discovery import ServedTypes

# Newest first: the version whose selector the apiserver keeps is read.
DEVICE_TAINT_RULES = (
    ResourceType("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False),
    ResourceType("resource.k8s.io", "v1alpha3", "devicetaintrules", "DeviceTaintRule", False),
)
DeviceKey = tuple[str, str, str]
log = structlog.get_logger("devices")


def _expressions(selectors: Any) -> list[str]:
    return [
        str((s.get("cel") or {}).get("expression") or "")
        for s in selectors or []
        if isinstance(s, Mapping)
    ]


def selects(selector: Any, device: Device, classes: Mapping[str, Obj]) -> bool:
    """Whether a DeviceTaintSelector selects the device (a failing CEL selects nothing)."""
    if not isinstance(selector, Mapping):
        return True
    for field, have in (("driver", device.driver), ("pool", device.pool), ("device", device.name)):
        wanted = selector.get(field)
        if wanted is not None and wanted != have:
            return False
    expressions = _expressions(selector.get("selectors"))
    name = selector.get("deviceClassName")
    if name is not None:
        cls = classes.get(str(name))
        if cls is None:
            return False
        expressions = [*_expressions((cls.get("spec") or {}).get("selectors")), *expressions]
    try:
        return all(matches(e, device) for e in expressions)
    except SelectorError:
        return False


def rule_taints(
    rules: Iterable[Obj], devices: Iterable[Device], classes: Mapping[str, Obj]
) -> dict[DeviceKey, tuple[Taint, ...]]:
    """(driver, pool, device) -> the taints the rules put on it."""
    found: dict[DeviceKey, tuple[Taint, ...]] = {}
    listed = list(devices)
    for rule in rules:
        spec = rule.get("spec") if isinstance(rule, Mapping) else None
        if not isinstance(spec, Mapping):
            continue
        taint = spec.get("taint")
        if not isinstance(taint, Mapping) or not isinstance(taint.get("key"), str):
            continue
        made = Taint(taint["key"], str(taint.get("value") or ""), str(taint.get("effect") or ""))
        for d in listed:
            if selects(spec.get("deviceSelector"), d, classes):
                key = (d.driver, d.pool, d.name)
                found[key] = (*found.get(key, ()), made)
    return found


def with_rule_taints(
    devices: list[Device], taints: Mapping[DeviceKey, tuple[Taint, ...]]
) -> list[Device]:
    """The devices, each with the rules' taints beside its slice's."""
    return [
        replace(d, taints=(*d.taints, *taints[(d.driver, d.pool, d.name)]))
        if (d.driver, d.pool, d.name) in taints
        else d
        for d in devices
    ]


class TaintRuleReader:
    """The rules as last listed, reused for PENDING_REUSE seconds when asked for a
    pending pod's explanation (many pending services would otherwise list them once
    each), the caller then looking again once that list is out of date; listed afresh
    for a departing pod, whose eviction a rule may have just caused."""

    PENDING_REUSE = 5.0

    def __init__(self, client: KubeClient, served: ServedTypes, clock: Clock = REAL) -> None:
        self._client, self._served, self._clock = client, served, clock
        self._last: tuple[float, list[Obj]] | None = None

    async def rules(self, *, fresh: bool) -> tuple[list[Obj], float]:
        """The rules, and in how many seconds a reused list is out of date (0: listed now)."""
        now = self._clock.monotonic()
        if not fresh and self._last is not None and now < self._last[0] + self.PENDING_REUSE:
            return self._last[1], self._last[0] + self.PENDING_REUSE - now
        found = await list_rules(self._client, self._served)
        self._last = (now, found)
        return found, 0.0


async def list_rules(client: KubeClient, served: ServedTypes) -> list[Obj]:
    """Every DeviceTaintRule, from the newest version served; none where none is. A list
    that fails (RBAC without devicetaintrules, the version gone) is logged, and the
    explanations go on with the slices' taints alone."""
    for rt in DEVICE_TAINT_RULES:
        if await served.missing([rt]):
            continue
        try:
            rules, _ = await client.list(rt)
        except ApiError as e:
            log.warning("could not list DeviceTaintRules", version=rt.api_version, error=str(e))
            served.forget(rt)
            continue
        return rules
    return []
