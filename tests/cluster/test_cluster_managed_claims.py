"""Claims made for the user on the real control plane: the kwok nodes advertise no
nvidia.com/gpu, the fake DRA driver publishes 80Gi H100s under DeviceClass
gpu.nvidia.com, and the real scheduler allocates the ResourceClaimTemplate the controller
(the chart's, under its ServiceAccount) made for a Model that names no claims.

The real apiserver compiles the template's CEL selector when it is created, and the
real scheduler evaluates it: a memory the devices have is allocated, a larger one is not.
The real garbage collector removes the template with its service.
"""

from __future__ import annotations

import pytest

from devcluster import KubeCluster
from objtypes import Obj
from tests.support.cluster_objects import apply_yaml, get, items, wait_for
from tests.support.kube_cluster import ControllerProcess

pytestmark = pytest.mark.timeout(600)
SERVICE_LABEL = "inference.llmkube.dev/inferenceservice"


def manifests(memory: str) -> str:
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: qwen}}
spec:
  source: Qwen/Qwen3-8B
  format: safetensors
  hardware:
    accelerator: cuda
    gpu: {{enabled: true, vendor: nvidia, count: 2, memory: {memory}}}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: chat}}
spec: {{modelRef: qwen, runtime: vllm}}
"""


def managed_template(cluster: KubeCluster, ns: str) -> str:
    def named() -> str | None:
        isvc = get(
            cluster, f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices/chat"
        )
        template = (((isvc or {}).get("status") or {}).get("managedClaims") or {}).get("template")
        return str(template) if template else None

    return wait_for(named, "status.managedClaims.template", cluster)


def service_pod(cluster: KubeCluster, ns: str, bound: bool) -> Obj:
    def found() -> Obj | None:
        pods = [
            p
            for p in items(cluster, f"/api/v1/namespaces/{ns}/pods")
            if (p["metadata"].get("labels") or {}).get(SERVICE_LABEL) == "chat"
        ]
        if not pods:
            return None
        pod = pods[0]
        if bound:
            return pod if pod["spec"].get("nodeName") else None
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                return pod
        return None

    return wait_for(found, "the service's pod " + ("bound" if bound else "unschedulable"), cluster)


def test_the_scheduler_allocates_the_template_made_for_a_model_without_claims(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    apply_yaml(kube_cluster, manifests("80Gi"), namespace)
    name = managed_template(kube_cluster, namespace)
    template = get(
        kube_cluster,
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates/{name}",
    )
    assert template is not None
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["count"] == 2 and exactly["deviceClassName"] == "gpu.nvidia.com"
    assert [s["cel"]["expression"] for s in exactly["selectors"]] == [
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'
    ]

    pod = service_pod(kube_cluster, namespace, bound=True)
    assert pod["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": name}]
    container = pod["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in (container["resources"].get("limits") or {})
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = get(
        kube_cluster,
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{status['resourceClaimName']}",
    )
    assert claim is not None
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2 and {r["driver"] for r in results} == {"gpu.nvidia.com"}

    def allocated() -> Obj | None:
        isvc = get(
            kube_cluster,
            f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/inferenceservices/chat",
        )
        found: Obj | None = ((isvc or {}).get("status") or {}).get("allocation")
        return found if found and found.get("summary") == "2/2" else None

    wait_for(allocated, "status.allocation 2/2", kube_cluster)
    assert chart_controller.api_errors(namespace) == []

    # The real garbage collector removes the template with the service that owns it.
    kube_cluster.http(
        "DELETE",
        f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/inferenceservices/chat",
    )
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates/{name}"
    wait_for(
        lambda: get(kube_cluster, path) is None or None, "the template collected", kube_cluster
    )


def test_a_memory_no_published_device_has_is_never_allocated(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    apply_yaml(kube_cluster, manifests("96Gi"), namespace)
    name = managed_template(kube_cluster, namespace)
    pod = service_pod(kube_cluster, namespace, bound=False)
    assert pod["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": name}]
    assert not pod["spec"].get("nodeName")
    assert chart_controller.api_errors(namespace) == []
