"""The simulated cluster's allocator (testserver/dra_allocator.py, a stand-in for the
scheduler's) with devices that allow multiple allocations: shares of a device's memory
while enough is left, a whole-device request only on an unshared device."""

from __future__ import annotations

from collections import Counter

import pytest

from objtypes import Obj
from testserver.dra_allocator import (
    AllocationError,
    allocate,
    consumed_memory,
    exclusive_keys,
    node_devices,
)
from testserver.simulated.nodes import DRA_NODE, _slice

CLASSES = {
    "gpu.nvidia.com": {
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}
    }
}
DEVICES = node_devices([_slice(DRA_NODE, 1, shared=1)], DRA_NODE)
SHARED = ("gpu.nvidia.com", DRA_NODE, "gpu-1")


def claim(memory: str | None) -> Obj:
    exactly: Obj = {"deviceClassName": "gpu.nvidia.com", "count": 1}
    if memory is not None:
        exactly["selectors"] = [{"cel": {"expression": "device.allowMultipleAllocations == true"}}]
        exactly["capacity"] = {"requests": {"memory": memory}}
    return {
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def allocated(results: list[Obj]) -> Obj:
    return {"status": {"allocation": {"devices": {"results": results}}}}


def test_shares_of_one_device_while_its_memory_lasts() -> None:
    used: Counter[tuple[str, str, str]] = Counter()
    first = allocate(claim("40Gi"), DEVICES, CLASSES, set(), used)
    second = allocate(claim("40Gi"), DEVICES, CLASSES, set(), used)
    assert [(r["device"], r["consumedCapacity"]) for r in first + second] == [
        ("gpu-1", {"memory": "40Gi"}),
        ("gpu-1", {"memory": "40Gi"}),
    ]
    assert first[0]["shareID"] != second[0]["shareID"]
    with pytest.raises(AllocationError, match="not enough free devices"):
        allocate(claim("1Gi"), DEVICES, CLASSES, set(), used)
    # Read back from the claims, as the scheduler does on its next pass.
    claims = [allocated(first), allocated(second)]
    assert consumed_memory(claims) == {SHARED: 80 << 30} and exclusive_keys(claims) == set()


def test_a_whole_device_request_takes_an_unshared_device_only() -> None:
    used: Counter[tuple[str, str, str]] = Counter({SHARED: 1 << 30})
    whole = allocate(claim(None), DEVICES, CLASSES, set(), used)
    assert [r["device"] for r in whole] == ["gpu-0"] and "shareID" not in whole[0]
    with pytest.raises(AllocationError):
        allocate(claim(None), DEVICES, CLASSES, {("gpu.nvidia.com", DRA_NODE, "gpu-0")}, used)
