"""The InferenceService's pod fields, served as LLMKube serves them, over HTTP on the
test server: the Deployment's pod, the runtime's flags, the PodDisruptionBudget of
spec.disruption and the recycling of spec.maxPodLifetimeSeconds.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_pod_fields.py.
"""

from __future__ import annotations

import pytest

from api import InvalidSpec, parse_inference_service
from api.unserved import inference_service_fields
from objtypes import Obj

READINESS = {"tcpSocket": {"port": 9000}, "periodSeconds": 5}


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"bindAddress": "::1"}, "spec.bindAddress: '::1' is a loopback address"),
        ({"bindAddress": "localhost"}, "spec.bindAddress: 'localhost' is not an IP address"),
        (
            {"probeOverrides": {"liveness": {"periodSeconds": 5}}},
            "spec.probeOverrides.liveness: needs exactly one handler",
        ),
        (
            {"extraVolumeMounts": [{"name": "cache", "mountPath": "/cache"}]},
            "spec.extraVolumeMounts[0].name: no volume 'cache'",
        ),
        (
            {
                "extraVolumes": [{"name": "w", "emptyDir": {}}],
                "extraVolumeMounts": [{"name": "w", "mountPath": "/models"}],
            },
            "spec.extraVolumeMounts[0].mountPath: /models is where the model is loaded",
        ),
        (
            {"extraVolumes": [{"name": "models", "emptyDir": {}}]},
            "spec.extraVolumes[0].name: 'models' is already the model's volume",
        ),
        ({"maxPodLifetimeSeconds": 0}, "spec.maxPodLifetimeSeconds: must be at least 1"),
        (
            {"maxPodLifetimeSeconds": 60, "disruption": {"protectAlways": True}},
            "spec.maxPodLifetimeSeconds: pods cannot be recycled while",
        ),
        (
            {"ropeScaling": {"type": "yarn", "factor": 2.0}},
            "spec.ropeScaling.factor: must be a string",
        ),
        (
            {"ropeScaling": {"type": "yarn", "factor": "2.0\n"}},
            "spec.ropeScaling.factor: '2.0\\n'",
        ),
        (
            {"ropeScaling": {"type": "yarn", "factor": "0.0"}},
            "spec.ropeScaling.factor: must be above 0",
        ),
        (  # in LLMKube's enum, not in b10068's --rope-scaling
            {"ropeScaling": {"type": "longrope"}},
            "spec.ropeScaling.type: 'longrope' is not a --rope-scaling value of llama.cpp",
        ),
        ({"speculativeDecoding": {"type": "eagle"}}, "spec.speculativeDecoding.type: 'eagle'"),
        (
            {"speculativeDecoding": {"type": "draft"}},
            "spec.speculativeDecoding.type: draft-simple needs draft weights",
        ),
        (
            {"speculativeDecoding": {"type": "ngram-simple", "draftModel": "d.gguf"}},
            "spec.speculativeDecoding: ngram-simple needs no draft weights",
        ),
    ],
)
def test_bad_pod_fields_are_refused_naming_the_field(fields: Obj, error: str) -> None:
    with pytest.raises(InvalidSpec) as raised:
        parse_inference_service({"modelRef": "m", "runtime": "llamacpp", **fields})
    assert any(e.startswith(error) for e in raised.value.errors), raised.value.errors


def test_served_fields_are_not_reported_and_runtime_bound_ones_are() -> None:
    served = {
        "modelRef": "m",
        "runtime": "llamacpp",
        "command": ["x"],
        "containerPort": 9000,
        "bindAddress": "0.0.0.0",
        "probeOverrides": {"readiness": READINESS},
        "skipModelInit": True,
        "extraVolumes": [{"name": "v", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "v", "mountPath": "/v"}],
        "podSecurityContext": {"fsGroup": 1},
        "securityContext": {"runAsNonRoot": True},
        "revisionHistoryLimit": 1,
        "disruption": {"protectAlways": True},
        "maxPodLifetimeSeconds": 60,
        "ropeScaling": {"type": "yarn"},
        "speculativeDecoding": {"type": "mtp"},
    }
    assert inference_service_fields(served) == []
    # args is the generic runtime's argv, ropeScaling llama.cpp's: LLMKube ignores them
    # elsewhere, so they are reported.
    other = {"modelRef": "m", "runtime": "vllm", "args": ["--x"], "ropeScaling": {"type": "yarn"}}
    assert inference_service_fields(other) == ["spec.ropeScaling", "spec.args"]
