"""The chart's controller on the real control plane, and the seed guide end to end.

The controller runs as a process with the chart's args under the chart ServiceAccount's
token (tests/conftest.py: chart_controller), so every request it makes is authorized by
the real RBAC authorizer against the chart's ClusterRole. Then the guide's multi-GPU
example goes the whole way: our Deployment -> the real ReplicaSet and Pod -> a
ResourceClaim made by the real resourceclaim controller -> devices allocated by the real
scheduler from the fake driver's ResourceSlices -> the pod bound, Running and Ready on a
kwok node -> our statuses (allocation, AcceleratorReady, tensor parallelism, GPUQuota).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from app.manifests import EXAMPLES
from devcluster import KubeCluster, kubeconfig
from objtypes import Obj
from tests.support import chart
from tests.support.cluster_objects import apply_yaml, get, items, model_cache_volume, wait_for
from tests.support.kube_cluster import ControllerProcess
from tests.support.paths import DATA
from tests.support.waiting import condition

# Starting the control plane and waiting on it take longer than the suite's 120 s default.
SAMPLES = DATA / "llmkube-samples"
pytestmark = pytest.mark.timeout(600)


def test_controller_under_the_chart_service_account_syncs_without_a_403(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, tmp_path: Any
) -> None:
    # Ready: every informer listed and watched what it needs with the chart's RBAC.
    assert chart_controller.ready()
    assert chart_controller.denied() == []
    # The token is the chart ServiceAccount's, not an admin's: the authorizer refuses it
    # what the ClusterRole does not grant.
    docs = chart.render({"webhook": {"enabled": False}})
    account = chart.find(docs, "ServiceAccount")["metadata"]["name"]
    token = kube_cluster.token(chart.NAMESPACE, account)
    path = kubeconfig(
        tmp_path / "sa", kube_cluster.url, kube_cluster.pki.ca, user="sa", token=token
    )
    review = sa_review(kube_cluster, path, "delete", "", "nodes")
    assert review["status"]["allowed"] is False
    review = sa_review(kube_cluster, path, "patch", "apps", "deployments")
    assert review["status"]["allowed"] is True


def sa_review(cluster: KubeCluster, config: Any, verb: str, group: str, resource: str) -> Obj:
    """A SelfSubjectAccessReview sent with the ServiceAccount's own token."""
    import json
    import ssl
    import urllib.request

    token = yaml.safe_load(config.read_text())["users"][0]["user"]["token"]
    req = urllib.request.Request(
        cluster.url + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        data=json.dumps(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {
                    "resourceAttributes": {"verb": verb, "group": group, "resource": resource}
                },
            }
        ).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    ctx = ssl.create_default_context(cafile=str(cluster.pki.ca))
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        result: Obj = json.loads(resp.read())
    return result


def test_seed_multi_gpu_example_is_allocated_by_the_real_scheduler(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    ns = namespace
    model_cache_volume(kube_cluster, ns)
    apply_yaml(
        kube_cluster,
        f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: GPUQuota
metadata: {{name: team}}
spec: {{gpuCount: 8, namespaceRef: {ns}}}
""",
        ns,
    )
    apply_yaml(kube_cluster, (EXAMPLES / "multi-gpu.yaml").read_text(), ns)
    base = f"/apis/apps/v1/namespaces/{ns}"

    dep = wait_for(
        lambda: get(kube_cluster, f"{base}/deployments/qwen3-32b"), "Deployment", kube_cluster
    )
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "2"

    def replica_set() -> Obj | None:
        found = items(kube_cluster, f"{base}/replicasets")
        return found[0] if found else None

    rs = wait_for(replica_set, "ReplicaSet (deployment controller)", kube_cluster)
    assert rs["metadata"]["ownerReferences"][0]["name"] == "qwen3-32b"

    def ready_pod() -> Obj | None:
        for pod in items(kube_cluster, f"/api/v1/namespaces/{ns}/pods"):
            if (
                pod["spec"].get("nodeName")
                and condition(pod, "Ready")
                and (condition(pod, "Ready") or {}).get("status") == "True"
            ):
                return pod
        return None

    pod = wait_for(ready_pod, "a pod bound and Ready (scheduler, kwok)", kube_cluster)
    assert pod["spec"]["nodeName"] in kube_cluster.nodes
    statuses = pod["status"]["resourceClaimStatuses"]
    assert [s["name"] for s in statuses] == ["gpus"]
    claim = get(
        kube_cluster,
        f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{statuses[0]['resourceClaimName']}",
    )
    assert claim is not None
    # Made from the template by the resourceclaim controller, owned by the pod.
    assert claim["metadata"]["ownerReferences"][0]["name"] == pod["metadata"]["name"]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2
    assert {r["driver"] for r in results} == {"gpu.nvidia.com"}
    assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
    assert claim["status"]["reservedFor"][0]["name"] == pod["metadata"]["name"]
    devices = sorted(r["device"] for r in results)

    isvc_path = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices/qwen3-32b"

    def allocated() -> Obj | None:
        isvc = get(kube_cluster, isvc_path) or {}
        status = isvc.get("status") or {}
        alloc = status.get("allocation") or {}
        ready = condition(isvc, "Ready")
        if alloc.get("summary") == "2/2" and ready and ready["status"] == "True":
            return isvc
        return None

    isvc = wait_for(allocated, "InferenceService Ready with 2/2 devices allocated", kube_cluster)
    status = isvc["status"]
    assert status["gpusPerReplica"] == 2
    assert status["readyReplicas"] == 1
    shown = status["allocation"]["pods"][0]
    assert shown["name"] == pod["metadata"]["name"]
    assert sorted(d["device"] for d in shown["devices"]) == devices
    # Joined with the fake driver's ResourceSlice: what the device is.
    assert {(d["productName"], d["memory"]) for d in shown["devices"]} == {
        ("NVIDIA H100 80GB HBM3", "80Gi")
    }

    model = get(
        kube_cluster, f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/models/qwen3-32b"
    )
    accel = condition(model, "AcceleratorReady")
    assert accel is not None and accel["status"] == "True", accel

    quota_path = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/gpuquotas/team"

    def charged() -> Obj | None:
        q = get(kube_cluster, quota_path) or {}
        rows = (q.get("status") or {}).get("services") or []
        return q if rows and rows[0].get("allocatedGPUs") == 2 else None

    quota = wait_for(charged, "GPUQuota charged from the allocation", kube_cluster)
    assert quota["status"]["usedGPUCount"] == 2
    assert chart_controller.denied() == []
    assert chart_controller.api_errors(ns) == []


def service(claim: str, count: int, replicas: int, ref: str) -> str:
    """A Model asking for `count` GPUs through `ref` (a resourceClaimTemplateName or a
    resourceClaimName entry) and its InferenceService."""
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: {claim}}}
spec:
  source: https://example.com/m.gguf
  format: gguf
  hardware:
    accelerator: cuda
    gpu:
      enabled: true
      vendor: nvidia
      count: {count}
      resourceClaims: [{{name: gpus, {ref}}}]
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: {claim}}}
spec: {{modelRef: {claim}, replicas: {replicas}}}
"""


def gpus(kind: str, name: str, count: int) -> str:
    spec = f"""
    devices:
      requests:
        - name: gpus
          exactly: {{deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: {count}}}
"""
    if kind == "ResourceClaimTemplate":
        spec = "\n".join("  " + line if line else line for line in spec.splitlines())
        spec = "\n  spec:" + spec
    return f"""
apiVersion: resource.k8s.io/v1
kind: {kind}
metadata: {{name: {name}}}
spec:{spec}
"""


def test_claims_no_node_can_satisfy_leave_the_pod_pending_and_say_why(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    # Five GPUs in one claim: every node publishes four.
    model_cache_volume(kube_cluster, namespace)
    apply_yaml(kube_cluster, gpus("ResourceClaimTemplate", "five-gpus", 5), namespace)
    apply_yaml(
        kube_cluster,
        service("big", 5, 1, "resourceClaimTemplateName: five-gpus"),
        namespace,
    )
    path = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/inferenceservices/big"

    def unschedulable() -> Obj | None:
        c = condition(get(kube_cluster, path), "Ready")
        return c if c and c["status"] == "False" and c["reason"] == "Unschedulable" else None

    c = wait_for(unschedulable, "Ready=False Unschedulable", kube_cluster)
    # The real scheduler's own words, passed on: its DRA plugin found no node.
    assert "cannot allocate all claims" in c["message"], c
    pods = items(kube_cluster, f"/api/v1/namespaces/{namespace}/pods")
    assert [p["status"]["phase"] for p in pods] == ["Pending"]
    assert not pods[0]["spec"].get("nodeName")


def test_a_shared_resource_claim_name_holds_one_allocation_for_every_pod(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    model_cache_volume(kube_cluster, namespace)
    apply_yaml(kube_cluster, gpus("ResourceClaim", "shared-gpu", 1), namespace)
    apply_yaml(kube_cluster, service("shared", 1, 2, "resourceClaimName: shared-gpu"), namespace)

    def both_ready() -> list[Obj] | None:
        pods = [
            p
            for p in items(kube_cluster, f"/api/v1/namespaces/{namespace}/pods")
            if (condition(p, "Ready") or {}).get("status") == "True"
        ]
        return pods if len(pods) == 2 else None

    pods = wait_for(both_ready, "two Ready pods sharing the claim", kube_cluster)
    # One allocation, on one node: the scheduler puts every pod of the claim there.
    assert len({p["spec"]["nodeName"] for p in pods}) == 1
    claim = get(
        kube_cluster, f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/shared-gpu"
    )
    assert claim is not None
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    assert {r["name"] for r in claim["status"]["reservedFor"]} == {
        p["metadata"]["name"] for p in pods
    }
    path = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/inferenceservices/shared"

    def advised() -> Obj | None:
        isvc = get(kube_cluster, path)
        c = condition(isvc, "ClaimsPerPod")
        alloc = ((isvc or {}).get("status") or {}).get("allocation") or {}
        return (
            isvc
            if c and c["reason"] == "SharedClaimAcrossReplicas" and alloc.get("allocatedPods") == 2
            else None
        )

    isvc = wait_for(
        advised, "ClaimsPerPod SharedClaimAcrossReplicas, 2 pods allocated", kube_cluster
    )
    devices = {d["device"] for pod in isvc["status"]["allocation"]["pods"] for d in pod["devices"]}
    assert len(devices) == 1
    assert chart_controller.denied() == []
    assert chart_controller.api_errors(namespace) == []


def test_every_sample_is_reconciled_with_no_api_error(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    """Every sample's objects written by the controller as the real apiserver validates
    them (pod specs, labels, quantities, server-side apply): no 400, 422 or 500."""
    model_cache_volume(kube_cluster, namespace)
    names: dict[str, set[str]] = {"models": set(), "inferenceservices": set()}
    for manifest in sorted(SAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(manifest.read_text()):
            if not doc or doc["kind"] == "HTTPScaledObject":  # KEDA's, not installed
                continue
            doc["metadata"]["namespace"] = namespace
            kube_cluster.apply(doc)
            plural = {"Model": "models", "InferenceService": "inferenceservices"}.get(doc["kind"])
            if plural:
                names[plural].add(doc["metadata"]["name"])
    base = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}"

    def reconciled() -> list[str] | None:
        errors = chart_controller.api_errors(namespace)
        if errors:
            return errors
        for plural, wanted in names.items():
            done = {
                o["metadata"]["name"]
                for o in items(kube_cluster, f"{base}/{plural}")
                if (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"]
            }
            if not wanted <= done:
                return None
        return ["reconciled"]

    assert wait_for(reconciled, "every sample reconciled once", kube_cluster) == ["reconciled"]
    assert chart_controller.denied() == []
