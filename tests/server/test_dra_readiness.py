"""Issue 13 (2, 5): AcceleratorReady checks DeviceClasses and ResourceSlices, and
KEP-5004 extendedResourceName, on a simulated DRA-only cluster."""

from __future__ import annotations

import pytest

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import (
    DEPLOYMENT,
    DEVICE_CLASS,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from tests.support.dra_cluster import dra_cluster
from tests.support.manifests import claim_template, gpu_template, isvc_yaml, model_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

Cluster = tuple[KubeClient, Manager, ApiServerProcess]


@pytest.fixture
async def cluster() -> Cluster:  # type: ignore[misc]
    async with dra_cluster() as c:
        yield c


NIC_TEMPLATE = claim_template(
    "one-nic",
    "        - name: nic\n          exactly: {deviceClassName: rdma.example.com, count: 1}",
)
NIC_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: rdma.example.com}
spec:
  selectors: [{cel: {expression: 'device.driver == "rdma.example.com"'}}]
"""
NIC_SLICE = """
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-node-1-rdma}
spec:
  driver: rdma.example.com
  nodeName: gpu-node-1
  pool: {name: gpu-node-1, generation: 1, resourceSliceCount: 1}
  devices: [{name: nic-0}]
"""


def claims(*templates: str, count: int = 0) -> str:
    entries = "\n".join(
        f"        - {{name: c{i}, resourceClaimTemplateName: {t}}}" for i, t in enumerate(templates)
    )
    counted = f"      count: {count}\n" if count else ""
    return f"      enabled: true\n{counted}      resourceClaims:\n{entries}"


def message(obj: dict[str, object], type_: str) -> str:
    c = condition(obj, type_)
    assert c is not None
    return str(c["message"])


async def test_class_then_slices_then_ready(cluster: Cluster) -> None:
    kube, _, _ = cluster
    await reapply(kube, gpu_template("one-gpu", 1))
    await reapply(kube, NIC_TEMPLATE)
    await reapply(kube, model_yaml("m", claims("one-gpu", "one-nic")))
    m = await wait_condition(kube, MODEL, "m", "AcceleratorReady", "False", "DeviceClassNotFound")
    assert message(m, "AcceleratorReady") == 'DeviceClass "rdma.example.com" not found'
    assert m["status"]["acceleratorReady"] is False

    # The class exists, but no driver publishes its devices yet.
    await apply_text(kube, NIC_CLASS)
    m = await wait_condition(kube, MODEL, "m", "AcceleratorReady", "False", "InsufficientDevices")
    assert 'needs 1 device(s) of DeviceClass "rdma.example.com"' in message(m, "AcceleratorReady")
    assert "publishes in ResourceSlices is 0" in message(m, "AcceleratorReady")

    await apply_text(kube, NIC_SLICE)
    m = await wait_condition(kube, MODEL, "m", "AcceleratorReady", "True", "ResourceClaimsFound")
    assert "2 device(s) per pod" in message(m, "AcceleratorReady")
    assert m["status"]["gpu"]["deviceClasses"] == ["gpu.nvidia.com", "rdma.example.com"]

    # The driver withdraws its slice: the Model follows.
    await kube.delete(RESOURCE_SLICE, "", "gpu-node-1-rdma")
    await wait_condition(kube, MODEL, "m", "AcceleratorReady", "False", "InsufficientDevices")


async def test_more_devices_than_any_node_publishes(cluster: Cluster) -> None:
    kube, _, _ = cluster
    await reapply(kube, gpu_template("eight-gpus", 8))
    await reapply(kube, model_yaml("big", claims("eight-gpus")))
    m = await wait_condition(kube, MODEL, "big", "AcceleratorReady", "False", "InsufficientDevices")
    assert message(m, "AcceleratorReady") == (
        'one pod needs 8 device(s) of DeviceClass "gpu.nvidia.com" but the most any node '
        "publishes in ResourceSlices is 4"
    )
    # The service still runs its workload; the scheduler leaves the pod Pending.
    await reapply(kube, isvc_yaml("big", "big"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "big", "WorkloadReady", "False", "Unschedulable"
    )
    assert isvc["status"]["allocation"]["summary"] == "0/8"

    # A second node's driver publishes eight GPUs: the Model is ready, the pod runs.
    await kube.create(
        RESOURCE_SLICE,
        {
            "metadata": {"name": "gpu-node-2-gpu.nvidia.com"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "gpu-node-2",
                "pool": {"name": "gpu-node-2", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}"} for i in range(8)],
            },
        },
    )
    await wait_condition(kube, MODEL, "big", "AcceleratorReady", "True", "ResourceClaimsFound")


async def test_kep_5004_extended_resource_name(cluster: Cluster) -> None:
    kube, _, _ = cluster
    # A device-plugin Model on a DRA-only cluster: nvidia.com/gpu exists on no node, so its
    # services are served through templates the controller makes (managed claims).
    await reapply(kube, model_yaml("plugin", "      enabled: true\n      count: 2"))
    await reapply(kube, isvc_yaml("plugin", "plugin"))
    m = await wait_condition(kube, MODEL, "plugin", "AcceleratorReady", "True", "ManagedClaims")
    assert m["status"]["gpu"]["extendedResourceClass"] == ""
    assert "2 device(s) of DeviceClass 'gpu.nvidia.com'" in message(m, "AcceleratorReady")
    await wait_condition(kube, INFERENCE_SERVICE, "plugin", "DeviceCount", "True", "ManagedClaims")
    await wait_condition(kube, INFERENCE_SERVICE, "plugin", "Ready", "True")

    # The DeviceClass serves nvidia.com/gpu through DRA: the same Model is fine now.
    cls = await kube.get(DEVICE_CLASS, "", "gpu.nvidia.com")
    assert cls is not None
    cls["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    await kube.replace(DEVICE_CLASS, cls)
    m = await wait_condition(
        kube, MODEL, "plugin", "AcceleratorReady", "True", "ExtendedResourceViaDRA"
    )
    assert m["status"]["gpu"]["extendedResourceClass"] == "gpu.nvidia.com"
    assert "DeviceClass 'gpu.nvidia.com'" in message(m, "AcceleratorReady")
    await wait_condition(kube, INFERENCE_SERVICE, "plugin", "Ready", "True")
    # The scheduler serves the limit itself now: no template is made, the old one goes.
    dep = await kube.get(DEPLOYMENT, "default", "plugin")
    assert dep is not None
    resources = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "2"
    assert not dep["spec"]["template"]["spec"].get("resourceClaims")

    async def no_templates() -> bool:
        return (await kube.list(RESOURCE_CLAIM_TEMPLATE, "default"))[0] == []

    await eventually(no_templates, 20, what="the unused managed template deleted")

    # Six GPUs: more than the node publishes, AcceleratorReady says so with the numbers.
    await reapply(kube, model_yaml("plugin", "      enabled: true\n      count: 6"))
    m = await wait_condition(
        kube, MODEL, "plugin", "AcceleratorReady", "False", "InsufficientDevices"
    )
    assert "needs 6" in message(m, "AcceleratorReady")

    # count next to claims where nvidia.com/gpu is served by DRA: devices asked twice.
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("claims", claims("two-gpus", count=2)))
    await reapply(kube, isvc_yaml("claims", "claims"))
    isvc = await wait_condition(
        kube,
        INFERENCE_SERVICE,
        "claims",
        "ExtendedResourceOverlap",
        "False",
        "CountServedTwice",
    )
    assert "would allocate 2 more device(s)" in message(isvc, "ExtendedResourceOverlap")
    # llmkube-py itself never adds the limit next to claims.
    assert isvc["status"]["gpuAttachment"] == "dra"


async def test_multi_node_is_refused_when_dra_serves_the_gpu_limit(cluster: Cluster) -> None:
    """The guide rejects multiNode with DRA: member pods pinned with nodeName skip the
    scheduler, which is what allocates a DeviceClass's extendedResourceName (KEP-5004)."""
    kube, _, _ = cluster
    cls = await kube.get(DEVICE_CLASS, "", "gpu.nvidia.com")
    assert cls is not None
    cls["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    await kube.replace(DEVICE_CLASS, cls)
    await reapply(kube, model_yaml("plugin", "      enabled: true\n      count: 1"))
    await wait_condition(
        kube, MODEL, "plugin", "AcceleratorReady", "True", "ExtendedResourceViaDRA"
    )
    members = (
        "  multiNode: {members: [{node: gpu-node-1, fabric: {address: 10.0.0.1}}, "
        "{node: gpu-node-2}]}"
    )
    await reapply(kube, isvc_yaml("spread", "plugin", extra=members))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "spread", "RuntimeConfigured", "False", "MultiNodeWithDRA"
    )
    assert "nodeName" in message(isvc, "RuntimeConfigured")
    pods, _ = await kube.list(POD, "default")
    assert not [p for p in pods if p["metadata"]["name"].startswith("spread-")]
