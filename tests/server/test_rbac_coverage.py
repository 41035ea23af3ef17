"""Every request the controller makes in a broad scenario is allowed by the chart's RBAC."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from app.manifests import EXAMPLES, apply_text
from controller.kube import KubeClient
from controller.resources import DEPLOYMENT, EVENT, INFERENCE_SERVICE, POD, POD_DISRUPTION_BUDGET
from tests.support.chart import render, rules_of
from tests.support.delivery import cluster_with_cache, model_phase
from tests.support.dra_cluster import dra_cluster
from tests.support.manager import manager_for
from tests.support.manifests import gpu_template, isvc_yaml, model_yaml, reapply
from tests.support.waiting import eventually, wait_condition
from testserver.process import ApiServerProcess

VERB_OF = {
    "GET": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
    "WATCH": "watch",
}


def permission(entry: str) -> tuple[str, str, str]:
    """'PUT /apis/apps/v1/namespaces/d/deployments/x' -> ('apps', 'deployments', 'update')."""
    method, path = entry.split(" ", 1)
    parts = [p for p in path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest and rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] + ("/" + rest[2] if len(rest) == 3 else "")
    verb = VERB_OF[method]
    if verb == "get" and len(rest) == 1:
        verb = "list"
    return group, resource, verb


async def test_controller_requests_are_covered_by_the_chart_rbac(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    await apiserver.control("DELETE", "requests")
    manager = manager_for(kube, leader_election=True, lease_namespace="llmkube-system")
    await manager.start()
    try:
        await manager.wait_synced()
        for example in ("single-gpu.yaml", "multi-gpu.yaml"):
            await apply_text(kube, (EXAMPLES / example).read_text())
        await apply_text(kube, gpu_template("one-gpu", 1))
        await apply_text(kube, model_yaml("multi", "      enabled: true\n      count: 1"))
        multi = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: multi}}
spec:
  modelRef: multi
  runtime: vllm
  multiNode: {{members: [{{node: a, fabric: {{address: 10.0.0.1}}}}, {members}]}}
"""
        await apply_text(kube, multi.format(members="{node: b}, {node: c}"))

        async def members(want: list[str]) -> bool:
            pods, _ = await kube.list(POD, "default")
            return sorted(p["metadata"]["name"] for p in pods) == want

        await eventually(
            lambda: members(["multi-0", "multi-1", "multi-2"]), what="three member pods"
        )
        # One member less: its pod is deleted.
        await reapply(kube, multi.format(members="{node: b}"))
        await eventually(lambda: members(["multi-0", "multi-1"]), what="two member pods")
        await apply_text(
            kube,
            """
apiVersion: inference.llmkube.dev/v1alpha1
kind: GPUQuota
metadata: {name: q}
spec: {gpuCount: 1, namespaceRef: default}
""",
        )
        await wait_condition(kube, INFERENCE_SERVICE, "qwen3-32b", "QuotaAdmitted", "False")
        await apply_text(kube, model_yaml("qwen3-32b", "      enabled: true\n      count: 2"))

        async def updated() -> bool:
            d = await kube.get(DEPLOYMENT, "default", "qwen3-32b")
            return bool(d and "resourceClaims" not in d["spec"]["template"]["spec"])

        await eventually(updated, what="Deployment updated")
        # spec.disruption: the budget of a starting service goes when protection is off.
        await reapply(
            kube, isvc_yaml("multi", "multi", "vllm", "  disruption: {protectStartup: false}")
        )
        await eventually(
            lambda: budget_gone(kube, "multi"), what="PodDisruptionBudget multi removed"
        )
        await manager.wait_idle()
    finally:
        await manager.stop()
    requests = await apiserver.requests()
    ours = [e for e in requests if "/_testserver" not in e]
    # The test's own writes (apply_text) go to the same server: only count the controller's
    # verbs on the resources it touches, which the test itself never writes.
    used = {permission(e) for e in ours}
    allowed = rules_of(next(d for d in render({"replicas": 2}) if d["kind"] == "ClusterRole"))
    allowed |= rules_of(next(d for d in render({"replicas": 2}) if d["kind"] == "Role"))
    test_writes = {
        ("inference.llmkube.dev", r, v)
        for r in ("models", "inferenceservices", "gpuquotas", "customresourcedefinitions")
        for v in ("create", "update", "get")
    }
    test_writes |= {
        ("resource.k8s.io", "resourceclaimtemplates", v) for v in ("create", "update", "get")
    }
    test_writes |= {
        ("apps", "deployments", "get"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "get"),
    }
    test_writes |= {("apiextensions.k8s.io", "customresourcedefinitions", "create")}
    missing = used - allowed - test_writes
    assert not missing, f"requests the chart's RBAC would forbid: {sorted(missing)}"
    for needed in [
        ("policy", "poddisruptionbudgets", "patch"),
        ("policy", "poddisruptionbudgets", "delete"),
        ("policy", "poddisruptionbudgets", "watch"),
    ]:
        assert needed in used, needed
    # The scenario exercised the interesting verbs, so the check above means something.
    for needed in [
        ("apps", "deployments", "patch"),
        ("", "pods", "delete"),
        ("", "pods", "patch"),
        ("", "events", "create"),
        ("inference.llmkube.dev", "gpuquotas/status", "patch"),
        ("coordination.k8s.io", "leases", "create"),
        ("resource.k8s.io", "resourceclaimtemplates", "watch"),
    ]:
        assert needed in used, needed


async def budget_gone(kube: KubeClient, name: str) -> bool:
    return await kube.get(POD_DISRUPTION_BUDGET, "default", name) is None


def forbidden(requests: Iterable[str]) -> set[tuple[str, str, str]]:
    """The controller's requests (all but the test's own writes) the chart would refuse."""
    allowed = rules_of(next(d for d in render({"replicas": 2}) if d["kind"] == "ClusterRole"))
    test_writes = {
        ("inference.llmkube.dev", r, v)
        for r in ("models", "inferenceservices")
        for v in ("create", "update", "get")
    }
    test_writes |= {
        ("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("create", "get")
    }
    test_writes.add(("", "events", "list"))  # the test looks for the Event
    used = {permission(e) for e in requests if "/_testserver" not in e}
    return used - allowed - test_writes


@pytest.mark.server
async def test_pod_recycling_requests_are_covered_by_the_chart_rbac() -> None:
    """maxPodLifetimeSeconds evicts pods: pods/eviction create, on a cluster that runs them."""
    async with dra_cluster(gpus=0, plugin=0) as (kube, manager, server):
        await server.control("DELETE", "requests")
        await apply_text(
            kube,
            "apiVersion: inference.llmkube.dev/v1alpha1\nkind: Model\nmetadata: {name: m}\n"
            "spec: {source: Qwen/Qwen3-8B, format: safetensors}\n",
        )
        await apply_text(kube, isvc_yaml("s", "m", "vllm", "  maxPodLifetimeSeconds: 1"))

        async def recycled() -> bool:
            items, _ = await kube.list(EVENT, "default")
            return any(e["reason"] == "PodRecycled" for e in items)

        await eventually(recycled, timeout=20, what="a pod recycled")
        await manager.wait_idle()
        requests = await server.requests()
    assert ("", "pods/eviction", "create") in {permission(e) for e in requests}
    missing = forbidden(requests)
    assert not missing, f"requests the chart's RBAC would forbid: {sorted(missing)}"


@pytest.mark.server
async def test_model_delivery_requests_are_covered_by_the_chart_rbac() -> None:
    """The cache PVC (create only) and prefetch Jobs: what the chart grants, and only
    with modelCache.enabled for the PVC."""
    async with cluster_with_cache() as (kube, manager, server):
        await apply_text(
            kube,
            "apiVersion: inference.llmkube.dev/v1alpha1\nkind: Model\nmetadata: {name: m}\n"
            "spec: {source: 'https://h.example/m.gguf', prefetch: true}\n",
        )
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        await model_phase(kube, "m", "Ready")
        await manager.wait_idle()
        requests = await server.requests()
    used = {permission(e) for e in requests}
    for needed in [
        ("", "persistentvolumeclaims", "create"),
        ("batch", "jobs", "patch"),  # server-side apply
        ("batch", "jobs", "watch"),
    ]:
        assert needed in used, needed
    assert not {u for u in used if u[1] == "persistentvolumeclaims" and u[2] != "create"}
    missing = forbidden(requests)
    assert not missing, f"requests the chart's RBAC would forbid: {sorted(missing)}"
    without = rules_of(
        next(d for d in render({"modelCache": {"enabled": False}}) if d["kind"] == "ClusterRole")
    )
    assert not {r for r in without if r[1] == "persistentvolumeclaims"}
