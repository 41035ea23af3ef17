"""The seed guide's two examples end to end: manifests in, pods with claims out."""

from __future__ import annotations

from app.manifests import EXAMPLES, apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, MODEL, SERVICE
from objtypes import Obj
from tests.support.manifests import DRA_CLUSTER_YAML
from tests.support.waiting import condition, eventually


async def test_single_gpu_template_gives_pod_claims_and_no_gpu_limit(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, DRA_CLUSTER_YAML)
    await apply_text(kube, (EXAMPLES / "single-gpu.yaml").read_text())

    async def deployment() -> Obj | None:
        return await kube.get(DEPLOYMENT, "default", "qwen3-embedding")

    dep = await eventually(deployment, what="Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    container = pod["containers"][0]
    assert container["name"] == "inference"
    assert container["resources"]["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})
    # count 1 with llama.cpp: a GPU model, all layers offloaded, nothing to split.
    assert "--n-gpu-layers" in container["args"]
    assert "--split-mode" not in container["args"]
    assert "--tensor-split" not in container["args"]
    # The weights URL is downloaded by an init container into the shared volume.
    assert container["args"][container["args"].index("--model") + 1] == (
        "/models/Qwen3-Embedding-0.6B-Q8_0.gguf"
    )
    assert dep["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"

    async def model_ready() -> Obj | None:
        m = await kube.get(MODEL, "default", "qwen3-embedding")
        c = condition(m, "AcceleratorReady")
        return c if c and c["status"] == "True" else None

    c = await eventually(model_ready, what="AcceleratorReady")
    assert c["reason"] == "ResourceClaimsFound"
    # The Service is applied after the Deployment, in the same reconcile.
    await eventually(lambda: kube.get(SERVICE, "default", "qwen3-embedding"), what="Service")


async def test_multi_gpu_vllm_gets_tensor_parallel_two(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())

    async def deployment() -> Obj | None:
        return await kube.get(DEPLOYMENT, "default", "qwen3-32b")

    dep = await eventually(deployment, what="Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "2"
    assert args[0] == "Qwen/Qwen3-32B"  # `vllm serve <model>`: the positional form
    assert "limits" not in container["resources"]
    assert dep["spec"]["template"]["spec"]["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": "two-gpus"}
    ]

    # The kubelet reports the pod ready: the InferenceService says it is serving.
    dep["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    await kube.replace(DEPLOYMENT, dep, subresource="status")

    async def serving() -> Obj | None:
        isvc = await kube.get(INFERENCE_SERVICE, "default", "qwen3-32b")
        c = condition(isvc, "Ready")
        return isvc if c and c["status"] == "True" else None

    isvc = await eventually(serving, what="Ready InferenceService")
    assert isvc["status"]["readyReplicas"] == 1
    assert isvc["status"]["gpuAttachment"] == "dra"
    assert isvc["status"]["gpusPerReplica"] == 2
