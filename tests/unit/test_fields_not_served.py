"""FieldsServed: every LLMKube field a spec sets that llmkube-py does not act on is named.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_fields_not_served.py.
"""

from __future__ import annotations

from typing import Any

import yaml

from api.unserved import gpu_quota_fields, inference_service_fields, model_fields
from tests.support.paths import DATA

SAMPLES = DATA / "llmkube-samples"


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
