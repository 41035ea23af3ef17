"""LLMKube's Kubernetes-side resource and scheduling fields on the pod, as LLMKube serves
them (internal/controller/deployment_builder.go buildContainerResources and its GPU
toleration, model_storage.go ephemeralCacheSizeLimit): spec.resources.hostMemory and
ephemeralStorage, hardware.gpu.tolerationKey. Pure: the Deployment built from the specs."""

from __future__ import annotations

from typing import Any

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from api.unserved import inference_service_fields, model_fields
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import build_deployment
from reconcilers.settings import CacheSettings
from reconcilers.sources.cache_claim import store_for

NVIDIA_TAINT = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}
NVIDIA_TOLERATION = {**NVIDIA_TAINT, "effect": "NoSchedule"}
URL_MODEL: Obj = {"source": "https://example.com/m.gguf"}
GPU: Obj = {"accelerator": "cuda", "gpu": {"enabled": True, "count": 1}}
CLAIMS: Obj = {
    "accelerator": "cuda",
    "gpu": {
        "enabled": True,
        "count": 1,
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
    },
}


def pod(model: Obj, service: Obj, cache: CacheSettings | None = None) -> Obj:
    isvc = {"metadata": {"name": "s", "namespace": "ns", "uid": "u"}, "spec": service}
    m, s = parse_model(model), parse_inference_service(service)
    store = store_for(isvc, s, m, cache or CacheSettings(enabled=False))
    deployment = build_deployment(scope_for(isvc, s, m, store=store), 1)
    spec: Obj = deployment["spec"]["template"]["spec"]
    return spec


def resources(spec: Obj) -> Obj:
    found: Obj = spec["containers"][0]["resources"]
    return found


def weights_volume(spec: Obj) -> Obj:
    (volume,) = [v for v in spec["volumes"] if "emptyDir" in v or "persistentVolumeClaim" in v]
    found: Obj = volume
    return found


def test_host_memory_is_the_memory_request_over_memory() -> None:
    """LLMKube: "Translated to pod resources.requests.memory, taking precedence over
    Memory when set". Our memory limit follows it, or an offloading runtime would be held
    to the smaller `memory` (and a request above the limit is refused by the apiserver)."""
    spec = pod(URL_MODEL, {"modelRef": "m", "resources": {"memory": "4Gi", "hostMemory": "64Gi"}})
    assert resources(spec)["requests"]["memory"] == "64Gi"
    assert resources(spec)["limits"]["memory"] == "64Gi"
    model_memory = {**URL_MODEL, "resources": {"memory": "8Gi"}}
    spec = pod(model_memory, {"modelRef": "m", "resources": {"hostMemory": "32Gi"}})
    assert resources(spec)["requests"]["memory"] == "32Gi"
    assert inference_service_fields({"resources": {"hostMemory": "32Gi"}}) == []


def test_ephemeral_storage_is_request_limit_and_the_weights_emptydir_size() -> None:
    service = {"modelRef": "m", "resources": {"ephemeralStorage": "40Gi"}}
    spec = pod(URL_MODEL, service)
    assert resources(spec)["requests"]["ephemeral-storage"] == "40Gi"
    assert resources(spec)["limits"]["ephemeral-storage"] == "40Gi"
    assert weights_volume(spec)["emptyDir"] == {"sizeLimit": "40Gi"}
    # spec.modelCache.persistence Ephemeral (LLMKube's case) on an operator with a cache.
    cached = CacheSettings(enabled=True)
    ephemeral = {**service, "modelCache": {"persistence": "Ephemeral"}}
    assert weights_volume(pod(URL_MODEL, ephemeral, cached))["emptyDir"] == {"sizeLimit": "40Gi"}
    # The cache PVC holds the weights: its size is the claim's, not the pod's budget.
    assert "persistentVolumeClaim" in weights_volume(pod(URL_MODEL, service, cached))
    # Without the field the emptyDir stays unbounded, as LLMKube leaves it.
    assert weights_volume(pod(URL_MODEL, {"modelRef": "m"}))["emptyDir"] == {}
    assert inference_service_fields(service) == []


@pytest.mark.parametrize("field", ["memory", "hostMemory", "ephemeralStorage", "cpu"])
def test_a_negative_quantity_is_refused_naming_the_field(field: str) -> None:
    """The apiserver refuses it on the pod ("must be greater than or equal to 0"): the
    spec is refused first, naming the field, not the Deployment later."""
    with pytest.raises(InvalidSpec, match=rf"spec\.resources\.{field}: '-4Gi' is negative"):
        parse_inference_service({"modelRef": "m", "resources": {field: "-4Gi"}})
    assert parse_inference_service({"modelRef": "m", "resources": {field: "-0"}})


def test_gpu_memory_is_named_with_why_it_does_nothing() -> None:
    (path,) = inference_service_fields({"resources": {"gpuMemory": "24Gi"}})
    assert path.startswith("spec.resources.gpuMemory (no effect in LLMKube either")
    assert "gpuSharing.memoryLimitGiB" in path and "hardware.gpu.memory" in path


@pytest.mark.parametrize("hardware", [GPU, CLAIMS], ids=["device-plugin", "dra"])
def test_gpu_pods_tolerate_the_gpu_nodes_taint(hardware: Obj) -> None:
    """GKE, AKS and the GPU operator taint GPU nodes nvidia.com/gpu=present:NoSchedule.
    ExtendedResourceToleration only helps extended-resource requests: a DRA pod needs
    the toleration written on it."""
    spec = pod({**URL_MODEL, "hardware": hardware}, {"modelRef": "m"})
    assert spec["tolerations"] == [NVIDIA_TOLERATION]


def test_a_cpu_pod_gets_no_gpu_toleration() -> None:
    assert "tolerations" not in pod(URL_MODEL, {"modelRef": "m"})


def test_toleration_key_and_resource_name_key_the_toleration() -> None:
    keyed = {**CLAIMS, "gpu": {**CLAIMS["gpu"], "tolerationKey": "example.com/gpu"}}
    spec = pod({**URL_MODEL, "hardware": keyed}, {"modelRef": "m"})
    assert spec["tolerations"] == [{**NVIDIA_TOLERATION, "key": "example.com/gpu"}]
    assert model_fields({**URL_MODEL, "hardware": keyed}) == []
    renamed = {**GPU, "gpu": {**GPU["gpu"], "resourceName": "squat.ai/dri-render"}}
    spec = pod({**URL_MODEL, "hardware": renamed}, {"modelRef": "m"})
    assert spec["tolerations"] == [{**NVIDIA_TOLERATION, "key": "squat.ai/dri-render"}]
    amd = {"accelerator": "rocm", "gpu": {"enabled": True, "vendor": "amd"}}
    spec = pod({**URL_MODEL, "hardware": amd}, {"modelRef": "m"})
    assert spec["tolerations"][0]["key"] == "amd.com/gpu"


@pytest.mark.parametrize(
    "user",
    [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "mig", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ],
    ids=["same-key", "same-key-other-value", "every-key"],
)
def test_the_users_toleration_for_the_key_wins(user: Obj) -> None:
    spec = pod({**URL_MODEL, "hardware": CLAIMS}, {"modelRef": "m", "tolerations": [user]})
    assert spec["tolerations"] == [user]


def test_other_user_tolerations_follow_ours() -> None:
    other = {"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}
    spec = pod({**URL_MODEL, "hardware": GPU}, {"modelRef": "m", "tolerations": [other]})
    assert spec["tolerations"] == [NVIDIA_TOLERATION, other]


@pytest.mark.parametrize("key", ["nvidia.com/gpu present", "gpu", "a/b/c", "Nvidia.com/gpu"])
def test_a_toleration_key_that_is_no_taint_key_is_refused(key: Any) -> None:
    hardware = {**GPU, "gpu": {**GPU["gpu"], "tolerationKey": key}}
    with pytest.raises(InvalidSpec, match=r"spec\.hardware\.gpu\.tolerationKey"):
        parse_model({**URL_MODEL, "hardware": hardware})
