"""GPUQuota: count per replica, claims without count, admission and scaling under the limit.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_gpuquota.py.
"""

from __future__ import annotations

from typing import Any

from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, GPU_QUOTA, INFERENCE_SERVICE
from objtypes import Obj
from tests.support.manifests import (
    TWO_GPU_CLAIMS,
    gpu_template,
    model_yaml,
    quota_yaml,
    reapply,
    two_gpu_claims,
)
from tests.support.manifests import isvc_yaml as service_yaml
from tests.support.quota import isvc_yaml, replicas
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

COUNTED = TWO_GPU_CLAIMS
UNCOUNTED = two_gpu_claims()


async def quota_status(kube: KubeClient, want: dict[str, Any], name: str = "team") -> Obj:
    async def probe() -> Obj | None:
        q = await kube.get(GPU_QUOTA, "default", name)
        status = (q or {}).get("status") or {}
        return q if all(status.get(k) == v for k, v in want.items()) else None

    return await eventually(probe, what=f"GPUQuota status {want}")


async def test_charges_count_per_replica(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", COUNTED))
    await reapply(kube, quota_yaml(10))
    await reapply(kube, isvc_yaml("svc", "m", replicas=3))
    q = await quota_status(kube, {"usedGPUCount": 6, "requestedGPUCount": 6})
    assert q["status"]["services"] == [
        {
            "namespace": "default",
            "name": "svc",
            "requestedReplicas": 3,
            "admittedReplicas": 3,
            "gpusPerReplica": 2,
            "gpus": 6,
            "allocatedGPUs": 0,
            "vramBytes": 0,  # its Model says no hardware.gpu.memory
        }
    ]
    assert condition(q, "WithinLimit")["status"] == "True"  # type: ignore[index]
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "QuotaAdmitted", "True", "WithinQuota"
    )
    assert isvc["status"]["admittedReplicas"] == 3


async def test_claims_without_count_charged_only_with_resources_gpu(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", UNCOUNTED))
    await reapply(kube, quota_yaml(4))
    await reapply(kube, isvc_yaml("free", "m", replicas=5))
    await quota_status(kube, {"usedGPUCount": 0, "requestedGPUCount": 0})
    await replicas(kube, "free", 5)
    await reapply(kube, isvc_yaml("charged", "m", replicas=2, gpu=2))
    q = await quota_status(kube, {"usedGPUCount": 4, "requestedGPUCount": 4})
    by_name = {s["name"]: s for s in q["status"]["services"]}
    assert by_name["free"]["gpusPerReplica"] == 0
    assert by_name["charged"]["gpus"] == 4


async def test_over_quota_is_not_scaled_past_it_and_says_so(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", COUNTED))
    await reapply(kube, quota_yaml(5))
    await reapply(kube, isvc_yaml("first", "m", replicas=2))
    await replicas(kube, "first", 2)
    await reapply(kube, isvc_yaml("second", "m", replicas=2))
    # 5 GPUs at 2 per replica: first keeps 2 replicas (4 GPUs), second fits none.
    await replicas(kube, "second", 0)
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "second", "QuotaAdmitted", "False", "QuotaExceeded"
    )
    assert condition(isvc, "QuotaAdmitted")["message"] == (  # type: ignore[index]
        "GPUQuota limit 5 GPUs: 0 of 2 replicas admitted at 2 GPU(s) each"
    )
    assert isvc["status"]["phase"] == "Pending"
    q = await quota_status(kube, {"usedGPUCount": 4, "requestedGPUCount": 8})
    assert condition(q, "WithinLimit")["status"] == "False"  # type: ignore[index]
    await wait_condition(kube, INFERENCE_SERVICE, "first", "QuotaAdmitted", "True")

    # Raising the limit admits the waiting replicas; lowering it scales the newest first.
    await reapply(kube, quota_yaml(6))
    await replicas(kube, "second", 1)
    await reapply(kube, quota_yaml(2))
    await replicas(kube, "second", 0)
    await replicas(kube, "first", 1)
    # Freeing GPUs (first scaled to zero by its owner) admits second.
    await reapply(kube, isvc_yaml("first", "m", replicas=0))
    await replicas(kube, "second", 1)
    await wait_condition(kube, INFERENCE_SERVICE, "first", "Ready", "False", "ScaledToZero")


async def test_invalid_quota_reports_itself_and_limits_nothing(
    kube: KubeClient, controller: Manager, apiserver: ApiServerProcess
) -> None:
    await apiserver.control("PUT", "schema-validation", {"enforce": False})  # older CRDs
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await reapply(kube, quota_yaml(-1))
    await wait_condition(kube, GPU_QUOTA, "team", "Ready", "False", "InvalidSpec")
    await reapply(kube, isvc_yaml("svc", "m", replicas=3))
    await replicas(kube, "svc", 3)


async def test_smallest_of_several_quotas_applies(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await reapply(kube, quota_yaml(8, name="wide"))
    await reapply(kube, quota_yaml(3, name="narrow"))
    await reapply(kube, isvc_yaml("svc", "m", replicas=5))
    await replicas(kube, "svc", 3)
    await quota_status(kube, {"usedGPUCount": 3}, name="wide")
    await quota_status(kube, {"usedGPUCount": 3}, name="narrow")


def namespace_yaml(name: str, tier: str) -> str:
    return f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {name}, labels: {{tier: {tier}}}}}
"""


async def test_selector_quota_covers_labelled_namespaces_only(
    kube: KubeClient, controller: Manager
) -> None:
    """LLMKube's semantics: the selector matches Namespace labels, in any namespace, and
    the namespaces it matches share the quota's gpuCount; pod labels do not count."""
    await reapply(kube, namespace_yaml("team-a", "gold"))
    await reapply(kube, namespace_yaml("team-b", "free"))
    for ns in ("team-a", "team-b"):
        await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"), ns)
    gold = "selector: {matchLabels: {tier: gold}}"
    await reapply(kube, quota_yaml(1, name="gold", scope=gold))
    await reapply(kube, isvc_yaml("svc", "m", replicas=3), "team-a")
    pods_gold = "  replicas: 3\n  podLabels: {tier: gold}"  # pod labels are not the scope
    await reapply(kube, service_yaml("svc", "m", extra=pods_gold), "team-b")
    await replicas_in(kube, "team-a", "svc", 1)
    await replicas_in(kube, "team-b", "svc", 3)
    q = await quota_status(kube, {"usedGPUCount": 1, "requestedGPUCount": 3}, name="gold")
    assert [(s["namespace"], s["name"]) for s in q["status"]["services"]] == [("team-a", "svc")]
    await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "QuotaAdmitted", "True", "NoQuota", namespace="team-b"
    )

    # team-b is relabelled into the quota's reach: the two share its one GPU, first
    # come first served (team-a's service is older).
    await reapply(kube, namespace_yaml("team-b", "gold"))
    await replicas_in(kube, "team-b", "svc", 0)
    q = await quota_status(kube, {"usedGPUCount": 1, "requestedGPUCount": 6}, name="gold")
    rows = [(s["namespace"], s["name"], s["admittedReplicas"]) for s in q["status"]["services"]]
    assert rows == [("team-a", "svc", 1), ("team-b", "svc", 0)]

    # team-a leaves it: its service is no longer held back, team-b's gets the GPU.
    await reapply(kube, namespace_yaml("team-a", "free"))
    await replicas_in(kube, "team-a", "svc", 3)
    await replicas_in(kube, "team-b", "svc", 1)
    q = await quota_status(kube, {"usedGPUCount": 1, "requestedGPUCount": 3}, name="gold")
    assert [(s["namespace"], s["name"]) for s in q["status"]["services"]] == [("team-b", "svc")]

    # No namespace matches any more: the quota says it covers nothing.
    await reapply(kube, namespace_yaml("team-b", "free"))
    await replicas_in(kube, "team-b", "svc", 3)
    q = await quota_status(kube, {"usedGPUCount": 0, "requestedGPUCount": 0}, name="gold")
    assert q["status"]["services"] == []


async def test_namespace_ref_quota_from_another_namespace(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"), "team-a")
    await reapply(kube, isvc_yaml("svc", "m", replicas=3), "team-a")
    await replicas_in(kube, "team-a", "svc", 3)
    await reapply(kube, quota_yaml(2, name="for-a", scope="namespaceRef: team-a"))
    await replicas_in(kube, "team-a", "svc", 2)
    await quota_status(kube, {"usedGPUCount": 2, "requestedGPUCount": 3}, name="for-a")


async def replicas_in(kube: KubeClient, ns: str, name: str, want: int) -> None:
    async def probe() -> bool:
        d = await kube.get(DEPLOYMENT, ns, name)
        return bool(d and d["spec"]["replicas"] == want)

    await eventually(probe, what=f"{ns}/{name} at {want} replicas")
