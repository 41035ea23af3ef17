"""api/: LLMKube's v1alpha1 shapes, defaults, enums and the guide's rules, each error by field."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from api import (
    InvalidSpec,
    gpu_count,
    has_gpu,
    parse_gpu_quota,
    parse_inference_service,
    parse_model,
    rule_errors,
)

CLAIM = {"name": "g", "resourceClaimTemplateName": "t"}


def errors_of(spec: Any, parse: Any = parse_model) -> list[str]:
    with pytest.raises(InvalidSpec) as e:
        parse(spec)
    return e.value.errors


def gpu_model(**gpu: Any) -> dict[str, Any]:
    return {"source": "org/m", "hardware": {"accelerator": "cuda", "gpu": {"enabled": True, **gpu}}}


def isvc(**spec: Any) -> Any:
    return parse_inference_service({"modelRef": "m", **spec})


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
    errs = errors_of(gpu_model(resourceName="nvidia.com/gpu", resourceClaims=[CLAIM]))
    assert errs == ["spec.hardware.gpu: resourceClaims and resourceName are mutually exclusive"]


@pytest.mark.parametrize("mode", ["partitioned", "shared"])
def test_service_gpu_sharing_other_than_exclusive_rejected_with_claims(mode: str) -> None:
    claims = parse_model(gpu_model(resourceClaims=[CLAIM]))
    sharing = {"mode": mode, "profile": "1g.10gb"}
    errs = rule_errors(isvc(resources={"gpuSharing": sharing}), claims)
    assert len(errs) == 1 and errs[0].startswith("spec.resources.gpuSharing.mode")
    assert "the claim owns device placement" in errs[0]
    assert rule_errors(isvc(resources={"gpuSharing": {"mode": "exclusive"}}), claims) == []
    plain = parse_model(gpu_model(count=1))
    assert rule_errors(isvc(resources={"gpuSharing": sharing}), plain) == []


def test_service_multinode_with_claims_rejected() -> None:
    mn = {
        "members": [{"node": "a", "fabric": {"address": "10.0.0.1"}}, {"node": "b"}],
    }
    service = isvc(runtime="vllm", multiNode=mn)
    errs = rule_errors(service, parse_model(gpu_model(resourceClaims=[CLAIM])))
    assert len(errs) == 1 and "bypass the scheduler that allocates DRA claims" in errs[0]
    assert rule_errors(service, parse_model(gpu_model(count=1))) == []
    assert service.multi_node is not None
    assert [m.node for m in service.multi_node.members] == ["a", "b"]


def test_multinode_follows_llmkube_cel_rules() -> None:
    one = {"members": [{"node": "a", "fabric": {"address": "x"}}]}
    two = {"members": [{"node": "a"}, {"node": "b"}]}
    ok = {"members": [{"node": "a", "fabric": {"address": "x"}}, {"node": "b"}]}
    assert "spec.multiNode.members: must have at least 2 items, got 1" in errors_of(
        {"modelRef": "m", "runtime": "vllm", "multiNode": one}, parse_inference_service
    )
    assert errors_of(
        {"modelRef": "m", "runtime": "vllm", "multiNode": two}, parse_inference_service
    ) == ["spec.multiNode: members[0].fabric.address is required (the head's address)"]
    assert errors_of({"modelRef": "m", "multiNode": ok}, parse_inference_service) == [
        "spec: multiNode: only runtime vllm is supported"
    ]
    assert errors_of(
        {"modelRef": "m", "runtime": "vllm", "replicas": 2, "multiNode": ok},
        parse_inference_service,
    ) == ["spec: multiNode: replicas must be at most 1"]


def test_llmkube_defaults_and_enums() -> None:
    m = parse_model({"source": "org/m"})
    assert (m.format, m.accelerator, m.gpu.vendor, m.gpu.count) == ("gguf", "cpu", "nvidia", 0)
    for fmt in ("gguf", "mlx", "safetensors", "pytorch", "custom"):
        assert parse_model({"source": "org/m", "format": fmt}).format == fmt
    for acc in ("cpu", "metal", "cuda", "rocm", "intel", "vulkan"):
        assert parse_model({"source": "org/m", "hardware": {"accelerator": acc}})
    for bad in ("onnx",):
        assert errors_of({"source": "org/m", "format": bad})[0].startswith("spec.format: 'onnx'")
    s = isvc()
    assert (s.runtime, s.mode, s.replicas, s.endpoint.port, s.endpoint_path) == (
        "llamacpp",
        "chat",
        1,
        8080,
        "/v1/chat/completions",
    )
    assert isvc(mode="embedding").endpoint_path == "/v1/embeddings"
    assert isvc(mode="rerank").endpoint_path == "/v1/rerank"
    assert isvc(mode="rerank", endpoint={"path": "/x"}).endpoint_path == "/x"
    for runtime in ("llamacpp-router", "personaplex", "generic"):
        assert not isvc(runtime=runtime).served


def test_gpu_count_and_presence_as_llmkube_resolves_them() -> None:
    counted = parse_model(gpu_model(count=2))
    uncounted = parse_model(gpu_model())
    assert gpu_count(counted, 4) == 2
    assert gpu_count(uncounted, 3) == 3
    assert gpu_count(uncounted, None) == 0
    # enabled: false and accelerator: cpu mean no GPU; claims always make a GPU model.
    off = parse_model(gpu_model(enabled=False, count=2))
    cpu = parse_model({"source": "org/m", "hardware": {"gpu": {"count": 2}}})
    assert not has_gpu(off, 2) and not has_gpu(cpu, 2)
    claims_on_cpu = parse_model(
        {"source": "org/m", "hardware": {"gpu": {"resourceClaims": [CLAIM]}}}
    )
    assert has_gpu(claims_on_cpu, None)
    # A GPU accelerator with a count from the service, as LLMKube's GPUCount.
    cuda = parse_model({"source": "org/m", "hardware": {"accelerator": "cuda"}})
    assert has_gpu(cuda, 2) and not has_gpu(cuda, None)


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
    assert "spec.hardware.gpu.count: must be at least 0, got -1" in errs
    assert any(e.startswith("spec.hardware.gpu.vendor: 'acme'") for e in errs)
    assert "spec.hardware.gpu.resourceClaims: must be a list" in errs


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"replicas": math.nan}, "spec.replicas: must be a finite number, got nan"),
        ({"replicas": json.loads("1e400")}, "spec.replicas: must be a finite number, got inf"),
        ({"replicas": 11}, "spec.replicas: must be at most 10, got 11"),
        ({"replicas": 1.5}, "spec.replicas: must be an integer, got 1.5"),
        ({"contextSize": 64}, "spec.contextSize: must be at least 128, got 64"),
        ({"resources": {"gpu": 9}}, "spec.resources.gpu: must be at most 8, got 9"),
        (
            {"vllmConfig": {"gpuMemoryUtilization": -math.inf}},
            "spec.vllmConfig.gpuMemoryUtilization: must be a finite number, got -inf",
        ),
        (
            {"vllmConfig": {"gpuMemoryUtilization": 1.5}},
            "spec.vllmConfig.gpuMemoryUtilization: must be at most 1, got 1.5",
        ),
        ({"resources": {"memory": "lots"}}, "spec.resources.memory: 'lots' is not a quantity"),
    ],
)
def test_numbers_are_finite_and_in_range(spec: dict[str, Any], error: str) -> None:
    errs = errors_of({"modelRef": "m", **spec}, parse_inference_service)
    assert len(errs) == 1 and errs[0].startswith(error)


def test_malformed_shapes_are_errors_not_exceptions() -> None:
    assert errors_of(None) == ["spec.source: required"]
    assert errors_of("not an object")[0] == "spec: must be an object"
    assert "spec.hardware.gpu.count: must be a number" in errors_of(gpu_model(count="2"))
    assert "spec.hardware.gpu.count: must be a number" in errors_of(gpu_model(count=True))
    assert "spec.hardware.gpu.count: must be at most 8, got 9" in errors_of(gpu_model(count=9))
    assert "spec.hardware.gpu.enabled: must be true or false" in errors_of(
        {"source": "org/m", "hardware": {"gpu": {"enabled": "yes"}}}
    )
    assert errors_of(
        gpu_model(
            resourceClaims=[
                {"name": "g", "resourceClaimTemplateName": "t"},
                {"name": "g", "resourceClaimTemplateName": "u"},
            ]
        )
    ) == ["spec.hardware.gpu.resourceClaims[1]: duplicate name 'g'"]


def test_inference_service_rules() -> None:
    assert errors_of({"runtime": "vllm"}, parse_inference_service) == ["spec.modelRef: required"]
    errs = errors_of(
        {"modelRef": "m", "runtime": "ollama", "replicas": -1}, parse_inference_service
    )
    assert any("'ollama' is not one of llamacpp, llamacpp-router" in e for e in errs)
    assert "spec.replicas: must be at least 0, got -1" in errs
    assert errors_of(
        {"modelRef": "m", "resources": {"gpuSharing": {"mode": "partitioned"}}},
        parse_inference_service,
    ) == ["spec.resources.gpuSharing: partitioned needs a profile (e.g. 1g.10gb)"]
    assert isvc(suspend=True, replicas=3).wanted_replicas == 0


def test_gpu_quota_rules() -> None:
    q = parse_gpu_quota({"gpuCount": 4, "namespaceRef": "team"})
    assert (q.gpu_count, q.namespace_ref) == (4, "team")
    assert q.covers("team", {}) and q.covers("team", None) and not q.covers("other", {})
    # selector: Namespace labels, in any namespace; a namespace with no Namespace object
    # has no labels to match.
    sel = parse_gpu_quota({"gpuCount": 2, "selector": {"matchLabels": {"tier": "gold"}}})
    assert sel.covers("a", {"tier": "gold"}) and sel.covers("b", {"tier": "gold", "x": "y"})
    assert not sel.covers("a", {"tier": "free"}) and not sel.covers("a", None)
    everything = parse_gpu_quota({"gpuCount": 2, "selector": {}})
    assert everything.covers("a", {}) and not everything.covers("a", None)
    expr = parse_gpu_quota(
        {
            "gpuCount": 1,
            "selector": {
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                    {"key": "frozen", "operator": "DoesNotExist"},
                ]
            },
        }
    )
    assert expr.covers("a", {"tier": "silver"}) and not expr.covers("a", {"tier": "bronze"})
    assert not expr.covers("a", {"tier": "gold", "frozen": "yes"})
    bad = {
        "gpuCount": 1,
        "selector": {
            "matchExpressions": [
                {"key": "tier", "operator": "In"},
                {"key": "x", "operator": "Exists", "values": ["y"]},
            ]
        },
    }
    assert errors_of(bad, parse_gpu_quota) == [
        "spec.selector.matchExpressions[0].values: must be non-empty when operator is In",
        "spec.selector.matchExpressions[1].values: must be empty when operator is Exists",
    ]
    assert errors_of({"namespaceRef": "a"}, parse_gpu_quota) == ["spec.gpuCount: required"]
    one_of = "spec: exactly one of selector or namespaceRef must be set"
    assert errors_of({"gpuCount": 1}, parse_gpu_quota) == [one_of]
    assert errors_of({"gpuCount": 1, "namespaceRef": "a", "selector": {}}, parse_gpu_quota) == [
        one_of
    ]
    assert errors_of({"gpuCount": -1, "namespaceRef": "a"}, parse_gpu_quota) == [
        "spec.gpuCount: must be at least 0, got -1"
    ]
