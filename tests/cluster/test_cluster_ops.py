"""What users and the cluster do to our objects, on the real control plane.

`kubectl scale` through our scale subresource, an HPA driving it, `kubectl rollout
restart` (another field manager's annotation on our Deployment's pod template, which our
server-side applies must keep), `kubectl edit` of a field we own (put back) and of one we
do not (kept), the apiserver restarted with etcd kept, and leader election between two
controller processes on the real Lease API.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import KubeCluster
from objtypes import Obj
from reconcilers.writes.apply import FIELD_MANAGER
from tests.support import chart
from tests.support.cluster_objects import (
    SMALL_MODEL,
    apply_yaml,
    get,
    items,
    model_cache_volume,
    wait_for,
)
from tests.support.kube_cluster import (
    CLUSTER_CHART_VALUES,
    ControllerProcess,
    install_chart,
    start_controller,
)
from tests.support.waiting import condition

SERVICE = (
    SMALL_MODEL
    + """---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: small}
spec: {modelRef: small, replicas: 1}
"""
)

HPA = """
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: small}
spec:
  scaleTargetRef: {apiVersion: inference.llmkube.dev/v1alpha1, kind: InferenceService, name: small}
  minReplicas: 2
  maxReplicas: 3
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
"""

# kubectl edit's editor: changes the image (a field we own) and adds a label (one we don't).
EDITOR = """
import sys, yaml
path = sys.argv[-1]
doc = yaml.safe_load(open(path))
doc["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/edited:1"
doc["metadata"].setdefault("labels", {})["team"] = "edited"
open(path, "w").write(yaml.safe_dump(doc))
"""

# Starting the control plane and waiting on it take longer than the suite's 120 s default.
pytestmark = pytest.mark.timeout(600)


def kubectl(cluster: KubeCluster, *args: str) -> str:
    run = subprocess.run(
        ["kubectl", f"--kubeconfig={cluster.admin_kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def ready_pods(cluster: KubeCluster, ns: str) -> list[Obj]:
    return [
        p
        for p in items(cluster, f"/api/v1/namespaces/{ns}/pods")
        if p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and (condition(p, "Ready") or {}).get("status") == "True"
    ]


def isvc_path(ns: str, name: str = "small") -> str:
    return f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices/{name}"


def deploy(cluster: KubeCluster, ns: str) -> None:
    model_cache_volume(cluster, ns)
    apply_yaml(cluster, SERVICE, ns)
    wait_for(lambda: len(ready_pods(cluster, ns)) == 1 or None, "one Ready pod", cluster)


needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl")


@needs_kubectl
def test_kubectl_scale_isvc_goes_through_to_allocated_pods(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    deploy(kube_cluster, namespace)
    kubectl(kube_cluster, "-n", namespace, "scale", "inferenceservice/small", "--replicas=3")
    pods = wait_for(
        lambda: (lambda p: p if len(p) == 3 else None)(ready_pods(kube_cluster, namespace)),
        "three Ready pods",
        kube_cluster,
    )
    claims = {s["resourceClaimName"] for p in pods for s in p["status"]["resourceClaimStatuses"]}
    assert len(claims) == 3  # one claim per pod, from the template

    def scaled() -> Obj | None:
        isvc = get(kube_cluster, isvc_path(namespace)) or {}
        status = isvc.get("status") or {}
        alloc = status.get("allocation") or {}
        return isvc if status.get("replicas") == 3 and alloc.get("summary") == "3/3" else None

    isvc = wait_for(scaled, "status.replicas 3 and 3/3 devices", kube_cluster)
    scale = kube_cluster.http("GET", isvc_path(namespace) + "/scale")
    assert scale["spec"]["replicas"] == 3 and scale["status"]["replicas"] == 3
    assert isvc["spec"]["replicas"] == 3


def test_an_hpa_drives_the_inferenceservice_through_its_scale_subresource(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    """The real HPA controller reads /scale and writes spec.replicas there; below
    minReplicas it scales up without metrics (this cluster has no metrics server)."""
    deploy(kube_cluster, namespace)
    apply_yaml(kube_cluster, HPA, namespace)

    def scaled_to_two() -> Obj | None:
        isvc = get(kube_cluster, isvc_path(namespace)) or {}
        status = isvc.get("status") or {}
        done = isvc["spec"].get("replicas") == 2 and status.get("replicas") == 2
        return isvc if done and len(ready_pods(kube_cluster, namespace)) == 2 else None

    isvc = wait_for(scaled_to_two, "minReplicas through /scale, 2 Ready pods", kube_cluster)
    managers = {f["manager"] for f in isvc["metadata"]["managedFields"]}
    assert "kube-controller-manager" in managers, managers
    hpa_path = f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/small"

    def rescaled() -> Obj | None:
        hpa = get(kube_cluster, hpa_path) or {}
        able = (condition(hpa, "AbleToScale") or {}).get("status") == "True"
        return hpa if able and (hpa.get("status") or {}).get("currentReplicas") == 2 else None

    hpa = wait_for(rescaled, "the HPA reading 2 replicas from /scale", kube_cluster)
    assert hpa["status"]["desiredReplicas"] == 2


@needs_kubectl
def test_kubectl_edit_of_a_field_we_own_is_put_back_and_of_one_we_do_not_is_kept(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str, tmp_path: Path
) -> None:
    deploy(kube_cluster, namespace)
    dep_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/small"
    ours = (get(kube_cluster, dep_path) or {})["spec"]["template"]["spec"]["containers"][0]
    # The editor kubectl runs: a script changing the file it is handed, as a user would.
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    config = f"--kubeconfig={kube_cluster.admin_kubeconfig}"
    run = subprocess.run(
        ["kubectl", config, "-n", namespace, "edit", "deployment/small"],
        env={**os.environ, "KUBE_EDITOR": f"{sys.executable} {editor}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "edited" in run.stdout, run.stdout + run.stderr

    def put_back() -> Obj | None:
        dep = get(kube_cluster, dep_path) or {}
        image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
        return dep if image == ours["image"] else None

    dep = wait_for(put_back, f"our image {ours['image']} applied again", kube_cluster)
    assert dep["metadata"]["labels"]["team"] == "edited"  # not ours: kept
    owners = [
        f["manager"] for f in dep["metadata"]["managedFields"] if '"f:image"' in json.dumps(f)
    ]
    assert owners == [FIELD_MANAGER], owners
    assert not chart_controller.api_errors(namespace)


@needs_kubectl
def test_rollout_restart_annotation_survives_our_server_side_apply(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    deploy(kube_cluster, namespace)
    kubectl(kube_cluster, "-n", namespace, "rollout", "restart", "deployment/small")
    dep_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/small"
    key = "kubectl.kubernetes.io/restartedAt"
    # Our next apply (a change to the service makes one) must keep kubectl's annotation.
    kube_cluster.apply(
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "metadata": {"name": "small", "namespace": namespace},
            "spec": {"modelRef": "small", "replicas": 1, "env": [{"name": "X", "value": "1"}]},
        }
    )

    def applied() -> Obj | None:
        dep = get(kube_cluster, dep_path) or {}
        env = dep["spec"]["template"]["spec"]["containers"][0].get("env") or []
        return dep if any(e.get("name") == "X" for e in env) else None

    dep = wait_for(applied, "our apply of the new env", kube_cluster)
    assert key in dep["spec"]["template"]["metadata"]["annotations"], dep["spec"]["template"]
    managers = {m["manager"] for m in dep["metadata"]["managedFields"]}
    assert {"llmkube-controller", "kubectl-rollout"} <= managers, managers
    wait_for(
        lambda: len(ready_pods(kube_cluster, namespace)) == 1 or None,
        "the restarted rollout Ready",
        kube_cluster,
    )


def test_apiserver_restart_with_etcd_kept_loses_nothing(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    deploy(kube_cluster, namespace)
    before = get(kube_cluster, isvc_path(namespace))
    assert before is not None
    kube_cluster.restart_apiserver()
    after = get(kube_cluster, isvc_path(namespace))
    assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
    # The controller's watches come back: a service made after the restart is served.
    apply_yaml(
        kube_cluster,
        SERVICE.replace("name: small}\nspec: {modelRef", "name: after}\nspec: {modelRef"),
        namespace,
    )
    wait_for(
        lambda: get(kube_cluster, f"/apis/apps/v1/namespaces/{namespace}/deployments/after"),
        "a Deployment for the service made after the restart",
        kube_cluster,
    )
    wait_for(lambda: chart_controller.ready() or None, "the controller ready again", kube_cluster)
    # Until its RBAC informers synced, the new apiserver refused the controller's requests
    # (403, retried): expected here, so later tests do not count them.
    chart_controller.forget_errors()


def test_two_controllers_elect_one_leader_on_the_real_lease_api(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, tmp_path: Path
) -> None:
    # `helm upgrade --set replicas=2`: leader election on, and the Role for its Lease; the
    # rest as the tier installed it (the ClusterRole is the session controller's too).
    docs = chart.render({**CLUSTER_CHART_VALUES, "replicas": 2})
    install_chart(kube_cluster, docs, chart.NAMESPACE)
    account = chart.find(docs, "ServiceAccount")["metadata"]["name"]
    args = chart.controller_args(docs)
    assert "--leader-elect" in args
    lease = "/apis/coordination.k8s.io/v1/namespaces/llmkube-system/leases/llmkube-controller"
    config = kube_cluster.kubeconfig_for(chart.NAMESPACE, account, tmp_path / "kubeconfig")
    a = start_controller(kube_cluster, args, config, "replica-a")
    b = start_controller(kube_cluster, args, config, "replica-b")
    try:

        def holder() -> str | None:
            found = get(kube_cluster, lease)
            who = ((found or {}).get("spec") or {}).get("holderIdentity")
            return who if who in ("replica-a", "replica-b") else None

        first = wait_for(holder, "a leader among replica-a and replica-b", kube_cluster)
        leader, standby = (a, b) if first == "replica-a" else (b, a)
        leader.component.stop()  # released on SIGTERM, or expires
        second = wait_for(
            lambda: (lambda h: h if h and h != first else None)(holder()),
            "the standby taking the lease",
            kube_cluster,
        )
        assert second == standby.component.name
        assert standby.denied() == [] and leader.denied() == []
    finally:
        a.component.stop()
        b.component.stop()


def test_a_restarted_controller_continues_the_event_it_wrote_before(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    """After a restart the controller no longer knows which Events it wrote: one recorded
    again (the same object, reason and message) answers 409 to its create, and the
    controller reads that Event to continue its count, under the chart's RBAC."""
    apply_yaml(kube_cluster, ORPHAN, namespace)

    def event() -> Obj | None:
        for e in items(kube_cluster, f"/api/v1/namespaces/{namespace}/events"):
            if e["involvedObject"].get("name") == "orphan" and (
                e["reason"] == "ResourceClaimTemplateNotFound"
            ):
                return e
        return None

    first = wait_for(event, "the Event of the missing template", kube_cluster)
    assert first["count"] == 1
    chart_controller.component.stop()
    chart_controller.component.start()
    wait_for(lambda: chart_controller.ready() or None, "the restarted controller", kube_cluster)
    model = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/models/orphan"

    def accelerator(status: str) -> Obj | None:
        c = condition(get(kube_cluster, model), "AcceleratorReady")
        return c if c and c["status"] == status else None

    # The template appears, then goes again: the same Event as before the restart.
    apply_yaml(kube_cluster, TEMPLATE, namespace)
    wait_for(lambda: accelerator("True"), "AcceleratorReady True", kube_cluster)
    kube_cluster.http(
        "DELETE", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates/missing"
    )
    wait_for(lambda: accelerator("False"), "AcceleratorReady False again", kube_cluster)
    again = wait_for(
        lambda: (lambda e: e if e and e["count"] == 2 else None)(event()),
        "the Event's count continued after the restart",
        kube_cluster,
    )
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert chart_controller.denied() == []


ORPHAN = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: orphan}
spec:
  source: https://example.com/m.gguf
  format: gguf
  hardware:
    accelerator: cuda
    gpu:
      enabled: true
      vendor: nvidia
      count: 1
      resourceClaims: [{name: gpu, resourceClaimTemplateName: missing}]
"""
TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: missing}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 1}
"""


def metric_values(text: str, name: str) -> list[float]:
    return [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    ]


def test_a_restarted_controller_writes_nothing_that_is_already_right(
    kube_cluster: KubeCluster, chart_controller: ControllerProcess, namespace: str
) -> None:
    deploy(kube_cluster, namespace)
    paths = {
        "isvc": isvc_path(namespace),
        "model": f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/models/small",
        "deployment": f"/apis/apps/v1/namespaces/{namespace}/deployments/small",
        "service": f"/api/v1/namespaces/{namespace}/services/small",
    }

    def settled() -> dict[str, str] | None:
        isvc = get(kube_cluster, paths["isvc"]) or {}
        alloc = (isvc.get("status") or {}).get("allocation") or {}
        if (
            alloc.get("summary") != "1/1"
            or (condition(isvc, "Ready") or {}).get("status") != "True"
        ):
            return None
        return {
            k: (get(kube_cluster, p) or {})["metadata"]["resourceVersion"] for k, p in paths.items()
        }

    before = wait_for(settled, "the service Ready with its device allocated", kube_cluster)
    chart_controller.component.stop()
    chart_controller.component.start()

    def idle() -> str | None:
        if not chart_controller.ready():
            return None
        text = chart_controller.metrics()
        reconciled = metric_values(text, "controller_runtime_reconcile_total")
        busy = metric_values(text, "workqueue_depth") + metric_values(
            text, "controller_runtime_active_workers"
        )
        return text if sum(reconciled) > 0 and not any(busy) else None

    # Ready, every queue empty and no reconcile running: it has looked at everything.
    wait_for(idle, "the restarted controller idle after its first reconciles", kube_cluster)
    after = {
        k: (get(kube_cluster, p) or {})["metadata"]["resourceVersion"] for k, p in paths.items()
    }
    assert after == before
