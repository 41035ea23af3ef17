"""Issue 13 (4): the Kueue path on a DRA-only cluster — pods Kueue's pod integration can
admit and charge by claim, conditions when it never would, and the charge in status.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_dra_kueue.py.
"""

from __future__ import annotations

import pytest

from api import parse_model
from reconcilers.devices import dra
from reconcilers.devices.kueue import KueueSettings, kueue_status, parse_mappings


def test_kueue_status_is_pure_and_names_every_problem() -> None:
    assert parse_mappings(["a=x,b=y", " c = z "]) == {"a": "x", "b": "y", "c": "z"}
    with pytest.raises(ValueError, match="DEVICECLASS=RESOURCE"):
        parse_mappings(["a="])
    model = parse_model(
        {
            "source": "Qwen/Qwen3-8B",
            "hardware": {
                "accelerator": "cuda",
                "gpu": {
                    "enabled": True,
                    "count": 2,
                    "resourceClaims": [
                        {"name": "a", "resourceClaimName": "shared"},
                        {"name": "b", "resourceClaimTemplateName": "two"},
                    ],
                },
            },
        }
    )
    two = {
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "g", "exactly": {"deviceClassName": "x", "count": 2}}]
                }
            }
        }
    }
    demand = dra.pod_demand([two])
    cond, status = kueue_status(
        "q",
        model,
        [c.pod_entry() for c in model.gpu.claims],
        {"two": two},
        demand,
        3,
        KueueSettings({"gpu.nvidia.com": "nvidia.com/gpu"}),
        "gpu.nvidia.com",
    )
    assert (cond.status, cond.reason) == (False, "CountWithClaims")
    assert "allocate the devices a second time" in cond.message
    assert 'names ResourceClaim "shared"' in cond.message
    assert 'DeviceClass "x" is not in Kueue' in cond.message
    assert status["devices"] == [{"deviceClass": "x", "resource": "", "perPod": 2, "total": 6}]
    assert status["summary"] == "" and status["admissible"] is False
    # multiNode members bypass the scheduler, so Kueue never sees them.
    cond, status = kueue_status(
        "q", model, [], {}, dra.DeviceDemand(), 1, KueueSettings({}), None, multi_node=True
    )
    assert (cond.status, cond.reason) == (False, "MultiNode") and "nodeName" in cond.message
