"""DeviceTaintRules (KEP-5055) read into device taints (reconcilers/devices/taint_rules.py):
which published devices a rule's selector selects, in both the v1 form (driver, pool,
device) and 1.34's v1alpha3 one (also deviceClassName and CEL selectors)."""

from __future__ import annotations

from typing import Any

from controller.errors import NotFound
from controller.resources import ResourceType
from devcluster.fake_dra_driver import device_class, resource_slices
from objtypes import Obj
from reconcilers.devices import explain, selectors
from reconcilers.devices.taint_rules import (
    TaintRuleReader,
    rule_taints,
    selects,
    with_rule_taints,
)
from reconcilers.devices.taints import Taint
from reconcilers.discovery import ServedTypes
from tests.support.clock import FakeClock

DEVICES = selectors.devices(resource_slices("node-0", 2))
CLASSES = {"gpu.nvidia.com": device_class()}
ECC = {"key": "example.com/ecc", "value": "failed", "effect": "NoSchedule"}


def rule(selector: Obj | None, taint: Obj = ECC) -> Obj:
    spec: Obj = {"taint": taint}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"metadata": {"name": "r"}, "spec": spec}


def tainted(*rules: Obj) -> list[str]:
    return sorted(d for (_, _, d) in rule_taints(rules, DEVICES, CLASSES))


def test_a_rule_taints_the_devices_its_selector_names() -> None:
    gpu0 = {"driver": "gpu.nvidia.com", "pool": "node-0", "device": "gpu-0"}
    assert tainted(rule(gpu0)) == ["gpu-0"]
    assert tainted(rule({"pool": "node-0"})) == ["gpu-0", "gpu-1"]
    assert tainted(rule(None)) == ["gpu-0", "gpu-1"]  # no selector: every device
    assert tainted(rule({"driver": "other.example.com"})) == []
    assert tainted(rule({"device": "gpu-9"})) == []
    (found,) = rule_taints([rule(gpu0)], DEVICES, CLASSES).values()
    assert found == (Taint("example.com/ecc", "failed", "NoSchedule"),)


def test_v1alpha3_selectors_by_class_and_cel() -> None:
    one = "device.attributes['gpu.nvidia.com'].index == 1"
    assert tainted(rule({"selectors": [{"cel": {"expression": one}}]})) == ["gpu-1"]
    assert tainted(rule({"deviceClassName": "gpu.nvidia.com"})) == ["gpu-0", "gpu-1"]
    assert tainted(rule({"deviceClassName": "absent.example.com"})) == []
    failing = "device.attributes['gpu.nvidia.com'].nope == 1"  # a runtime error: none
    assert tainted(rule({"selectors": [{"cel": {"expression": failing}}]})) == []
    assert selects("junk", DEVICES[0], CLASSES)


def test_rules_without_a_taint_are_skipped_and_taints_add_up() -> None:
    assert tainted(rule(None, {"value": "x"}), {"spec": None}, {"junk": 1}) == []
    two = rule_taints([rule(None), rule(None, {**ECC, "effect": "NoExecute"})], DEVICES, CLASSES)
    assert [t.effect for t in two[("gpu.nvidia.com", "node-0", "gpu-0")]] == [
        "NoSchedule",
        "NoExecute",
    ]


def test_a_rules_taint_is_explained_as_a_slices_is() -> None:
    taints = rule_taints([rule({"device": "gpu-0"}), rule({"device": "gpu-1"})], DEVICES, CLASSES)
    found = with_rule_taints(list(DEVICES), taints)
    spec = {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
    }
    (short,) = explain.shortfalls("T", spec, CLASSES, found)
    assert "2 of 2 matching device(s) are tainted" in short.message, short.message
    assert "gpu.nvidia.com/node-0/gpu-0 (example.com/ecc=failed:NoSchedule)" in short.message
    assert explain.shortfalls("T", spec, CLASSES, list(DEVICES)) == []


class RulesServer:
    """Discovery serving devicetaintrules in one version, and its list, counting lists."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.lists: list[str] = []
        self.items: list[Obj] = [rule({"device": "gpu-0"})]

    async def request(self, method: str, path: str, **_: Any) -> Obj:
        if path != f"/apis/resource.k8s.io/{self.version}":
            raise NotFound(404, "NotFound", "not served")
        return {"resources": [{"name": "devicetaintrules"}]}

    async def list(self, rt: ResourceType, namespace: str | None = None) -> tuple[list[Obj], str]:
        self.lists.append(rt.api_version)
        return list(self.items), "1"


async def test_rules_are_listed_from_the_version_served_and_reused_only_while_pending() -> None:
    clock = FakeClock()
    for version in ("v1", "v1alpha3"):
        server = RulesServer(version)
        reader = TaintRuleReader(server, ServedTypes(server, clock), clock)  # type: ignore[arg-type]
        assert await reader.rules(fresh=False) == (server.items, 0.0)
        assert server.lists == [f"resource.k8s.io/{version}"]
    server.items = []
    clock.t += 2
    # A pending pod's: the last list, and when it is out of date (the caller looks again).
    assert await reader.rules(fresh=False) == ([rule({"device": "gpu-0"})], 3.0)
    assert await reader.rules(fresh=True) == ([], 0.0)  # a departing pod's: listed now
    clock.t += TaintRuleReader.PENDING_REUSE + 1
    assert await reader.rules(fresh=False) == ([], 0.0) and len(server.lists) == 3
    nothing = RulesServer("v1beta9")
    served = ServedTypes(nothing, clock)  # type: ignore[arg-type]
    assert await TaintRuleReader(nothing, served, clock).rules(fresh=True) == ([], 0.0)  # type: ignore[arg-type]
    assert nothing.lists == []
