"""Issue 13 (4): the Kueue path on a DRA-only cluster — pods Kueue's pod integration can
admit and charge by claim, conditions when it never would, and the charge in status.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_dra_kueue.py.
"""

from __future__ import annotations

import pytest

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import INFERENCE_SERVICE
from tests.support.dra_cluster import deployment, dra_cluster, without_count
from tests.support.manifests import claim_template, gpu_template, model_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

Cluster = tuple[KubeClient, Manager, ApiServerProcess]
QUEUE = "kueue.x-k8s.io/queue-name"


@pytest.fixture
async def cluster() -> Cluster:  # type: ignore[misc]
    async with dra_cluster(kueue={"gpu.nvidia.com": "nvidia.com/gpu"}) as c:
        yield c


def queued(name: str, model: str, extra: str = "") -> str:
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata:
  name: {name}
  labels: {{{QUEUE}: team-a}}
spec:
  modelRef: {model}
  runtime: vllm
{extra}
"""


def gpu(entry: str, count: int = 0) -> str:
    counted = f"      count: {count}\n" if count else ""
    return f"      enabled: true\n{counted}      resourceClaims:\n        - {entry}"


async def kueue_of(kube: KubeClient, name: str, replicas: int) -> dict[str, object]:
    async def probe() -> dict[str, object] | None:
        isvc = await kube.get(INFERENCE_SERVICE, "default", name)
        status = ((isvc or {}).get("status") or {}).get("kueue")
        return status if status and status.get("replicas") == replicas else None

    return await eventually(probe, what=f"{name} status.kueue at {replicas} replicas")


async def test_admissible_service_gets_the_label_and_shows_the_charge(cluster: Cluster) -> None:
    kube, _, _ = cluster
    # The guide's multi-GPU example without count, labelled for Kueue, two replicas.
    text = without_count("multi-gpu.yaml").replace(
        "metadata:\n  name: qwen3-32b\nspec:\n  modelRef",
        f"metadata:\n  name: qwen3-32b\n  labels: {{{QUEUE}: team-a}}\nspec:\n  replicas: 2\n"
        "  modelRef",
    )
    await apply_text(kube, text)
    dep = await deployment(kube, "qwen3-32b")
    assert dep["metadata"]["labels"][QUEUE] == "team-a"
    template = dep["spec"]["template"]
    assert template["metadata"]["labels"][QUEUE] == "team-a"
    # Template claims only, and no device-plugin limit for Kueue to ask for.
    assert template["spec"]["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": "two-gpus"}
    ]
    assert "limits" not in template["spec"]["containers"][0]["resources"]
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "qwen3-32b", "KueueCompatible", "True", "Admissible"
    )
    assert "nvidia.com/gpu: 4" in condition(isvc, "KueueCompatible")["message"]  # type: ignore[index]
    status = await kueue_of(kube, "qwen3-32b", 2)
    assert status == {
        "queueName": "team-a",
        "admissible": True,
        "replicas": 2,
        "devices": [
            {"deviceClass": "gpu.nvidia.com", "resource": "nvidia.com/gpu", "perPod": 2, "total": 4}
        ],
        "summary": "nvidia.com/gpu: 4",
    }

    # suspend is honoured: no pods, nothing charged.
    await reapply(kube, text.replace("  replicas: 2\n", "  replicas: 2\n  suspend: true\n"))
    await wait_condition(kube, INFERENCE_SERVICE, "qwen3-32b", "Suspended", "True")
    status = await kueue_of(kube, "qwen3-32b", 0)
    assert status["summary"] == "nvidia.com/gpu: 0"

    async def scaled_down() -> bool:
        live = await deployment(kube, "qwen3-32b")
        return bool(live["spec"]["replicas"] == 0)

    assert await eventually(scaled_down, what="Deployment at 0 replicas")


async def test_what_kueue_never_admits(cluster: Cluster) -> None:
    kube, _, _ = cluster
    await reapply(kube, gpu_template("two-gpus", 2))
    # count next to claims: the llmkube-kueue integration asks for nvidia.com/gpu.
    await reapply(
        kube, model_yaml("counted", gpu("{name: g, resourceClaimTemplateName: two-gpus}", 2))
    )
    await reapply(kube, queued("counted", "counted"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "counted", "KueueCompatible", "False", "CountWithClaims"
    )
    assert isvc["status"]["kueue"]["admissible"] is False

    # A shared claim by name.
    await apply_text(
        kube,
        """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared}
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
""",
    )
    await reapply(kube, model_yaml("shared", gpu("{name: g, resourceClaimName: shared}")))
    await reapply(kube, queued("shared", "shared"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "shared", "KueueCompatible", "False", "SharedClaim"
    )
    assert 'names ResourceClaim "shared"' in condition(isvc, "KueueCompatible")["message"]  # type: ignore[index]

    # allocationMode All, and a class Kueue has no mapping for.
    every_gpu = "{deviceClassName: gpu.nvidia.com, allocationMode: All}"
    await apply_text(
        kube,
        claim_template("every-gpu", f"        - name: gpu\n          exactly: {every_gpu}")
        + "---"
        + claim_template(
            "a100",
            "        - name: gpu\n          exactly: {deviceClassName: a100.nvidia.com, count: 1}",
        ),
    )
    await reapply(kube, model_yaml("all", gpu("{name: g, resourceClaimTemplateName: every-gpu}")))
    await reapply(kube, queued("all", "all"))
    await wait_condition(
        kube, INFERENCE_SERVICE, "all", "KueueCompatible", "False", "AllocationModeAll"
    )
    await reapply(kube, model_yaml("a100", gpu("{name: g, resourceClaimTemplateName: a100}")))
    await reapply(kube, queued("a100", "a100"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "a100", "KueueCompatible", "False", "UnmappedDeviceClass"
    )
    assert 'DeviceClass "a100.nvidia.com"' in condition(isvc, "KueueCompatible")["message"]  # type: ignore[index]
    assert isvc["status"]["kueue"]["devices"] == [
        {"deviceClass": "a100.nvidia.com", "resource": "", "perPod": 1, "total": 1}
    ]


@pytest.mark.server  # a cluster of its own, without mappings
async def test_without_configured_mappings_classes_are_not_checked() -> None:
    async with dra_cluster() as (kube, _, _):
        await reapply(kube, gpu_template("one-gpu", 1))
        await reapply(kube, model_yaml("m", gpu("{name: g, resourceClaimTemplateName: one-gpu}")))
        await reapply(kube, queued("svc", "m"))
        isvc = await wait_condition(
            kube, INFERENCE_SERVICE, "svc", "KueueCompatible", "True", "Admissible"
        )
        assert "--kueue-device-class-mapping" in condition(isvc, "KueueCompatible")["message"]  # type: ignore[index]
