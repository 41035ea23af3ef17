"""Bad input never kills a worker: each object gets a clear condition, and work goes on.

The test API server enforces the CRD schemas like a cluster; here it is switched to act
like a cluster whose CRDs are older than the controller and stores whatever it is sent, so
these objects reach the reconcilers unvalidated.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, GPU_QUOTA, INFERENCE_SERVICE, MODEL
from objtypes import Obj
from tests.support.manifests import model_yaml
from tests.support.waiting import condition, wait_condition
from testserver.process import ApiServerProcess


@pytest.fixture(autouse=True)
async def looser_crds(apiserver: ApiServerProcess) -> None:
    await apiserver.control("PUT", "schema-validation", {"enforce": False})


def obj(kind: str, name: str, spec: Any) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


BAD_MODELS: list[tuple[str, Any, str]] = [
    ("spec-string", "cuda please", "spec: must be an object"),
    ("spec-null", None, "spec.source: required"),
    (
        "hardware-list",
        {"source": "org/m", "hardware": ["cuda"]},
        "spec.hardware: must be an object",
    ),
    (
        "claims-dict",
        {"source": "org/m", "hardware": {"gpu": {"resourceClaims": {"name": "g"}}}},
        "spec.hardware.gpu.resourceClaims: must be a list",
    ),
    (
        "claim-string",
        {"source": "org/m", "hardware": {"gpu": {"resourceClaims": ["one-gpu"]}}},
        "spec.hardware.gpu.resourceClaims[0]: must be an object",
    ),
    (
        "count-negative",
        {"source": "org/m", "hardware": {"gpu": {"enabled": True, "count": -2}}},
        "spec.hardware.gpu.count: must be at least 0, got -2",
    ),
    (
        "count-huge",
        {"source": "org/m", "hardware": {"gpu": {"enabled": True, "count": 10**12}}},
        "spec.hardware.gpu.count: must be at most 8, got 1000000000000",
    ),
    (
        "count-text",
        {"source": "org/m", "hardware": {"gpu": {"enabled": True, "count": "two"}}},
        "spec.hardware.gpu.count: must be a number",
    ),
    (
        "count-float",
        {"source": "org/m", "hardware": {"gpu": {"enabled": True, "count": 1.5}}},
        "spec.hardware.gpu.count: must be an integer, got 1.5",
    ),
    (
        "count-infinite",
        {"source": "org/m", "hardware": {"gpu": {"enabled": True, "count": float("inf")}}},
        "spec.hardware.gpu.count: must be a finite number, got inf",
    ),
    (
        "memory-fraction-nan",
        {"source": "org/m", "hardware": {"memoryFraction": float("nan")}},
        "spec.hardware.memoryFraction: must be a finite number, got nan",
    ),
    (
        "vendor-unknown",
        {"source": "org/m", "hardware": {"gpu": {"enabled": True, "vendor": "acme"}}},
        "spec.hardware.gpu.vendor: 'acme' is not one of nvidia, amd, intel",
    ),
    (
        "source-pattern",
        {"source": "no spaces allowed"},
        "spec.source: 'no spaces allowed': holds a space at offset 2",
    ),
    (  # stored before the CRD's pattern was anchored (issue 27 item 1)
        "source-newline",
        {"source": "https://h/x.gguf\nhttps://evil/f ../0123456789abcdef/m.gguf"},
        "spec.source: 'https://h/x.gguf\\nhttps://evil/f ../0123456789abcdef/m.gguf': "
        "holds a newline at offset 16",
    ),
    (
        "files-dotdot",
        {"source": "org/r", "files": ["m.gguf", "../0123456789abcdef/m.gguf"]},
        "spec.files[1]: '../0123456789abcdef/m.gguf': '..' is not allowed anywhere in it",
    ),
    (
        "mmproj-absolute",
        {"source": "org/r", "files": ["m.gguf"], "mmproj": "/etc/passwd"},
        "spec.mmproj: '/etc/passwd': is not a repo-relative file path",
    ),
]


@pytest.mark.parametrize(("name", "spec", "message"), BAD_MODELS, ids=[b[0] for b in BAD_MODELS])
async def test_bad_models_get_invalid_spec(
    kube: KubeClient, controller: Manager, name: str, spec: Any, message: str
) -> None:
    await kube.create(MODEL, obj("Model", name, spec))
    m = await wait_condition(kube, MODEL, name, "AcceleratorReady", "False", "InvalidSpec")
    assert message in condition(m, "AcceleratorReady")["message"]  # type: ignore[index]
    assert_workers_healthy(controller)


BAD_SERVICES: list[tuple[str, Any, str, str]] = [
    (
        "runtime-unknown",
        {"modelRef": "ok", "runtime": "ollama"},
        "InvalidSpec",
        "spec.runtime: 'ollama' is not one of llamacpp, llamacpp-router, personaplex, vllm",
    ),
    (
        "replicas-negative",
        {"modelRef": "ok", "replicas": -1},
        "InvalidSpec",
        "spec.replicas: must be at least 0, got -1",
    ),
    ("no-model-ref", {"runtime": "vllm"}, "InvalidSpec", "spec.modelRef: required"),
    (
        "model-ref-object",
        {"modelRef": {"name": "ok"}},
        "InvalidSpec",
        "spec.modelRef: must be a string",
    ),
    (
        "missing-model",
        {"modelRef": "nowhere"},
        "ModelNotFound",
        "Model 'nowhere' not found in namespace default",
    ),
    (
        "bad-model",
        {"modelRef": "count-bad"},
        "ModelInvalid",
        "Model 'count-bad' is invalid: spec.hardware.gpu.count: must be at least 0, got -1",
    ),
    (
        "extra-args-dict",
        {"modelRef": "ok", "extraArgs": {"--tp": 2}},
        "InvalidSpec",
        "spec.extraArgs: must be a list",
    ),
    (
        "gpu-negative",
        {"modelRef": "ok", "resources": {"gpu": -1}},
        "InvalidSpec",
        "spec.resources.gpu: must be at least 0, got -1",
    ),
    (
        "utilization-high",
        {"modelRef": "ok", "runtime": "vllm", "vllmConfig": {"gpuMemoryUtilization": 3}},
        "InvalidSpec",
        "spec.vllmConfig.gpuMemoryUtilization: must be at most 1, got 3",
    ),
    (
        "replicas-infinite",
        {"modelRef": "ok", "replicas": float("inf")},
        "InvalidSpec",
        "spec.replicas: must be a finite number, got inf",
    ),
    (
        "replicas-over-ten",
        {"modelRef": "ok", "replicas": 11},
        "InvalidSpec",
        "spec.replicas: must be at most 10, got 11",
    ),
    (
        "context-nan",
        {"modelRef": "ok", "contextSize": float("nan")},
        "InvalidSpec",
        "spec.contextSize: must be a finite number, got nan",
    ),
    (
        "runtime-not-served",
        {"modelRef": "ok", "runtime": "personaplex"},
        "RuntimeNotSupported",
        "spec.runtime: 'personaplex' is valid in LLMKube's API but llmkube-py serves only",
    ),
]


@pytest.mark.parametrize(
    ("name", "spec", "reason", "message"), BAD_SERVICES, ids=[b[0] for b in BAD_SERVICES]
)
async def test_bad_services_get_a_clear_condition(
    kube: KubeClient, controller: Manager, name: str, spec: Any, reason: str, message: str
) -> None:
    await kube.create(
        MODEL, obj("Model", "ok", {"source": "org/m", "hardware": {"accelerator": "cpu"}})
    )
    await kube.create(
        MODEL,
        obj(
            "Model",
            "count-bad",
            {"source": "org/m", "hardware": {"gpu": {"enabled": True, "count": -1}}},
        ),
    )
    await kube.create(INFERENCE_SERVICE, obj("InferenceService", name, spec))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, name, "Ready", "False", reason)
    assert message in condition(isvc, "Ready")["message"]  # type: ignore[index]
    assert await kube.get(DEPLOYMENT, "default", name) is None
    assert_workers_healthy(controller)


async def test_bad_quota_gets_invalid_spec(kube: KubeClient, controller: Manager) -> None:
    await kube.create(GPU_QUOTA, obj("GPUQuota", "q", {"gpuCount": "lots"}))
    q = await wait_condition(kube, GPU_QUOTA, "q", "Ready", "False", "InvalidSpec")
    assert condition(q, "Ready")["message"] == (  # type: ignore[index]
        "spec.gpuCount: must be a number; spec: exactly one of selector or namespaceRef must be set"
    )


async def test_huge_objects_flow_through_watch_and_reconcile(
    kube: KubeClient, controller: Manager
) -> None:
    # About 2 MB on one watch line: far past aiohttp's default line limit.
    source = "https://example.com/" + "x" * 2_000_000 + ".gguf"
    await kube.create(
        MODEL, obj("Model", "huge", {"source": source, "hardware": {"accelerator": "cpu"}})
    )
    # 20,000 words of an option llama.cpp repeats (an unknown one would be refused).
    extra = [word for i in range(10_000) for word in ("--override-kv", f"k{i}=int:1")]
    await kube.create(
        INFERENCE_SERVICE, obj("InferenceService", "huge", {"modelRef": "huge", "extraArgs": extra})
    )
    await wait_condition(kube, MODEL, "huge", "AcceleratorReady", "True", timeout=20)
    await wait_condition(kube, INFERENCE_SERVICE, "huge", "ModelResolved", "True", timeout=20)
    dep = await kube.get(DEPLOYMENT, "default", "huge")
    assert dep is not None
    assert dep["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "k9999=int:1"
    assert_workers_healthy(controller)


async def test_work_goes_on_after_bad_input(kube: KubeClient, controller: Manager) -> None:
    for name, spec, _ in BAD_MODELS:
        await kube.create(MODEL, obj("Model", name, spec))
    await apply_text(kube, model_yaml("good", "      enabled: true\n      count: 1"))
    await wait_condition(kube, MODEL, "good", "AcceleratorReady", "True", "DevicePlugin")
    for name, _, _ in BAD_MODELS:
        await wait_condition(kube, MODEL, name, "AcceleratorReady", "False", "InvalidSpec")
    await controller.wait_idle()
    assert_workers_healthy(controller)
    # Invalid specs are final until the user edits them: no retry storm.
    assert controller.queue.waiting == 0


def assert_workers_healthy(manager: Manager) -> None:
    panics = [
        s
        for family in manager.metrics.registry.collect()
        if family.name == "controller_runtime_reconcile_panics"
        for s in family.samples
        if s.name.endswith("_total") and s.value
    ]
    assert panics == [], panics
    assert manager._workers and not any(w.done() for w in manager._workers)
