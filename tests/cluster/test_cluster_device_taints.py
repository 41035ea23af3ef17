"""Device taints (KEP-5055) on the real control plane: the fake DRA driver (a stand-in
for nvidia-dra-driver-gpu) publishes one 80Gi H100 on one kwok node and taints it in its
ResourceSlice; the real scheduler keeps pods whose claims do not tolerate a NoSchedule
taint off it, and the real device-taint-eviction-controller of kube-controller-manager
deletes a running pod when the device gets a NoExecute taint. On 1.34 the control plane
is started with the DRADeviceTaints gate on (alpha there); from 1.36 it is on by default
and nothing is given (`K8S_VERSION=1.37.2` runs the same tests).

The service's WorkloadReady and the Model's AcceleratorReady name the device
(`driver/pool/device`) and the taint (`key=value:Effect`); an eviction is said in the
DeviceTaintEviction condition, beside Ready's message and in a Warning Event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from devcluster import KubeCluster
from objtypes import Obj
from tests.support.cluster_objects import apply_yaml, get, items, wait_for
from tests.support.kube_cluster import ControllerProcess, run_chart_controller

pytestmark = pytest.mark.timeout(900)
SERVICE_LABEL = "inference.llmkube.dev/inferenceservice"
DEVICE = "gpu.nvidia.com/kwok-node-0/gpu-0"
API = "/apis/inference.llmkube.dev/v1alpha1/namespaces"


def taint(effect: str) -> dict[str, list[dict[str, str]]]:
    return {"kwok-node-0/gpu-0": [{"key": "example.com/ecc", "value": "failed", "effect": effect}]}


@pytest.fixture(scope="module")
def taints_controller(
    taints_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    proc = run_chart_controller(taints_cluster, tmp_path_factory.mktemp("sa-taints"))
    yield proc
    proc.component.stop()


@pytest.fixture
def ns(taints_cluster: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own; the one device untainted and free afterwards."""
    name = taints_cluster.new_namespace(request.node.name)
    yield name
    taints_cluster.taint_devices({})
    taints_cluster.delete_namespace(name)
    wait_for(
        lambda: not items(taints_cluster, "/apis/resource.k8s.io/v1/resourceclaims") or None,
        "no ResourceClaim left",
        taints_cluster,
    )


def published_taints(cluster: KubeCluster) -> list[Obj]:
    (s,) = items(cluster, "/apis/resource.k8s.io/v1/resourceslices")
    found: list[Obj] = s["spec"]["devices"][0].get("taints") or []
    return found


def tainted(cluster: KubeCluster, effect: str) -> None:
    """Taint the device and wait until the apiserver keeps the taint (the gate is on)."""
    cluster.taint_devices(taint(effect))
    wait_for(
        lambda: [t for t in published_taints(cluster) if t.get("effect") == effect] or None,
        f"the slice's {effect} taint",
        cluster,
    )


def model(claims: bool, tolerations: str = "") -> str:
    gpu = (
        "{enabled: true, resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]}"
        if claims
        else "{enabled: true, vendor: nvidia, count: 1}"
    )
    text = f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: qwen}}
spec:
  source: Qwen/Qwen3-8B
  format: safetensors
  hardware: {{accelerator: cuda, gpu: {gpu}}}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: chat}}
spec: {{modelRef: qwen, runtime: vllm}}
"""
    if claims:
        text += """
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com%s}}]
""" % (f", tolerations: {tolerations}" if tolerations else "")
    return text


def condition(cluster: KubeCluster, path: str, kind: str, has: str) -> Obj:
    def found() -> Obj | None:
        status = (get(cluster, path) or {}).get("status") or {}
        for c in status.get("conditions") or []:
            if c.get("type") == kind and has in str(c.get("message")):
                return dict(c)
        # What the status says instead, for the message of a timeout.
        raise AssertionError(json.dumps(status, sort_keys=True))

    return wait_for(found, f"{kind} saying {has!r} on {path}", cluster)


def service_pods(cluster: KubeCluster, ns: str) -> list[Obj]:
    return [
        p
        for p in items(cluster, f"/api/v1/namespaces/{ns}/pods")
        if (p["metadata"].get("labels") or {}).get(SERVICE_LABEL) == "chat"
    ]


def running_pod(cluster: KubeCluster, ns: str) -> str:
    def found() -> str | None:
        for p in service_pods(cluster, ns):
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
            if ready and not p["metadata"].get("deletionTimestamp"):
                return str(p["metadata"]["name"])
        return None

    return wait_for(found, "the service's pod Ready", cluster)


def allocated_once(cluster: KubeCluster, ns: str) -> None:
    """Until the service's status.allocation shows its pod's device (1/1)."""
    wait_for(
        lambda: (
            ((get(cluster, f"{API}/{ns}/inferenceservices/chat") or {}).get("status") or {})
            .get("allocation", {})
            .get("summary")
            == "1/1"
            or None
        ),
        "status.allocation 1/1",
        cluster,
    )


def pending_pod(cluster: KubeCluster, ns: str) -> Obj:
    def found() -> Obj | None:
        for p in service_pods(cluster, ns):
            for c in (p.get("status") or {}).get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                    return p
        return None

    return wait_for(found, "the service's pod Unschedulable", cluster)


@pytest.mark.parametrize("claims", [False, True], ids=["managed-claim", "user-claim"])
def test_a_no_schedule_taint_keeps_the_pod_pending_and_the_status_names_device_and_taint(
    taints_cluster: KubeCluster, taints_controller: ControllerProcess, ns: str, claims: bool
) -> None:
    tainted(taints_cluster, "NoSchedule")
    apply_yaml(taints_cluster, model(claims), ns)
    pending_pod(taints_cluster, ns)
    named = f"{DEVICE} (example.com/ecc=failed:NoSchedule)"
    workload = condition(
        taints_cluster, f"{API}/{ns}/inferenceservices/chat", "WorkloadReady", named
    )
    assert workload["status"] == "False" and workload["reason"] == "Unschedulable", workload
    assert "1 of 1 matching device(s) are tainted" in workload["message"], workload
    accelerator = condition(taints_cluster, f"{API}/{ns}/models/qwen", "AcceleratorReady", named)
    assert accelerator["status"] == "False", accelerator

    # The taint was what kept it off: lifted, the scheduler allocates the device.
    taints_cluster.taint_devices({})
    running_pod(taints_cluster, ns)
    assert taints_controller.api_errors(ns) == []


def test_a_no_execute_taint_evicts_the_running_pod_and_the_status_says_so(
    taints_cluster: KubeCluster, taints_controller: ControllerProcess, ns: str
) -> None:
    apply_yaml(taints_cluster, model(False), ns)
    first = running_pod(taints_cluster, ns)
    allocated_once(taints_cluster, ns)
    tainted(taints_cluster, "NoExecute")

    said = f"pod {first} evicted: device {DEVICE} has taint example.com/ecc=failed:NoExecute"
    path = f"{API}/{ns}/inferenceservices/chat"
    eviction = condition(taints_cluster, path, "DeviceTaintEviction", said)
    assert eviction["status"] == "True" and eviction["reason"] == "EvictedByDeviceTaint"
    ready = condition(taints_cluster, path, "Ready", said)
    assert ready["status"] == "False", ready
    wait_for(
        lambda: (
            all(p["metadata"]["name"] != first for p in service_pods(taints_cluster, ns)) or None
        ),
        f"pod {first} deleted",
        taints_cluster,
    )

    def warned() -> Obj | None:
        for e in items(taints_cluster, f"/api/v1/namespaces/{ns}/events"):
            if e.get("reason") == "PodEvictedByDeviceTaint" and said in str(e.get("message")):
                return e
        return None

    event = wait_for(warned, "the Warning Event", taints_cluster)
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "chat"
    # The replacement stays off the tainted device, and the status keeps the reason.
    pending_pod(taints_cluster, ns)
    condition(taints_cluster, path, "DeviceTaintEviction", said)
    condition(taints_cluster, path, "WorkloadReady", "example.com/ecc=failed:NoExecute")
    assert taints_controller.api_errors(ns) == []


def test_a_tolerated_taint_is_allocated_and_not_named(
    taints_cluster: KubeCluster, taints_controller: ControllerProcess, ns: str
) -> None:
    tainted(taints_cluster, "NoSchedule")
    apply_yaml(taints_cluster, model(True, "[{key: example.com/ecc, operator: Exists}]"), ns)
    running_pod(taints_cluster, ns)
    path = f"{API}/{ns}/models/qwen"
    accelerator = condition(taints_cluster, path, "AcceleratorReady", "")
    assert "example.com/ecc" not in accelerator["message"], accelerator
    workload = condition(
        taints_cluster, f"{API}/{ns}/inferenceservices/chat", "WorkloadReady", "1/1 replicas ready"
    )
    assert workload["status"] == "True", workload


def rule_api(cluster: KubeCluster) -> str:
    """Where DeviceTaintRules are served: resource.k8s.io/v1 from 1.37, v1alpha3 before
    (the taints cluster turns that version on)."""
    version = "v1" if cluster.version >= (1, 37) else "v1alpha3"
    return f"/apis/resource.k8s.io/{version}/devicetaintrules"


@pytest.fixture
def taint_rule(taints_cluster: KubeCluster) -> Iterator[list[str]]:
    """DeviceTaintRules the test makes, by name; deleted afterwards."""
    made: list[str] = []
    yield made
    for name in made:
        taints_cluster.http("DELETE", f"{rule_api(taints_cluster)}/{name}")


def rule_on_the_device(cluster: KubeCluster, made: list[str], effect: str) -> None:
    name = f"ecc-{effect.lower()}"
    body: Obj = {
        "apiVersion": rule_api(cluster).split("/apis/", 1)[1].rsplit("/", 1)[0],
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {
                "driver": "gpu.nvidia.com",
                "pool": "kwok-node-0",
                "device": "gpu-0",
            },
            "taint": {"key": "example.com/ecc", "value": "failed", "effect": effect},
        },
    }
    cluster.http("POST", rule_api(cluster), body)
    made.append(name)


def test_a_device_taint_rules_no_schedule_is_named_on_the_pending_service(
    taints_cluster: KubeCluster,
    taints_controller: ControllerProcess,
    ns: str,
    taint_rule: list[str],
) -> None:
    """The admin's DeviceTaintRule, not the driver's slice, taints the device."""
    rule_on_the_device(taints_cluster, taint_rule, "NoSchedule")
    apply_yaml(taints_cluster, model(False), ns)
    pending_pod(taints_cluster, ns)
    named = f"{DEVICE} (example.com/ecc=failed:NoSchedule)"
    path = f"{API}/{ns}/inferenceservices/chat"
    workload = condition(taints_cluster, path, "WorkloadReady", named)
    assert workload["status"] == "False" and workload["reason"] == "Unschedulable", workload
    assert published_taints(taints_cluster) == []  # the slice carries none
    assert taints_controller.api_errors(ns) == []


def test_a_device_taint_rules_no_execute_eviction_is_said(
    taints_cluster: KubeCluster,
    taints_controller: ControllerProcess,
    ns: str,
    taint_rule: list[str],
) -> None:
    apply_yaml(taints_cluster, model(False), ns)
    first = running_pod(taints_cluster, ns)
    allocated_once(taints_cluster, ns)
    rule_on_the_device(taints_cluster, taint_rule, "NoExecute")
    said = f"pod {first} evicted: device {DEVICE} has taint example.com/ecc=failed:NoExecute"
    path = f"{API}/{ns}/inferenceservices/chat"
    eviction = condition(taints_cluster, path, "DeviceTaintEviction", said)
    assert eviction["status"] == "True", eviction
    assert taints_controller.api_errors(ns) == []
