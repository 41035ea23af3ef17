"""FieldsServed: every LLMKube field a spec sets that llmkube-py does not act on is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from api.unserved import gpu_quota_fields, inference_service_fields, model_fields
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import EVENT, GPU_QUOTA, INFERENCE_SERVICE, MODEL

from .conftest import condition, eventually, isvc_yaml, model_yaml, quota_yaml, reapply

SAMPLES = Path(__file__).parent / "data" / "llmkube-samples"
CPU_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: Qwen/Qwen3-8B, format: safetensors}
"""


def sample(name: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]
    return next(d for d in docs if d["kind"] in ("Model", "InferenceService"))


def test_samples_name_what_they_set() -> None:
    s3 = sample("model_s3_source.yaml")
    assert "spec.sourceSecretRef" not in model_fields(s3["spec"]), "the s3 loader's keys"
    gated = {"source": "hf://org/gated", "sourceSecretRef": {"name": "hf"}}
    assert model_fields(gated) == [], "the HF token of an hf source is served"
    http = {"source": "https://example.com/m.gguf", "sourceSecretRef": {"name": "x"}}
    assert model_fields(http) == ["spec.sourceSecretRef"]
    # What the API server defaults into every object is no request of the user's.
    assert inference_service_fields({"modelRef": "m", "bindAddress": "::"}) == []
    assert inference_service_fields({"modelRef": "m", "priority": "normal"}) == []
    # priority counts for a GPUQuota's minPriority.
    assert inference_service_fields({"modelRef": "m", "priority": "high"}) == []
    hub_url = {"source": "https://huggingface.co/o/r/resolve/main/m.gguf", "sourceSecretRef": {}}
    assert model_fields({**hub_url, "sourceSecretRef": {"name": "hf"}}) == [], "the loader's"
    assert model_fields({"source": "x", "refreshPolicy": "IfNotPresent"}) == []
    # Served where a loader stages the Model; not for a repo the runtime downloads.
    assert model_fields({"source": "x", "refreshPolicy": "OnChange"}) == ["spec.refreshPolicy"]
    url = {"source": "https://h/m.gguf", "refreshPolicy": "OnChange", "sha256": "a" * 64}
    assert model_fields(url) == []
    # quantization is descriptive (LLMKube's too): stored, it changes nothing, so named.
    gguf = sample("gpu-llama-3b-model.yaml")["spec"]
    assert gguf.get("quantization") and "spec.quantization" in model_fields(gguf)


def test_runtime_config_keys_beyond_the_typed_ones() -> None:
    spec = {
        "modelRef": "m",
        "runtime": "vllm",
        "vllmConfig": {"tensorParallelSize": 2, "speculativeModel": "x", "hfTokenSecretRef": {}},
        "sglangConfig": {"contextLength": 4096},
        "tgiConfig": {},
    }
    assert inference_service_fields(spec) == [
        "spec.vllmConfig.speculativeModel",
        "spec.sglangConfig",  # another runtime's section is never read
    ]


def test_list_items_are_named_by_index() -> None:
    spec = {
        "multiNode": {
            "members": [
                {"node": "a", "fabric": {"address": "10.0.0.1"}},
                {"node": "b", "fabric": {"ibHCA": "mlx5_0"}, "modelCache": {"claimName": "c"}},
            ]
        }
    }
    assert inference_service_fields(spec) == [
        "spec.multiNode.members[1].fabric.ibHCA",
        "spec.multiNode.members[1].modelCache",
    ]
    assert gpu_quota_fields({"gpuCount": 2, "costBudgetRef": "b"}) == ["spec.costBudgetRef"]


async def fields_served(kube: KubeClient, rt: Any, name: str, status: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await kube.get(rt, "default", name)
        found = condition(obj, "FieldsServed")
        return obj if found and found["status"] == status else None

    return await eventually(probe, what=f"{name} FieldsServed={status}")


async def warnings(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(EVENT, "default")
    return [
        e for e in items if e["involvedObject"]["name"] == name and e["reason"] == "FieldsNotServed"
    ]


async def test_service_condition_and_one_warning_then_true_when_removed(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, CPU_MODEL)
    extra = "  evictionProtection: true\n  slo: {name: chat}"
    await apply_text(kube, isvc_yaml("s", "m", "vllm", extra))
    obj = await fields_served(kube, INFERENCE_SERVICE, "s", "False")
    found = condition(obj, "FieldsServed")
    assert found is not None
    assert found["reason"] == "FieldsNotServed"
    assert found["message"].endswith("spec.evictionProtection, spec.slo")
    # The rest of the spec is served as if the fields were absent.
    assert condition(obj, "RuntimeConfigured")["status"] == "True"  # type: ignore[index]

    async def one_warning() -> list[dict[str, Any]] | None:
        found = await warnings(kube, "s")
        return found or None

    events = await eventually(one_warning, what="the FieldsNotServed Event")
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert "spec.evictionProtection, spec.slo" in events[0]["message"]

    await reapply(kube, isvc_yaml("s", "m", "vllm"))
    obj = await fields_served(kube, INFERENCE_SERVICE, "s", "True")
    assert condition(obj, "FieldsServed")["reason"] == "AllFieldsServed"  # type: ignore[index]
    assert len(await warnings(kube, "s")) == 1


async def test_model_and_quota_name_theirs_and_a_plain_object_has_none(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, CPU_MODEL)
    sha = "  sha256: " + "ab" * 32
    await apply_text(kube, model_yaml("hashed", "      enabled: true\n      count: 1", sha))
    await apply_text(kube, quota_yaml(4, scope="namespaceRef: default, costBudgetRef: monthly"))
    obj = await fields_served(kube, MODEL, "hashed", "False")
    assert condition(obj, "FieldsServed")["message"].endswith(": spec.sha256")  # type: ignore[index]
    obj = await fields_served(kube, GPU_QUOTA, "team", "False")
    assert condition(obj, "FieldsServed")["message"].endswith(": spec.costBudgetRef")  # type: ignore[index]

    async def plain_model_ready() -> dict[str, Any] | None:
        m = await kube.get(MODEL, "default", "m")
        return m if condition(m, "AcceleratorReady") else None

    m = await eventually(plain_model_ready, what="Model m reconciled")
    assert condition(m, "FieldsServed") is None
