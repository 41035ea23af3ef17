"""GPU nodes tainted as GKE, AKS and the GPU operator taint them, on the real scheduler.

Every kwok node is tainted for the test and untainted after. A bare pod shows the taint
is in force (the scheduler leaves it Pending naming the untolerated taint); the guide's
DRA example, which no admission plugin gives a toleration, is placed anyway, because the
controller writes the GPU toleration on every GPU pod (keyed by tolerationKey if set).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from app.manifests import EXAMPLES
from devcluster import KubeCluster
from objtypes import Obj
from tests.support.cluster_objects import apply_yaml, get, items, model_cache_volume, wait_for
from tests.support.kube_cluster import ControllerProcess

pytestmark = pytest.mark.timeout(600)
MERGE = "application/merge-patch+json"


@pytest.fixture
def taint_gpu_nodes(kube_cluster: KubeCluster) -> Iterator[Callable[[str], None]]:
    """Taint every node `<key>=present:NoSchedule`; each node's own taints come back after."""
    before: dict[str, list[Obj]] = {}

    def taint(key: str) -> None:
        for name in kube_cluster.nodes:
            node = kube_cluster.http("GET", f"/api/v1/nodes/{name}")
            before.setdefault(name, node["spec"].get("taints") or [])
            taints = [*before[name], {"key": key, "value": "present", "effect": "NoSchedule"}]
            kube_cluster.http("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": taints}}, MERGE)

    yield taint
    for name, taints in before.items():
        kube_cluster.http("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": taints}}, MERGE)


def scheduled_pod(cluster: KubeCluster, ns: str) -> Obj:
    def bound() -> Obj | None:
        found = [p for p in items(cluster, f"/api/v1/namespaces/{ns}/pods") if _is_ours(p)]
        return found[0] if found and found[0]["spec"].get("nodeName") else None

    return wait_for(bound, "the service's pod bound by the scheduler", cluster)


def _is_ours(pod: Obj) -> bool:
    return "inference.llmkube.dev/inferenceservice" in (pod["metadata"].get("labels") or {})


def untolerated(cluster: KubeCluster, ns: str, key: str) -> str:
    """A pod without tolerations: the scheduler's message once it gives up on it."""
    cluster.http(
        "POST",
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bare"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        },
    )

    def refused() -> str | None:
        pod = get(cluster, f"/api/v1/namespaces/{ns}/pods/bare") or {}
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                return str(c.get("message"))
        return None

    message = wait_for(refused, "the bare pod Unschedulable", cluster)
    assert "untolerated taint" in message, message
    for name in cluster.nodes:
        taints = cluster.http("GET", f"/api/v1/nodes/{name}")["spec"]["taints"]
        assert {"key": key, "value": "present", "effect": "NoSchedule"} in taints
    return message


def test_the_guides_dra_example_lands_on_tainted_gpu_nodes(
    kube_cluster: KubeCluster,
    chart_controller: ControllerProcess,
    namespace: str,
    taint_gpu_nodes: Callable[[str], None],
) -> None:
    taint_gpu_nodes("nvidia.com/gpu")
    untolerated(kube_cluster, namespace, "nvidia.com/gpu")
    apply_yaml(kube_cluster, (EXAMPLES / "multi-gpu.yaml").read_text(), namespace)
    pod = scheduled_pod(kube_cluster, namespace)
    assert pod["spec"]["nodeName"] in kube_cluster.nodes
    assert {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    } in pod["spec"]["tolerations"]
    assert [s["name"] for s in pod["status"].get("resourceClaimStatuses") or []] == ["gpus"]
    assert chart_controller.api_errors(namespace) == []


def test_toleration_key_names_the_taint_of_other_gpu_nodes(
    kube_cluster: KubeCluster,
    chart_controller: ControllerProcess,
    namespace: str,
    taint_gpu_nodes: Callable[[str], None],
) -> None:
    key = "example.com/accelerator"
    model_cache_volume(kube_cluster, namespace)  # its URL source is staged into the cache
    taint_gpu_nodes(key)
    untolerated(kube_cluster, namespace, key)
    text = (EXAMPLES / "single-gpu.yaml").read_text()
    assert "      vendor: nvidia\n" in text
    keyed = text.replace(
        "      vendor: nvidia\n", f"      vendor: nvidia\n      tolerationKey: {key}\n"
    )
    apply_yaml(kube_cluster, keyed, namespace)
    pod = scheduled_pod(kube_cluster, namespace)
    tolerations = pod["spec"]["tolerations"]
    assert [t["key"] for t in tolerations if t.get("value") == "present"] == [key], json.dumps(
        tolerations
    )
