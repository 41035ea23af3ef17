"""`kubectl llmkube`, found by kubectl's plugin discovery on PATH, against the test server."""

from __future__ import annotations

import shutil

import pytest

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.resources import INFERENCE_SERVICE, MODEL
from tests.support.manifests import gpu_template
from tests.support.plugin import cluster, kubectl
from tests.support.waiting import eventually

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")
__all__ = ["cluster"]  # the fixture, used by name


async def test_kubectl_discovers_the_plugin(cluster: tuple[KubeClient, dict[str, str]]) -> None:
    _, env = cluster
    code, out = await kubectl(env, "plugin", "list")
    assert "kubectl-llmkube" in out, out
    code, out = await kubectl(env, "llmkube", "--help")
    assert code == 0 and "status" in out and "deploy" in out


async def test_deploy_then_status_shows_dra_claims_conditions_and_quota(
    cluster: tuple[KubeClient, dict[str, str]],
) -> None:
    client, env = cluster
    await apply_text(client, gpu_template("two-gpus", 2), "team-a")
    await apply_text(
        client,
        """
apiVersion: inference.llmkube.dev/v1alpha1
kind: GPUQuota
metadata: {name: team-gpus}
spec: {gpuCount: 4, namespaceRef: team-a}
""",
        "platform",  # a quota elsewhere, covering team-a through namespaceRef
    )
    code, out = await kubectl(
        env,
        "llmkube",
        "deploy",
        "chat",
        "--source=Qwen/Qwen3-32B",  # no --format: a hub repo on vLLM is safetensors
        "--runtime=vllm",
        "--gpus=2",
        "--claim-template=two-gpus",
    )
    assert code == 0, out
    assert "model/chat applied" in out and "inferenceservice/chat applied" in out
    model = await client.get(MODEL, "team-a", "chat")
    assert model is not None and model["spec"]["format"] == "safetensors"
    assert model["spec"]["hardware"]["gpu"] == {
        "enabled": True,
        "count": 2,
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}],
        "vendor": "nvidia",  # the CRD's default, filled in by the API server
    }

    async def ready() -> bool:
        isvc = await client.get(INFERENCE_SERVICE, "team-a", "chat")
        return ((isvc or {}).get("status") or {}).get("phase") == "Ready"

    await eventually(ready, timeout=30, what="chat Ready")

    async def status() -> str | None:
        code, out = await kubectl(env, "llmkube", "status", "chat")
        assert code == 0, out
        return out if "team-gpus" in out else None  # the quota has accounted for it

    out = await eventually(status, timeout=30, what="status with the quota row")
    assert "InferenceService team-a/chat" in out
    assert "Phase:     Ready" in out
    assert "Endpoint:  http://chat.team-a.svc.cluster.local:8080/v1/chat/completions" in out
    lines = out.splitlines()
    assert any(line.split()[:3] == ["Ready", "True", "Serving"] for line in lines), out
    model_condition = ["Model/AcceleratorReady", "True", "ResourceClaimsFound"]
    assert any(line.split()[:3] == model_condition for line in lines), out
    claim = next(line for line in lines if line.strip().startswith("gpu "))
    assert "template two-gpus" in claim
    assert claim.count("gpu-node-") == 2, claim  # both allocated devices are named
    quota = next(line for line in lines if line.strip().startswith("team-gpus"))
    assert quota.split()[1:4] == ["2/4", "2", "1/1"], quota


async def test_list_and_unknown_names(cluster: tuple[KubeClient, dict[str, str]]) -> None:
    _, env = cluster
    code, out = await kubectl(env, "llmkube", "list")
    assert code == 0 and "No InferenceServices found in namespace team-a" in out
    code, out = await kubectl(
        env, "llmkube", "deploy", "cpu-model", "--source=Qwen/Qwen3-0.6B", "-n", "other"
    )
    assert code == 0, out
    code, out = await kubectl(env, "llmkube", "list", "-A")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split()[:5] == ["NAMESPACE", "NAME", "MODEL", "RUNTIME", "PHASE"]
    assert row.split()[:4] == ["other", "cpu-model", "cpu-model", "llamacpp"]
    code, out = await kubectl(env, "llmkube", "status", "missing")
    assert code == 1 and 'InferenceService "missing" not found in namespace "team-a"' in out
