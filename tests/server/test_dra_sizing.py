"""Issue 13 (1, 3): the runtime is sized from the claims when `count` is absent, and
status.allocation shows what DRA allocated, on a simulated DRA-only cluster.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_dra_sizing.py.
"""

from __future__ import annotations

import pytest

from app.manifests import EXAMPLES, apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import (
    DEPLOYMENT,
    GPU_QUOTA,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
)
from objtypes import Obj
from tests.support.dra_cluster import allocation, args_of, deployment, dra_cluster, without_count
from tests.support.manifests import (
    claim_template,
    isvc_yaml,
    model_yaml,
    quota_yaml,
    reapply,
    two_gpu_claims,
)
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

Cluster = tuple[KubeClient, Manager, ApiServerProcess]


@pytest.fixture
async def cluster() -> Cluster:  # type: ignore[misc]
    async with dra_cluster() as c:
        yield c


def template(name: str, request: str) -> str:
    """A template with one request named gpus; request is its body, indented 10."""
    return claim_template(name, "        - name: gpus\n" + request)


async def test_guide_examples_without_count_are_sized_from_the_templates(
    cluster: Cluster,
) -> None:
    kube, _, _ = cluster
    await apply_text(kube, without_count("multi-gpu.yaml"))
    await apply_text(kube, without_count("single-gpu.yaml"))
    model = await kube.get(MODEL, "default", "qwen3-32b")
    assert model is not None and "count" not in model["spec"]["hardware"]["gpu"]

    # TP 2 still comes from the two-gpus template.
    dep = await deployment(kube, "qwen3-32b")
    args = args_of(dep)
    assert args[args.index("--tensor-parallel-size") + 1] == "2"
    assert "nvidia.com/gpu" not in str(dep["spec"]["template"]["spec"]["containers"][0])
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "qwen3-32b", "Ready", "True")
    sizing = condition(isvc, "DeviceCount")
    assert sizing is not None and sizing["reason"] == "SizedFromClaims"
    assert "sized for the 2 device(s)" in sizing["message"]

    # The one-gpu llama.cpp service: a GPU model on one device, nothing to split.
    args = args_of(await deployment(kube, "qwen3-embedding"))
    assert "--n-gpu-layers" in args and "--split-mode" not in args

    # What DRA allocated, per pod, read back from the pods' template claims.
    alloc = await allocation(kube, "qwen3-32b", "2/2")
    assert (alloc["expectedDevices"], alloc["allocatedDevices"], alloc["allocatedPods"]) == (
        2,
        2,
        1,
    )
    (pod,) = alloc["pods"]
    live = await kube.get(POD, "default", pod["name"])
    assert live is not None
    claim_name = live["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = await kube.get(RESOURCE_CLAIM, "default", claim_name)
    assert claim is not None
    # Each allocation result, joined with what its ResourceSlice says of the device.
    product = {"productName": "NVIDIA H100 80GB HBM3", "memory": "80Gi"}
    assert pod["devices"] == [
        {"claim": claim_name, **r, **product}
        for r in claim["status"]["allocation"]["devices"]["results"]
    ]
    assert {d["driver"] for d in pod["devices"]} == {"gpu.nvidia.com"}
    assert len({d["device"] for d in pod["devices"]}) == 2
    await allocation(kube, "qwen3-embedding", "1/1")


async def test_count_wins_and_a_mismatch_says_both_numbers(cluster: Cluster) -> None:
    kube, _, _ = cluster
    await apply_text(kube, (EXAMPLES / "multi-gpu.yaml").read_text())
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "qwen3-32b", "DeviceCount", "True", "CountMatchesClaims"
    )
    gpu = two_gpu_claims(1)
    await reapply(kube, model_yaml("m", gpu))
    await reapply(kube, isvc_yaml("svc", "m"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "DeviceCount", "False", "CountMismatch"
    )
    message = condition(isvc, "DeviceCount")["message"]  # type: ignore[index]
    assert "count is 1" in message and "ask for 2 device(s)" in message
    # count wins: one device for the runtime, no tensor parallelism.
    assert "--tensor-parallel-size" not in args_of(await deployment(kube, "svc"))
    # ...but the pod holds what the claim allocated, and status says so.
    await allocation(kube, "svc", "2/2")


async def test_replicas_each_get_their_own_devices_until_the_slices_run_out(
    cluster: Cluster,
) -> None:
    kube, _, _ = cluster
    await apply_text(kube, without_count("multi-gpu.yaml"))
    await allocation(kube, "qwen3-32b", "2/2")
    isvc = await kube.get(INFERENCE_SERVICE, "default", "qwen3-32b")
    assert isvc is not None
    isvc["spec"]["replicas"] = 3
    await kube.replace(INFERENCE_SERVICE, isvc)
    # 4 GPUs: two pods get two each, the third waits (the scheduler's reason is shown).
    alloc = await allocation(kube, "qwen3-32b", "4/6")
    assert alloc["allocatedPods"] == 2
    assert sorted(len(p["devices"]) for p in alloc["pods"]) == [0, 2, 2]
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "qwen3-32b", "WorkloadReady", "False", "Unschedulable"
    )
    assert "cannot allocate all claims" in condition(isvc, "WorkloadReady")["message"]  # type: ignore[index]
    assert isvc["status"]["phase"] == "WaitingForGPU"


async def test_all_and_first_available_requests(cluster: Cluster) -> None:
    kube, _, _ = cluster
    await reapply(
        kube,
        template(
            "every-gpu",
            "          exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}",
        ),
    )
    await reapply(
        kube,
        template(
            "prefer-eight",
            """\
          firstAvailable:
            - {name: eight, deviceClassName: gpu.nvidia.com, count: 8}
            - {name: two, deviceClassName: gpu.nvidia.com, count: 2}""",
        ),
    )
    for name in ("every-gpu", "prefer-eight"):
        gpu = f"""\
      enabled: true
      resourceClaims:
        - {{name: gpus, resourceClaimTemplateName: {name}}}"""
        await reapply(kube, model_yaml(name, gpu))
    await reapply(kube, isvc_yaml("every", "every-gpu"))
    # All: the count is unknown until allocation, the runtime is not sized from it...
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "every", "DeviceCount", "False", "DeviceCountUnknown"
    )
    assert "--tensor-parallel-size" not in args_of(await deployment(kube, "every"))
    # ...and the pod is expected to hold what DRA gave it: every GPU of the node.
    await allocation(kube, "every", "4/4")
    await kube.delete(INFERENCE_SERVICE, "default", "every")

    # firstAvailable with eight or two: which one is granted is known only at allocation,
    # so the runtime is not sized from it; this 4-GPU node gives two, and status says so.
    await reapply(kube, isvc_yaml("prefer", "prefer-eight"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "prefer", "DeviceCount", "False", "DeviceCountUnknown"
    )
    assert "2 to 8 device(s)" in condition(isvc, "DeviceCount")["message"]  # type: ignore[index]
    assert "--tensor-parallel-size" not in args_of(await deployment(kube, "prefer"))
    alloc = await allocation(kube, "prefer", "2/2")
    assert {d["request"] for d in alloc["pods"][0]["devices"]} == {"gpus/two"}
    # AcceleratorReady checks the smallest alternative against the slices: it fits.
    model = await wait_condition(
        kube, MODEL, "prefer-eight", "AcceleratorReady", "True", "ResourceClaimsFound"
    )
    assert model["status"]["gpu"]["devicesPerPod"] == 0


async def test_template_deleted_under_running_pods_keeps_their_size(cluster: Cluster) -> None:
    kube, manager, _ = cluster
    await apply_text(kube, without_count("multi-gpu.yaml"))
    await allocation(kube, "qwen3-32b", "2/2")
    before = await deployment(kube, "qwen3-32b")
    await kube.delete(RESOURCE_CLAIM_TEMPLATE, "default", "two-gpus")
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "qwen3-32b", "DeviceCount", "False", "ClaimsMissing"
    )
    assert "kept at 2 device(s)" in condition(isvc, "DeviceCount")["message"]  # type: ignore[index]
    await manager.wait_idle()
    after = await deployment(kube, "qwen3-32b")
    # The runtime keeps its size: no restart into pods that could not start.
    assert args_of(after) == args_of(before)
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "qwen3-32b", "Ready", "True")
    assert isvc["status"]["allocation"]["summary"] == "2/2"


async def test_parallelism_above_the_claimed_devices_is_refused(cluster: Cluster) -> None:
    """No count: the two-gpus template gives each pod 2 devices, so TP 4 cannot start."""
    kube, _, _ = cluster
    gpu = two_gpu_claims()
    await apply_text(kube, without_count("multi-gpu.yaml"))  # creates the two-gpus template
    await reapply(kube, model_yaml("m", gpu))
    await reapply(kube, isvc_yaml("svc", "m", extra="  vllmConfig: {tensorParallelSize: 4}"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "RuntimeConfigured", "False", "ParallelismExceedsGPUs"
    )
    message = condition(isvc, "RuntimeConfigured")["message"]  # type: ignore[index]
    assert "4 GPUs" in message and "gets 2" in message, message
    assert condition(isvc, "ModelResolved")["status"] == "True"  # type: ignore[index]
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
    # Within the claimed devices it is served.
    await reapply(kube, isvc_yaml("svc", "m", extra="  vllmConfig: {tensorParallelSize: 2}"))
    await wait_condition(kube, INFERENCE_SERVICE, "svc", "RuntimeConfigured", "True", "ArgvValid")


async def test_a_quota_that_scales_a_service_down_for_its_devices_keeps_it_down(
    cluster: Cluster,
) -> None:
    """count 1, but the template gives each pod 2 GPUs, under a GPUQuota of 1.

    Admitted at the count's charge, the pod is allocated 2 devices; then the quota
    charges 2 and admits nothing. With the pod gone, the service remembers what a pod
    held (status.allocation.devicesPerPod), so the charge does not fall back to the
    count and the service is not admitted, started and scaled down again in a loop.
    """
    kube, _, _ = cluster
    await apply_text(kube, without_count("multi-gpu.yaml"))  # the two-gpus template
    gpu = two_gpu_claims(1)
    await reapply(kube, model_yaml("m", gpu))
    await reapply(kube, quota_yaml(1, name="one"))
    await reapply(kube, isvc_yaml("svc", "m"))

    async def scaled_down_remembering() -> Obj | None:
        isvc = await kube.get(INFERENCE_SERVICE, "default", "svc")
        status = (isvc or {}).get("status") or {}
        alloc = status.get("allocation") or {}
        settled = (
            alloc.get("pods") == []
            and alloc.get("devicesPerPod") == 2
            and status.get("admittedReplicas") == 0
        )
        return status if settled else None

    status = await eventually(scaled_down_remembering, 20, what="svc held at 0 replicas")
    quota_admitted = next(c for c in status["conditions"] if c["type"] == "QuotaAdmitted")
    assert quota_admitted["status"] == "False" and "2 GPU(s) each" in quota_admitted["message"]

    async def quota_row() -> Obj | None:
        quota = await kube.get(GPU_QUOTA, "default", "one")
        rows = ((quota or {}).get("status") or {}).get("services") or []
        row: Obj | None = next((r for r in rows if r["name"] == "svc"), None)
        return row if row and row["gpusPerReplica"] == 2 else None

    row = await eventually(quota_row, what="quota charges 2 a replica")
    assert row["admittedReplicas"] == 0 and row["requestedReplicas"] == 1
    # The service says the same charge as the quota, not the count's 1.
    isvc = await kube.get(INFERENCE_SERVICE, "default", "svc")
    assert isvc is not None and isvc["status"]["gpusPerReplica"] == 2


async def test_a_refused_change_keeps_the_running_workload_charged(cluster: Cluster) -> None:
    """A service refused after it started (TP 4 on 2 claimed devices) keeps running, and
    its status keeps what the running pods hold: the GPUQuota still charges it, so a
    second service does not get the same GPUs, and `kubectl scale` keeps its selector."""
    kube, _, _ = cluster
    await apply_text(kube, without_count("multi-gpu.yaml"))
    gpu = two_gpu_claims()
    await reapply(kube, model_yaml("m", gpu))
    await reapply(kube, quota_yaml(4, name="q"))
    await reapply(kube, isvc_yaml("a", "m"))
    await allocation(kube, "a", "2/2")
    await reapply(kube, isvc_yaml("a", "m", extra="  vllmConfig: {tensorParallelSize: 4}"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "a", "RuntimeConfigured", "False", "ParallelismExceedsGPUs"
    )
    status = isvc["status"]
    assert status["allocation"]["summary"] == "2/2" and status["allocation"]["devicesPerPod"] == 2
    assert status["selector"] and status["replicas"] == 1
    dep = await kube.get(DEPLOYMENT, "default", "a")
    assert dep is not None and dep["spec"]["replicas"] == 1  # left running

    async def charged() -> Obj | None:
        quota = await kube.get(GPU_QUOTA, "default", "q")
        rows = ((quota or {}).get("status") or {}).get("services") or []
        row: Obj | None = next((r for r in rows if r["name"] == "a"), None)
        return row if row and row["gpus"] == 2 and row["allocatedGPUs"] == 2 else None

    await eventually(charged, what="the refused service still charged 2 GPUs")


async def test_a_count_change_beside_claims_is_served_and_the_mismatch_reported(
    cluster: Cluster,
) -> None:
    """count 2 -> 4 on a Model whose template gives 2 devices (issue 27 item 12): count
    sizes the runtime only up to the devices a pod gets, so the running TP 2 Deployment
    stays as it is and DeviceCount says the numbers differ; an explicit TP above the
    pod's devices is refused."""
    kube, _, _ = cluster
    await apply_text(kube, without_count("multi-gpu.yaml"))  # the two-gpus template
    await reapply(kube, model_yaml("m", two_gpu_claims(2)))
    await reapply(kube, isvc_yaml("svc", "m"))
    await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "DeviceCount", "True", "CountMatchesClaims"
    )
    dep = await deployment(kube, "svc")
    args = args_of(dep)
    assert args[args.index("--tensor-parallel-size") + 1] == "2"
    generation = dep["metadata"]["generation"]
    await reapply(kube, model_yaml("m", two_gpu_claims(4)))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "DeviceCount", "False", "CountMismatch"
    )
    message = condition(isvc, "DeviceCount")["message"]  # type: ignore[index]
    assert "count is 4" in message and "the 2 device(s) a pod gets" in message, message
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "RuntimeConfigured", "True", "ArgvValid"
    )
    dep = await deployment(kube, "svc")
    args = args_of(dep)
    assert args[args.index("--tensor-parallel-size") + 1] == "2", args
    assert dep["metadata"]["generation"] == generation  # the running pods stay up
    # An explicit TP above the pod's devices is refused; the Deployment is left as it is.
    await reapply(kube, isvc_yaml("svc", "m", extra="  vllmConfig: {tensorParallelSize: 4}"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "RuntimeConfigured", "False", "ParallelismExceedsGPUs"
    )
    assert "gets 2" in condition(isvc, "RuntimeConfigured")["message"]  # type: ignore[index]
    dep = await deployment(kube, "svc")
    assert dep["metadata"]["generation"] == generation
