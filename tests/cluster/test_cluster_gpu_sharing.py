"""GPUs shared through DRA on the real control plane: the fake DRA driver (a stand-in for
nvidia-dra-driver-gpu, `--sharing`) publishes on one kwok node `gpu-1`, an 80Gi H100 that
allows multiple allocations (KEP-5075 consumable capacity), and `gpu-0`, published whole
and as MIG partitions (KEP-4815: 1g.10gb x 7, 3g.40gb x 2, drawing on the GPU's 7 compute
and 8 memory slices). The real scheduler allocates the claims the controller makes from
`gpuSharing`: `shared` with memoryLimitGiB asks for that much of a shareable device's
memory, `partitioned` with a profile for partitions of class mig.nvidia.com. On 1.34 the
DRAConsumableCapacity and DRAPartitionableDevices gates are turned on (alpha there); from
1.36 they are on by default (`K8S_VERSION=1.37.2` runs the same tests).
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
API = "/apis/inference.llmkube.dev/v1alpha1/namespaces"
SERVICE_LABEL = "inference.llmkube.dev/inferenceservice"
SHAREABLE = "gpu.nvidia.com/kwok-node-0/gpu-1"


@pytest.fixture(scope="module")
def sharing_controller(
    sharing_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    proc = run_chart_controller(sharing_cluster, tmp_path_factory.mktemp("sa-sharing"))
    yield proc
    proc.component.stop()


@pytest.fixture
def ns(sharing_cluster: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own; every device free again afterwards."""
    name = sharing_cluster.new_namespace(request.node.name)
    yield name
    sharing_cluster.delete_namespace(name)
    wait_for(
        lambda: not items(sharing_cluster, "/apis/resource.k8s.io/v1/resourceclaims") or None,
        "no ResourceClaim left",
        sharing_cluster,
    )


MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: qwen}
spec:
  source: Qwen/Qwen3-8B
  format: safetensors
  hardware: {accelerator: cuda, gpu: {enabled: true, vendor: nvidia, count: 1}}
"""


def service(name: str, sharing: str, replicas: int = 1) -> str:
    return f"""
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: {name}}}
spec:
  modelRef: qwen
  runtime: vllm
  replicas: {replicas}
  resources: {{gpuSharing: {sharing}}}
"""


def status(cluster: KubeCluster, ns: str, name: str) -> Obj:
    found: Obj = (get(cluster, f"{API}/{ns}/inferenceservices/{name}") or {}).get("status") or {}
    return found


def allocated(cluster: KubeCluster, ns: str, name: str, summary: str) -> Obj:
    """The service's status once its allocation reads `summary` (e.g. "1/1")."""

    def found() -> Obj | None:
        now = status(cluster, ns, name)
        if (now.get("allocation") or {}).get("summary") == summary:
            return now
        raise AssertionError(json.dumps(now, sort_keys=True))

    return wait_for(found, f"{name}'s allocation {summary}", cluster)


def devices(state: Obj) -> list[str]:
    return [
        f"{d['driver']}/{d['pool']}/{d['device']}"
        for pod in (state.get("allocation") or {}).get("pods") or []
        for d in pod.get("devices") or []
    ]


def claims_of(cluster: KubeCluster, ns: str) -> list[Obj]:
    return items(cluster, f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")


def unschedulable(cluster: KubeCluster, ns: str, name: str) -> Obj:
    def found() -> Obj | None:
        for p in items(cluster, f"/api/v1/namespaces/{ns}/pods"):
            if (p["metadata"].get("labels") or {}).get(SERVICE_LABEL) != name:
                continue
            for c in (p.get("status") or {}).get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                    return p
        return None

    return wait_for(found, f"a pod of {name} Unschedulable", cluster)


def test_two_shared_services_get_a_share_each_of_one_gpu_within_its_memory(
    sharing_cluster: KubeCluster, sharing_controller: ControllerProcess, ns: str
) -> None:
    shared = "{mode: shared, memoryLimitGiB: 40}"
    apply_yaml(sharing_cluster, MODEL + service("one", shared) + service("two", shared), ns)
    one = allocated(sharing_cluster, ns, "one", "1/1")
    two = allocated(sharing_cluster, ns, "two", "1/1")
    # Both on the one shareable GPU, each claim consuming its 40Gi of the device's memory.
    assert devices(one) == devices(two) == [SHAREABLE], (one, two)
    consumed = [
        r.get("consumedCapacity")
        for claim in claims_of(sharing_cluster, ns)
        for r in ((claim.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
    assert consumed == [{"memory": "40Gi"}, {"memory": "40Gi"}], consumed
    made = one["managedClaims"]
    assert made["sharing"] == "shared" and made["memory"] == "40Gi", made
    assert made["memoryFraction"] == 0.5, made
    # vLLM preallocates its share of the device, not the 0.9 default of the whole GPU.
    deployment = get(sharing_cluster, f"/apis/apps/v1/namespaces/{ns}/deployments/one") or {}
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.5", args

    # The device's 80Gi are spent: a third share waits for the scheduler, on no other GPU.
    apply_yaml(sharing_cluster, service("three", "{mode: shared, memoryLimitGiB: 8}"), ns)
    unschedulable(sharing_cluster, ns, "three")
    assert devices(status(sharing_cluster, ns, "three")) == []
    assert sharing_controller.api_errors(ns) == []


def test_partitioned_services_get_mig_devices_and_the_gpus_counters_bound_them(
    sharing_cluster: KubeCluster, sharing_controller: ControllerProcess, ns: str
) -> None:
    partitioned = "{mode: partitioned, profile: 3g.40gb}"
    apply_yaml(sharing_cluster, MODEL + service("mig", partitioned, replicas=3), ns)
    # Two 3g.40gb partitions use all 8 memory slices of gpu-0: the third pod cannot get one
    # although a third 3g.40gb-shaped slot would fit the compute slices.
    unschedulable(sharing_cluster, ns, "mig")
    state = allocated(sharing_cluster, ns, "mig", "2/3")
    assert sorted(devices(state)) == [
        "gpu.nvidia.com/kwok-node-0/gpu-0-mig-3g40gb-0",
        "gpu.nvidia.com/kwok-node-0/gpu-0-mig-3g40gb-1",
    ], state
    made = state["managedClaims"]
    assert made["deviceClass"] == "mig.nvidia.com" and made["sharing"] == "partitioned", made
    assert made["selectors"] == ['device.attributes["gpu.nvidia.com"].profile == "3g.40gb"']
    assert sharing_controller.api_errors(ns) == []


def test_sharing_beside_a_users_claims_is_still_refused(
    sharing_cluster: KubeCluster, sharing_controller: ControllerProcess, ns: str
) -> None:
    """The guide: gpuSharing other than exclusive cannot be combined with resourceClaims."""
    apply_yaml(
        sharing_cluster,
        """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: qwen}
spec:
  source: Qwen/Qwen3-8B
  format: safetensors
  hardware:
    accelerator: cuda
    gpu: {enabled: true, resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]}
"""
        + service("mine", "{mode: shared, memoryLimitGiB: 40}"),
        ns,
    )

    def failed() -> Obj | None:
        now = status(sharing_cluster, ns, "mine")
        return now if now.get("phase") == "Failed" else None

    state = wait_for(failed, "the service Failed", sharing_cluster)
    ready = next(c for c in state["conditions"] if c["type"] == "Ready")
    assert "cannot be combined with resourceClaims" in ready["message"], ready
    assert items(sharing_cluster, f"/apis/apps/v1/namespaces/{ns}/deployments") == []
