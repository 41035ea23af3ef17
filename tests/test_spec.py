"""The rules every Model and InferenceService must satisfy, each with a clear message."""

from __future__ import annotations

from typing import Any

import pytest

from api import InvalidSpec, parse_gpu_quota, parse_inference_service, parse_model


def errors_of(spec: Any, parse: Any = parse_model) -> list[str]:
    with pytest.raises(InvalidSpec) as e:
        parse(spec)
    return e.value.errors


def gpu_model(**gpu: Any) -> dict[str, Any]:
    return {"source": "s", "hardware": {"accelerator": "cuda", "gpu": {"enabled": True, **gpu}}}


def test_each_claim_sets_exactly_one_of_name_and_template() -> None:
    both = gpu_model(
        resourceClaims=[{"name": "g", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}]
    )
    neither = gpu_model(resourceClaims=[{"name": "g"}])
    for spec in (both, neither):
        assert errors_of(spec) == [
            "spec.hardware.gpu.resourceClaims[0]: set exactly one of resourceClaimName and "
            "resourceClaimTemplateName"
        ]
    assert parse_model(gpu_model(resourceClaims=[{"name": "g", "resourceClaimName": "c"}]))


def test_claims_and_resource_name_are_exclusive() -> None:
    errs = errors_of(
        gpu_model(
            resourceName="nvidia.com/gpu",
            resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}],
        )
    )
    assert errs == ["spec.hardware.gpu: resourceClaims and resourceName are mutually exclusive"]


@pytest.mark.parametrize("mode", ["partitioned", "shared"])
def test_sharing_other_than_exclusive_rejected_with_claims(mode: str) -> None:
    errs = errors_of(
        gpu_model(gpuSharing=mode, resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}])
    )
    assert len(errs) == 1 and "the claim owns device placement" in errs[0]
    assert parse_model(
        gpu_model(
            gpuSharing="exclusive", resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}]
        )
    )


def test_multinode_with_claims_rejected() -> None:
    spec = gpu_model(resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}])
    spec["multiNode"] = {"nodes": ["a", "b"]}
    errs = errors_of(spec)
    assert len(errs) == 1 and "bypass the scheduler that allocates DRA claims" in errs[0]
    plain = gpu_model(count=1)
    plain["multiNode"] = {"nodes": ["a", "b"]}
    assert parse_model(plain).multi_node_nodes == ("a", "b")


def test_all_problems_are_reported_at_once() -> None:
    errs = errors_of(
        {
            "source": "",
            "hardware": {
                "accelerator": "tpu",
                "gpu": {"count": -1, "vendor": "acme", "resourceClaims": "gpu"},
            },
        }
    )
    assert "spec.source: must be a non-empty string" in errs
    assert any(e.startswith("spec.hardware.accelerator: 'tpu' is not one of") for e in errs)
    assert "spec.hardware.gpu.count: must be at least 1, got -1" in errs
    assert any(e.startswith("spec.hardware.gpu.vendor: 'acme'") for e in errs)
    assert "spec.hardware.gpu.resourceClaims: must be a list" in errs


def test_malformed_shapes_are_errors_not_exceptions() -> None:
    assert errors_of(None) == ["spec.source: required"]
    assert errors_of("not an object")[0] == "spec: must be an object"
    assert "spec.hardware.gpu.count: must be an integer" in errors_of(gpu_model(count="2"))
    assert "spec.hardware.gpu.count: must be an integer" in errors_of(gpu_model(count=True))
    assert "spec.hardware.gpu.enabled: must be true or false" in errors_of(
        {"source": "s", "hardware": {"gpu": {"enabled": "yes"}}}
    )
    assert errors_of(
        gpu_model(
            resourceClaims=[
                {"name": "g", "resourceClaimTemplateName": "t"},
                {"name": "g", "resourceClaimTemplateName": "u"},
            ]
        )
    )[0].endswith("duplicate claim name 'g'")


def test_inference_service_rules() -> None:
    assert errors_of({"runtime": "vllm"}, parse_inference_service) == ["spec.modelRef: required"]
    errs = errors_of(
        {"modelRef": "m", "runtime": "ollama", "replicas": -1}, parse_inference_service
    )
    assert any("'ollama' is not one of vllm, sglang, tgi, llamacpp" in e for e in errs)
    assert "spec.replicas: must be at least 0, got -1" in errs
    errs = errors_of(
        {"modelRef": "m", "runtime": "vllm", "vllmConfig": {"gpuMemoryUtilization": 1.5}},
        parse_inference_service,
    )
    assert errs == ["spec.vllmConfig.gpuMemoryUtilization: must be at most 1, got 1.5"]
    assert errors_of({"modelRef": "m", "resources": {"gpu": -2}}, parse_inference_service) == [
        "spec.resources.gpu: must be at least 0, got -2"
    ]
    ok = parse_inference_service({"modelRef": "m"})
    assert (ok.runtime, ok.replicas) == ("llamacpp", 1)


def test_gpu_quota_rules() -> None:
    assert parse_gpu_quota({"limit": 4}).limit == 4
    assert errors_of({}, parse_gpu_quota) == ["spec.limit: required"]
    assert errors_of({"limit": -1}, parse_gpu_quota) == ["spec.limit: must be at least 0, got -1"]
