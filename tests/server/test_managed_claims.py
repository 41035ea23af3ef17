"""Claims made for the user on a simulated DRA-only cluster (the test server's scheduler
allocating from its ResourceSlices): a GPU Model that names no claims is served through a
ResourceClaimTemplate the InferenceService owns (reconcilers/devices/managed.py)."""

from __future__ import annotations

import pytest

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import (
    DEPLOYMENT,
    DEVICE_CLASS,
    GPU_QUOTA,
    INFERENCE_SERVICE,
    RESOURCE_CLAIM_TEMPLATE,
)
from objtypes import Obj
from reconcilers.devices.managed import DEVICE_CLASS_ANNOTATION
from tests.support.dra_cluster import allocation, args_of, deployment, dra_cluster
from tests.support.manifests import isvc_yaml, model_yaml, quota_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

Cluster = tuple[KubeClient, Manager, ApiServerProcess]
# No hardware.gpu.memory: the simulated allocator reads no capacity selectors (the
# cluster tier's real scheduler does: tests/cluster/test_cluster_managed_claims.py).
GPU = "      enabled: true\n      count: {count}"


def pod_resources(dep: Obj) -> tuple[list[Obj], Obj]:
    pod = dep["spec"]["template"]["spec"]
    return pod.get("resourceClaims") or [], pod["containers"][0]["resources"]


async def managed_template(kube: KubeClient, name: str, other_than: str = "") -> str:
    async def probe() -> str | None:
        isvc = await kube.get(INFERENCE_SERVICE, "default", name)
        made = ((isvc or {}).get("status") or {}).get("managedClaims") or {}
        template = made.get("template")
        return template if template and template != other_than else None

    return await eventually(probe, 15, what=f"{name} status.managedClaims")


@pytest.fixture
async def cluster() -> Cluster:  # type: ignore[misc]
    async with dra_cluster(gpus=4) as c:
        yield c


async def test_a_model_without_claims_is_served_through_a_template_made_for_it(
    cluster: Cluster,
) -> None:
    kube, _, _ = cluster
    await apply_text(kube, model_yaml("qwen", GPU.format(count=2)))
    await apply_text(kube, isvc_yaml("chat", "qwen"))
    name = await managed_template(kube, "chat")

    template = await kube.get(RESOURCE_CLAIM_TEMPLATE, "default", name)
    assert template is not None
    owner = template["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("InferenceService", "chat", True)
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["deviceClassName"], exactly["count"]) == ("gpu.nvidia.com", 2)

    dep = await deployment(kube, "chat")
    claims, resources = pod_resources(dep)
    assert claims == [{"name": "gpus", "resourceClaimTemplateName": name}]
    assert resources.get("claims") == [{"name": "gpus"}]
    assert "nvidia.com/gpu" not in (resources.get("limits") or {})
    args = args_of(dep)
    assert args[args.index("--tensor-parallel-size") + 1] == "2"

    # The simulated scheduler allocates the template's claims: the status shows them.
    await allocation(kube, "chat", "2/2")
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "chat", "DeviceCount", "True")
    count = condition(isvc, "DeviceCount")
    assert count is not None and count["reason"] == "ManagedClaims"
    assert name in count["message"]
    assert "2 device(s) of DeviceClass 'gpu.nvidia.com'" in count["message"]
    assert isvc["status"]["gpuAttachment"] == "dra"
    assert isvc["status"]["managedClaims"]["count"] == 2

    # A GPUQuota charges what DRA allocated to the template's claims, as for a user's.
    await apply_text(kube, quota_yaml(4))

    async def charged() -> Obj | None:
        quota = await kube.get(GPU_QUOTA, "default", "team")
        status = (quota or {}).get("status") or {}
        return status if status.get("allocatedGPUCount") == 2 else None

    status = await eventually(charged, 15, what="the GPUQuota's allocatedGPUCount 2")
    assert status["usedGPUCount"] == 2 and status["services"][0]["allocatedGPUs"] == 2


async def test_a_changed_model_gets_a_new_template_and_the_old_one_goes(cluster: Cluster) -> None:
    kube, _, _ = cluster
    await apply_text(kube, model_yaml("qwen", GPU.format(count=2)))
    await apply_text(kube, isvc_yaml("chat", "qwen"))
    first = await managed_template(kube, "chat")
    await allocation(kube, "chat", "2/2")

    await reapply(kube, model_yaml("qwen", GPU.format(count=1)))
    second = await managed_template(kube, "chat", other_than=first)
    dep = await deployment(kube, "chat")
    assert pod_resources(dep)[0] == [{"name": "gpus", "resourceClaimTemplateName": second}]
    await allocation(kube, "chat", "1/1")

    async def first_gone() -> bool:
        return await kube.get(RESOURCE_CLAIM_TEMPLATE, "default", first) is None

    await eventually(first_gone, 20, what=f"the unused template {first} deleted")
    assert await kube.get(RESOURCE_CLAIM_TEMPLATE, "default", second) is not None


async def test_a_named_device_class_that_is_missing_is_a_condition_until_it_exists(
    cluster: Cluster,
) -> None:
    kube, _, _ = cluster
    await apply_text(kube, model_yaml("qwen", GPU.format(count=1)))
    await apply_text(
        kube,
        isvc_yaml("chat", "qwen").replace(
            "metadata: {name: chat}",
            "metadata: {name: chat, annotations: {"
            + f"{DEVICE_CLASS_ANNOTATION}: big.example.com}}}}",
        ),
    )
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "chat", "ModelResolved", "False", "DeviceClassNotFound"
    )
    message = condition(isvc, "ModelResolved")["message"]  # type: ignore[index]
    assert "'big.example.com'" in message and DEVICE_CLASS_ANNOTATION in message
    assert await kube.get(DEPLOYMENT, "default", "chat") is None

    nvidia = await kube.get(DEVICE_CLASS, "", "gpu.nvidia.com")
    assert nvidia is not None
    await kube.create(
        DEVICE_CLASS,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "big.example.com"},
            "spec": nvidia["spec"],
        },
    )
    name = await managed_template(kube, "chat")
    template = await kube.get(RESOURCE_CLAIM_TEMPLATE, "default", name)
    assert template is not None
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "big.example.com"


@pytest.mark.server  # starts its own simulated cluster
@pytest.mark.parametrize(("plugin", "managed"), [(1, True), (0, False)], ids=["plugin-node", "off"])
async def test_the_device_plugin_limit_stays_with_a_plugin_node_or_the_path_off(
    plugin: int, managed: bool
) -> None:
    async with dra_cluster(gpus=4, plugin=plugin, managed_claims=managed) as (kube, _, _):
        await apply_text(kube, model_yaml("qwen", GPU.format(count=2)))
        await apply_text(kube, isvc_yaml("chat", "qwen"))
        dep = await deployment(kube, "chat")
        claims, resources = pod_resources(dep)
        assert claims == [] and resources["limits"]["nvidia.com/gpu"] == "2"
        isvc = await kube.get(INFERENCE_SERVICE, "default", "chat")
        assert "managedClaims" not in (isvc or {}).get("status", {})
        templates, _ = await kube.list(RESOURCE_CLAIM_TEMPLATE, "default")
        assert templates == []
        if not plugin:  # the path off on a DRA-only cluster: Pending, and why (#2059)
            isvc = await wait_condition(
                kube, INFERENCE_SERVICE, "chat", "Ready", "False", "Unschedulable"
            )
            assert "Insufficient nvidia.com/gpu" in condition(isvc, "Ready")["message"]  # type: ignore[index]
