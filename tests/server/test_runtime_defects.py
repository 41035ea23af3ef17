"""The eleven defects of the runtimes issue, one test (or group) each.

Each failed before its fix: the argv, ports, images, loader and multiNode pieces are
checked on the objects the controller builds (pod_spec, build_member_pods,
build_service), the refusals on the InferenceService a real reconcile writes.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_runtime_defects.py.
"""

from __future__ import annotations

import pytest

from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, SERVICE
from objtypes import Obj
from tests.support.manifests import isvc_yaml, model_yaml, reapply
from tests.support.waiting import wait_condition


# 5. Parallelism above the GPUs the pod gets: a condition with the numbers, no workload.
async def test_5_parallelism_above_gpus_is_reported(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await reapply(
        kube,
        isvc_yaml(
            "svc", "m", extra="  vllmConfig: {tensorParallelSize: 2, pipelineParallelSize: 2}"
        ),
    )
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "Ready", "False", "ParallelismExceedsGPUs"
    )
    ready = next(c for c in isvc["status"]["conditions"] if c["type"] == "Ready")
    assert "4 GPUs" in ready["message"] and "gets 1" in ready["message"]
    assert await kube.get(DEPLOYMENT, "default", "svc") is None


async def test_6_no_pinned_image_is_reported(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", "      enabled: true\n      vendor: intel\n      count: 1"))
    await reapply(kube, isvc_yaml("svc", "m", runtime="vllm"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "Ready", "False", "ImageNotAvailable"
    )
    ready = next(c for c in isvc["status"]["conditions"] if c["type"] == "Ready")
    assert "runtimeImages.vllm.intel" in ready["message"]


@pytest.mark.parametrize(
    ("runtime", "source", "fmt"),
    [("llamacpp", "Qwen/Qwen3-8B", "safetensors"), ("tgi", "https://example.com/q.gguf", "gguf")],
)
async def test_7_wrong_model_form_is_refused(
    kube: KubeClient, controller: Manager, runtime: str, source: str, fmt: str
) -> None:
    text = model_yaml("m", "      enabled: true\n      count: 1")
    text = text.replace("source: Qwen/Qwen3-8B", f"source: {source}")
    text = text.replace("format: safetensors", f"format: {fmt}")
    await reapply(kube, text)
    await reapply(kube, isvc_yaml("svc", "m", runtime=runtime))
    await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "Ready", "False", "ModelFormatNotSupported"
    )
    assert await kube.get(DEPLOYMENT, "default", "svc") is None


async def test_8_headless_service_for_the_rendezvous(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    members = "  multiNode: {members: [{node: a, fabric: {address: 10.0.0.1}}, {node: b}]}"
    await reapply(kube, isvc_yaml("svc", "m", extra=members))

    async def headless() -> Obj | None:
        return await kube.get(SERVICE, "default", "svc-members")

    from tests.support.waiting import eventually

    svc = await eventually(headless, what="headless Service")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
    from controller.resources import POD

    pod = await eventually(lambda: kube.get(POD, "default", "svc-1"), what="member pod")
    assert pod["spec"]["subdomain"] == "svc-members"


# Issue 20, item 3: a free-text vLLM value 0.34 exits on is refused, naming the field.
async def test_a_value_the_release_refuses_is_reported_by_field(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await reapply(kube, isvc_yaml("svc", "m", extra="  vllmConfig: {kvCacheDtype: int8}"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "RuntimeConfigured", "False", "InvalidRuntimeConfig"
    )
    ready = next(c for c in isvc["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "InvalidRuntimeConfig"
    assert ready["message"].startswith("spec.vllmConfig.kvCacheDtype: 'int8'"), ready["message"]
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
    # vLLM's ROCm build is pinned: an AMD Model is served, not refused for its image.
    await reapply(kube, model_yaml("m", "      enabled: true\n      vendor: amd\n      count: 1"))
    await reapply(kube, isvc_yaml("svc", "m"))
    await wait_condition(kube, INFERENCE_SERVICE, "svc", "RuntimeConfigured", "True", "ArgvValid")
    dep = await kube.get(DEPLOYMENT, "default", "svc")
    assert dep is not None
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "vllm/vllm-openai-rocm:v0.34.0"
