"""spec.autoscaling: an HPA on the InferenceService's scale subresource, capped by GPUQuota.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_autoscaling.py.
"""

from __future__ import annotations

import pytest

from api import InvalidSpec, parse_inference_service
from objtypes import Obj


@pytest.mark.parametrize(
    ("autoscaling", "error"),
    [
        ({"minReplicas": 2}, "spec.autoscaling.maxReplicas: required"),
        ({"minReplicas": 5, "maxReplicas": 2}, "spec.autoscaling.minReplicas: 5 is above"),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Pods", "name": "x"}]},
            "spec.autoscaling.metrics[0].targetAverageValue: required",
        ),
        (
            {
                "maxReplicas": 2,
                "metrics": [{"type": "Pods", "name": "x", "targetAverageValue": "lots"}],
            },
            "spec.autoscaling.metrics[0].targetAverageValue: 'lots' is not a quantity",
        ),
        (
            {"maxReplicas": 2, "metrics": [{"type": "Resource", "name": "cpu"}]},
            "spec.autoscaling.metrics[0].targetAverageUtilization: required",
        ),
    ],
)
def test_an_hpa_the_api_server_would_refuse_is_refused_naming_the_field(
    autoscaling: Obj, error: str
) -> None:
    with pytest.raises(InvalidSpec) as raised:
        parse_inference_service({"modelRef": "m", "autoscaling": autoscaling})
    assert any(e.startswith(error) for e in raised.value.errors), raised.value.errors


def test_autoscaling_with_multinode_is_refused() -> None:
    members = [{"node": "a", "fabric": {"address": "10.0.0.1"}}, {"node": "b"}]
    with pytest.raises(InvalidSpec) as raised:
        parse_inference_service(
            {
                "modelRef": "m",
                "runtime": "vllm",
                "multiNode": {"members": members},
                "autoscaling": {"maxReplicas": 2},
            }
        )
    assert raised.value.errors == [
        "spec.autoscaling: cannot be combined with spec.multiNode (one replica at most)"
    ]
