"""DRA on a real node: the example driver's kubelet plugin prepares what the scheduler
allocated, containerd hands the devices to the container through CDI, and unprepares when
the pod goes.

vLLM cannot run without a GPU here: its pods run the stand-in image under vLLM's image
name (devcluster/images: it records the argv, environment, mounts and credentials the
kubelet gave it and answers /health on the pod's port). What is checked is the pod, not
vLLM; the argv is checked against vLLM's own parser in the unit tier.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.manifests import EXAMPLES
from devcluster.node import NodeCluster, RealNode
from objtypes import Obj
from reconcilers.inferenceservice.workload import CONTAINER
from tests.support.cluster_objects import apply_yaml, get, items, wait_for
from tests.support.helm import PodController
from tests.support.node import (
    container_process,
    custom,
    http_json,
    local_cache_volume,
    restricted_namespace,
    wait_ready_pods,
)
from tests.support.waiting import condition

pytestmark = pytest.mark.timeout(900)


def cdi_devices(env: dict[str, str]) -> set[str]:
    """The devices the example driver's CDI spec put in a container's environment."""
    return {v for k, v in env.items() if k.startswith("GPU_DEVICE_") and k.count("_") == 2}


def standin(pod: Obj, port: int) -> dict[str, Any]:
    status, seen = http_json(f"http://{pod['status']['podIP']}:{port}/standin")
    assert status == 200, seen
    assert isinstance(seen, dict)
    return seen


def claim_specs(node: RealNode) -> list[str]:
    """The CDI spec files the plugin has written (one per prepared claim)."""
    return sorted(p.name for p in node.cdi_dir.glob("*") if p.is_file())


def test_two_devices_prepared_for_one_vllm_pod_and_freed_with_the_service(
    node_cluster: NodeCluster, node_controller: PodController
) -> None:
    cluster, node = node_cluster.cluster, node_cluster.node
    with restricted_namespace(cluster, "multi") as ns:
        local_cache_volume(node, ns)
        apply_yaml(cluster, (EXAMPLES / "multi-gpu.yaml").read_text(), ns)
        (pod,) = wait_ready_pods(cluster, ns, 1)
        inference = next(c for c in pod["spec"]["containers"] if c["name"] == CONTAINER)
        port = inference["ports"][0]["containerPort"]
        # The kubelet's probes pass on the port the runtime listens on.
        assert inference["readinessProbe"]["httpGet"]["port"] in (port, "http")
        seen = standin(pod, port)
        argv = seen["argv"]
        assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
        assert argv[argv.index("--port") + 1] == str(port)
        assert seen["uid"] != 0

        (claim_status,) = pod["status"]["resourceClaimStatuses"]
        claim = get(
            cluster,
            f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/"
            f"{claim_status['resourceClaimName']}",
        )
        assert claim is not None
        allocated = {r["device"] for r in claim["status"]["allocation"]["devices"]["results"]}
        assert len(allocated) == 2
        assert cdi_devices(seen["env"]) == allocated, seen["env"]
        assert cdi_devices(container_process(node, pod, CONTAINER)["env"]) == allocated
        uid = claim["metadata"]["uid"]
        assert any(uid in name for name in claim_specs(node)), claim_specs(node)

        # Deleting the service: the pod goes, its claim with it, the plugin unprepares.
        cluster.http(
            "DELETE",
            f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices/qwen3-32b",
        )

        def freed() -> bool:
            gone = not items(cluster, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")
            return gone and not any(uid in name for name in claim_specs(node))

        wait_for(freed, "the claim deleted and unprepared", cluster)


SHARED = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu}
spec:
  devices:
    requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 1}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: shared}
spec:
  source: Qwen/Qwen3-0.6B
  format: safetensors
  hardware:
    accelerator: cuda
    gpu:
      enabled: true
      vendor: nvidia
      count: 1
      resourceClaims: [{name: gpus, resourceClaimName: shared-gpu}]
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: shared}
spec: {modelRef: shared, runtime: vllm, replicas: 2}
"""


def test_a_shared_claim_gives_both_pods_the_same_device(
    node_cluster: NodeCluster, node_controller: PodController
) -> None:
    cluster, node = node_cluster.cluster, node_cluster.node
    with restricted_namespace(cluster, "shared") as ns:
        local_cache_volume(node, ns)
        apply_yaml(cluster, SHARED, ns)
        pods = wait_ready_pods(cluster, ns, 2)
        claim = get(cluster, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/shared-gpu")
        assert claim is not None
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        for pod in pods:
            env = container_process(node, pod, CONTAINER)["env"]
            assert cdi_devices(env) == {result["device"]}, env


def too_many(count: int) -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: many-gpus}}
spec:
  spec:
    devices:
      requests:
        - name: gpus
          exactly: {{deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: {count}}}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: big}}
spec:
  source: Qwen/Qwen3-32B
  format: safetensors
  hardware:
    accelerator: cuda
    gpu:
      enabled: true
      vendor: nvidia
      count: {count}
      resourceClaims: [{{name: gpus, resourceClaimTemplateName: many-gpus}}]
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: big}}
spec: {{modelRef: big, runtime: vllm}}
"""


def test_more_devices_than_the_node_publishes_stay_pending_and_say_why(
    node_cluster: NodeCluster, node_controller: PodController
) -> None:
    cluster, node = node_cluster.cluster, node_cluster.node
    with restricted_namespace(cluster, "big") as ns:
        local_cache_volume(node, ns)
        apply_yaml(cluster, too_many(node.devices * 2), ns)

        def unschedulable() -> Obj | None:
            c = condition(custom(cluster, ns, "inferenceservices", "big"), "Ready")
            return c if c and c["status"] == "False" and c["reason"] == "Unschedulable" else None

        c = wait_for(unschedulable, "Ready=False Unschedulable", cluster)
        assert "cannot allocate all claims" in c["message"], c
        (pod,) = items(cluster, f"/api/v1/namespaces/{ns}/pods")
        assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
        assert node_controller.api_errors(ns) == []
