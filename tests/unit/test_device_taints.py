"""Device taints (KEP-5055) read from ResourceSlices, matched against a request's
tolerations, named when no untainted device is left, and evictions found from a
service's last status.allocation (reconcilers/devices/taints.py, explain.py). Pure."""

from __future__ import annotations

from typing import Any

import pytest

from controller.cache import Cache
from objtypes import Obj
from reconcilers.devices import explain, selectors
from reconcilers.devices.lookup import allocation_status
from reconcilers.devices.taints import (
    Taint,
    device_taints,
    devices_to_reread,
    evictions,
    request_tolerations,
    slice_taints,
    tolerates,
    untolerated,
)
from reconcilers.inferenceservice.device_taints import serving_again
from reconcilers.writes.conditions import Condition

DRIVER = "gpu.nvidia.com"
CLASS = {DRIVER: {"metadata": {"name": DRIVER}, "spec": {"selectors": []}}}
ECC = {"key": "example.com/ecc", "value": "failed", "effect": "NoSchedule"}


def gpu(name: str, *taints: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
        "capacity": {"memory": {"value": "80Gi"}},
        **({"taints": list(taints)} if taints else {}),
    }


def slice_(node: str, *devices: dict[str, Any]) -> dict[str, Any]:
    return {
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1},
            "devices": list(devices),
        }
    }


def claim(count: int = 1, tolerations: list[Any] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DRIVER, "count": count}
    if tolerations is not None:
        exactly["tolerations"] = tolerations
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def test_slice_taints_are_read_with_their_effect() -> None:
    assert device_taints(gpu("gpu-0", ECC, {"key": "k", "effect": "NoExecute"})) == (
        Taint("example.com/ecc", "failed", "NoSchedule"),
        Taint("k", "", "NoExecute"),
    )
    assert (
        str(Taint("example.com/ecc", "failed", "NoSchedule")) == "example.com/ecc=failed:NoSchedule"
    )
    assert str(Taint("k", "", "NoExecute")) == "k:NoExecute"
    assert device_taints({"taints": [{"value": "no key"}, "junk"]}) == ()
    assert slice_taints([slice_("n0", gpu("gpu-0"), gpu("gpu-1", ECC)), "junk"]) == {
        (DRIVER, "n0", "gpu-1"): (Taint("example.com/ecc", "failed", "NoSchedule"),)
    }


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "example.com/ecc", "value": "failed"}, True),
        ({"key": "example.com/ecc", "value": "other"}, False),
        ({"key": "example.com/ecc", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "example.com/ecc", "value": "failed", "effect": "NoSchedule"}, True),
        ({"key": "other", "operator": "Exists"}, False),
        ("junk", False),
    ],
)
def test_tolerations_match_as_the_scheduler_matches_them(toleration: Any, tolerated: bool) -> None:
    assert tolerates(toleration, Taint("example.com/ecc", "failed", "NoSchedule")) is tolerated


def test_only_no_schedule_and_no_execute_block() -> None:
    taints = [Taint("a", "", "None"), Taint("b", "", "NoSchedule"), Taint("c", "", "Future")]
    assert untolerated(taints, None) == [Taint("b", "", "NoSchedule")]
    assert untolerated(taints, [{"key": "b", "operator": "Exists"}]) == []


def test_every_matching_device_tainted_is_named_with_its_taint() -> None:
    found = selectors.devices([slice_("n0", gpu("gpu-0", ECC), gpu("gpu-1"))])
    (short,) = explain.shortfalls("ResourceClaimTemplate t", claim(2), CLASS, found)
    assert short.message == (
        "ResourceClaimTemplate t request 'gpu': 1 of 2 matching device(s) are tainted and the "
        "request does not tolerate it: gpu.nvidia.com/n0/gpu-0 (example.com/ecc=failed:"
        "NoSchedule) (one pod needs 2, the most untainted on one node is 1)"
    )
    # One untainted device is enough for one, and a toleration lets the tainted one serve.
    assert explain.shortfalls("t", claim(1), CLASS, found) == []
    tolerated = claim(2, [{"key": "example.com/ecc", "operator": "Exists"}])
    assert explain.shortfalls("t", tolerated, CLASS, found) == []


def test_many_tainted_devices_are_counted_after_the_first_few() -> None:
    found = selectors.devices([slice_("n0", *(gpu(f"gpu-{i}", ECC) for i in range(6)))])
    (short,) = explain.shortfalls("t", claim(1), CLASS, found)
    assert "gpu.nvidia.com/n0/gpu-3 (example.com/ecc=failed:NoSchedule) and 2 more" in short.message
    assert "gpu-4" not in short.message


def test_request_tolerations_cover_exactly_and_first_available() -> None:
    spec = {
        "devices": {
            "requests": [
                {"name": "a", "exactly": {"tolerations": [{"operator": "Exists"}]}},
                {
                    "name": "b",
                    "firstAvailable": [{"name": "x"}, {"name": "y", "tolerations": [ECC]}],
                },
            ]
        }
    }
    assert request_tolerations(spec) == [[{"operator": "Exists"}], [], [ECC]]
    assert request_tolerations(None) == []


NO_EXECUTE = {(DRIVER, "n0", "gpu-0"): (Taint("example.com/ecc", "failed", "NoExecute"),)}
ALLOCATION = {
    "pods": [
        {"name": "chat-1", "devices": [{"driver": DRIVER, "pool": "n0", "device": "gpu-0"}]},
        {"name": "chat-2", "devices": [{"driver": DRIVER, "pool": "n0", "device": "gpu-1"}]},
    ]
}
MARKED = {
    "status": {
        "conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager"}
        ]
    }
}


def test_a_pod_gone_or_marked_from_a_no_execute_device_is_an_eviction() -> None:
    (gone,) = evictions(ALLOCATION, {"chat-2": {}}, NO_EXECUTE, [])
    assert str(gone) == (
        "pod chat-1 evicted: device gpu.nvidia.com/n0/gpu-0 has taint "
        "example.com/ecc=failed:NoExecute"
    )
    assert evictions(ALLOCATION, {"chat-1": MARKED, "chat-2": {}}, NO_EXECUTE, []) == [gone]


def test_no_eviction_while_the_pod_runs_unmarked_or_the_claim_tolerates_it() -> None:
    assert evictions(ALLOCATION, {"chat-1": {}, "chat-2": {}}, NO_EXECUTE, []) == []
    tolerant = [[{"key": "example.com/ecc", "operator": "Exists"}]]
    assert evictions(ALLOCATION, {}, NO_EXECUTE, tolerant) == []
    no_schedule = {k: (Taint("example.com/ecc", "failed", "NoSchedule"),) for k in NO_EXECUTE}
    assert evictions(ALLOCATION, {}, no_schedule, []) == []
    assert evictions(None, {}, NO_EXECUTE, []) == []
    assert (
        evictions({"pods": ["junk", {"name": "x", "devices": ["junk"]}]}, {}, NO_EXECUTE, []) == []
    )


def test_the_devices_of_marked_and_departed_pods_are_those_read_afresh() -> None:
    marked = {"chat-1": MARKED, "chat-2": {}}
    assert devices_to_reread(ALLOCATION, marked) == [(DRIVER, "n0", "gpu-0")]
    assert devices_to_reread(ALLOCATION, {"chat-1": {}}) == [(DRIVER, "n0", "gpu-1")]
    assert devices_to_reread(ALLOCATION, {"chat-1": {}, "chat-2": {}}) == []
    assert devices_to_reread({"pods": ["junk"]}, {}) == []


def test_a_terminating_pod_on_a_no_execute_device_is_an_eviction_without_the_mark() -> None:
    """A status write racing the eviction controller's (kwok's pod stages, a kubelet's)
    can drop DisruptionTarget before the pod goes; the next status lists it no more."""
    terminating = {"metadata": {"deletionTimestamp": "2026-12-07T03:36:29Z"}}
    pods = {"chat-1": terminating, "chat-2": {}}
    assert [e.pod for e in evictions(ALLOCATION, pods, NO_EXECUTE, [])] == ["chat-1"]
    assert devices_to_reread(ALLOCATION, pods) == [(DRIVER, "n0", "gpu-0")]


def test_a_bound_pods_devices_outlive_its_claim_in_a_cache_behind_on_pods() -> None:
    """The claim's deallocation (its watch) can reach the cache before the pod's deletion
    (another watch): the last allocation keeps the pod's devices, which name the taint."""
    row = {"claim": "chat-1-gpus", "request": "gpu", "driver": DRIVER, "pool": "n0"}
    previous = {"pods": [{"name": "chat-1", "devices": [{**row, "device": "gpu-0"}]}]}
    claims = [{"name": "gpus", "resourceClaimName": "c"}]
    pod: Obj = {
        "metadata": {"name": "chat-1", "namespace": "team"},
        "spec": {"nodeName": "n0", "resourceClaims": claims},
    }
    kept = allocation_status(Cache(), [pod], 1, previous)
    assert kept["pods"] == previous["pods"] and kept["summary"] == "1/1"
    unbound = {**pod, "spec": {"nodeName": "", "resourceClaims": claims}}
    assert allocation_status(Cache(), [unbound], 1, previous)["pods"] == [
        {"name": "chat-1", "devices": []}
    ]


def test_the_eviction_is_said_until_every_live_pod_serves_again() -> None:
    """Seen on the real control plane: Ready still True from the Deployment's lagging
    readyReplicas while the evicted pod's replacement is pending cleared the condition
    one reconcile after it was written."""
    ready = [Condition("Ready", True, "Serving", "1/1 replicas ready")]
    pending: Obj = {"metadata": {"name": "chat-2"}, "status": {"phase": "Pending"}}
    running: Obj = {
        "metadata": {"name": "chat-2"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert not serving_again(ready, [pending])
    assert serving_again(ready, [running])
    assert not serving_again([Condition("Ready", False, "Unschedulable", "")], [running])
