"""The simulated cluster models DRA as resource.k8s.io/v1 does, end to end over HTTP."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator

import pytest

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.resources import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
)
from objtypes import Obj
from tests.support.manifests import claim_template, gpu_template
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess


@pytest.fixture(params=["dra=4,plugin=0"])
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, KubeClient]]:
    server = await ApiServerProcess.start("--simulate-cluster", request.param)
    client = await KubeClient.connect(server.url)
    yield server.url, client
    await client.close()
    await server.stop()


def sim(spec: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("cluster", [spec], indirect=True)


async def make_pod(
    kube: KubeClient, name: str, claims: list[Obj] | None = None, limits: Obj | None = None
) -> Obj:
    container: Obj = {"name": "main", "image": "vllm/vllm-openai"}
    if limits:
        container["resources"] = {"limits": limits}
    spec: Obj = {"containers": [container]}
    if claims:
        spec["resourceClaims"] = claims
        container["resources"] = {"claims": [{"name": c["name"]} for c in claims]}
    return await kube.create(
        POD, {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
    )


async def phase(kube: KubeClient, name: str, want: str) -> Obj:
    async def probe() -> Obj | None:
        pod = await kube.get(POD, "default", name)
        return pod if pod and pod.get("status", {}).get("phase") == want else None

    return await eventually(probe, what=f"pod {name} {want}")


async def pending_message(kube: KubeClient, name: str, text: str) -> str:
    async def probe() -> str | None:
        pod = await kube.get(POD, "default", name) or {}
        for c in pod.get("status", {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False" and text in c["message"]:
                return str(c["message"])
        return None

    return await eventually(probe, what=f"pod {name} unschedulable with {text!r}")


async def claim_of(kube: KubeClient, pod: Obj, entry: str) -> Obj:
    statuses = {s["name"]: s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"]}
    claim = await kube.get(RESOURCE_CLAIM, "default", statuses[entry])
    assert claim is not None
    return claim


def results(claim: Obj) -> list[Obj]:
    return list(
        claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results") or []
    )


TEMPLATE_CLAIM = [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]


@sim("dra=4,plugin=2")
async def test_nodes_slices_and_classes_are_published(cluster: tuple[str, KubeClient]) -> None:
    url, kube = cluster
    nodes, _ = await kube.list(NODE, None)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    assert set(by_name) == {"gpu-node-1", "plugin-node-1"}
    assert "nvidia.com/gpu" not in by_name["gpu-node-1"]["status"]["allocatable"]
    assert by_name["plugin-node-1"]["status"]["capacity"]["nvidia.com/gpu"] == "2"
    slices, _ = await kube.list(RESOURCE_SLICE, None)
    assert len(slices) == 1
    spec = slices[0]["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]["name"]) == (
        "gpu.nvidia.com",
        "gpu-node-1",
        "gpu-node-1",
    )
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    gpu_class = await kube.get(DEVICE_CLASS, None, "gpu.nvidia.com")
    assert gpu_class is not None
    assert "gpu.nvidia.com" in gpu_class["spec"]["selectors"][0]["cel"]["expression"]
    if shutil.which("kubectl"):
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "--server", url, "get", "nodes", "-o", "name",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert out.decode().split() == ["node/gpu-node-1", "node/plugin-node-1"]


async def test_template_claim_per_pod_is_named_owned_allocated_and_reserved(
    cluster: tuple[str, KubeClient],
) -> None:
    _, kube = cluster
    await apply_text(kube, gpu_template("two-gpus", 2))
    created = await make_pod(kube, "server-0", TEMPLATE_CLAIM)
    pod = await phase(kube, "server-0", "Running")
    assert pod["spec"]["nodeName"] == "gpu-node-1"
    claim = await claim_of(kube, pod, "gpu")
    meta = claim["metadata"]
    assert (
        meta["name"].startswith("server-0-gpu-") and len(meta["name"]) == len("server-0-gpu-") + 5
    )
    assert meta["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "server-0",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    got = results(claim)
    assert [(r["request"], r["driver"], r["pool"]) for r in got] == [
        ("gpu", "gpu.nvidia.com", "gpu-node-1")
    ] * 2
    assert len({r["device"] for r in got}) == 2
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "server-0", "uid": created["metadata"]["uid"]}
    ]
    # A second pod gets its own claim and other devices.
    await make_pod(kube, "server-1", TEMPLATE_CLAIM)
    other = await claim_of(kube, await phase(kube, "server-1", "Running"), "gpu")
    assert other["metadata"]["name"] != meta["name"]
    assert not {r["device"] for r in got} & {r["device"] for r in results(other)}


async def test_pod_waits_for_devices_and_runs_once_a_pod_releases_them(
    cluster: tuple[str, KubeClient],
) -> None:
    _, kube = cluster
    await apply_text(kube, gpu_template("two-gpus", 2))
    for i in range(3):
        await make_pod(kube, f"p{i}", TEMPLATE_CLAIM)
    await phase(kube, "p0", "Running")
    await phase(kube, "p1", "Running")
    message = await pending_message(kube, "p2", "cannot allocate all claims")
    assert message == "0/1 nodes are available: 1 cannot allocate all claims."
    waiting = await kube.get(POD, "default", "p2")
    assert waiting is not None
    # Its claim exists (made from the template) but holds nothing.
    assert results(await claim_of(kube, waiting, "gpu")) == []

    old_claim = (await claim_of(kube, await phase(kube, "p0", "Running"), "gpu"))["metadata"][
        "name"
    ]
    await kube.delete(POD, "default", "p0")
    await phase(kube, "p2", "Running")
    assert await kube.get(RESOURCE_CLAIM, "default", old_claim) is None


async def test_slices_decide_what_can_be_allocated(cluster: tuple[str, KubeClient]) -> None:
    _, kube = cluster
    await apply_text(kube, gpu_template("two-gpus", 2))
    slices, _ = await kube.list(RESOURCE_SLICE, None)
    await kube.delete(RESOURCE_SLICE, None, slices[0]["metadata"]["name"])
    await make_pod(kube, "p", TEMPLATE_CLAIM)
    await pending_message(kube, "p", "cannot allocate all claims")
    fresh = slices[0]
    fresh["metadata"] = {"name": "gpu-node-1-gpu.nvidia.com-b"}
    fresh["spec"]["devices"] = fresh["spec"]["devices"][:2]
    await kube.create(RESOURCE_SLICE, fresh)
    pod = await phase(kube, "p", "Running")
    assert sorted(r["device"] for r in results(await claim_of(kube, pod, "gpu"))) == [
        "gpu-0",
        "gpu-1",
    ]


async def test_all_and_first_available(cluster: tuple[str, KubeClient]) -> None:
    _, kube = cluster
    await apply_text(
        kube,
        claim_template(
            "prefer-eight",
            """\
        - name: gpus
          firstAvailable:
            - {name: eight, deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 8}
            - {name: two, deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 2}""",
        )
        + "---"
        + claim_template(
            "every-gpu",
            "        - name: gpus\n"
            "          exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}",
        ),
    )
    await make_pod(kube, "first", [{"name": "g", "resourceClaimTemplateName": "prefer-eight"}])
    pod = await phase(kube, "first", "Running")
    got = results(await claim_of(kube, pod, "g"))
    assert [r["request"] for r in got] == ["gpus/two", "gpus/two"]

    # All needs every matching device free.
    await make_pod(kube, "all", [{"name": "g", "resourceClaimTemplateName": "every-gpu"}])
    await pending_message(kube, "all", "cannot allocate all claims")
    await kube.delete(POD, "default", "first")
    pod = await phase(kube, "all", "Running")
    got = results(await claim_of(kube, pod, "g"))
    assert sorted(r["device"] for r in got) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert {r["request"] for r in got} == {"gpus"}


async def test_shared_claim_is_reserved_by_each_pod_and_deallocated_after_the_last(
    cluster: tuple[str, KubeClient],
) -> None:
    _, kube = cluster
    await kube.create(
        RESOURCE_CLAIM,
        {
            "metadata": {"name": "shared", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1},
                        }
                    ]
                }
            },
        },
    )
    for name in ("a", "b"):
        await make_pod(kube, name, [{"name": "gpu", "resourceClaimName": "shared"}])
        await phase(kube, name, "Running")
    claim = await kube.get(RESOURCE_CLAIM, "default", "shared")
    assert claim is not None
    assert len(results(claim)) == 1
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["a", "b"]
    # Named claims are not template claims: nothing to record in resourceClaimStatuses.
    pod = await kube.get(POD, "default", "a")
    assert pod is not None and "resourceClaimStatuses" not in pod["status"]

    await kube.delete(POD, "default", "a")

    async def reserved_by_b() -> bool:
        c = await kube.get(RESOURCE_CLAIM, "default", "shared") or {}
        return [r["name"] for r in c.get("status", {}).get("reservedFor") or []] == ["b"]

    await eventually(reserved_by_b, what="reservation of a dropped")
    await kube.delete(POD, "default", "b")

    async def deallocated() -> bool:
        c = await kube.get(RESOURCE_CLAIM, "default", "shared")
        return c is not None and not c.get("status")

    await eventually(deallocated, what="claim deallocated")


async def test_missing_device_class_is_named(cluster: tuple[str, KubeClient]) -> None:
    _, kube = cluster
    await apply_text(
        kube,
        gpu_template("two-gpus", 2).replace("gpu.nvidia.com", "tpu.example.com"),
    )
    await make_pod(kube, "p", TEMPLATE_CLAIM)
    message = await pending_message(kube, "p", "does not exist")
    assert "device class tpu.example.com does not exist" in message


async def test_extended_resource_backed_by_a_device_class(cluster: tuple[str, KubeClient]) -> None:
    """KEP-5004: once a DeviceClass names nvidia.com/gpu, a device-plugin limit gets DRA devices."""
    _, kube = cluster
    await make_pod(kube, "plugin", limits={"nvidia.com/gpu": 2})
    message = await pending_message(kube, "plugin", "Insufficient nvidia.com/gpu")
    assert message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    await kube.create(
        DEVICE_CLASS,
        {
            "metadata": {"name": "gpu-extended.nvidia.com"},
            "spec": {
                "selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}],
                "extendedResourceName": "nvidia.com/gpu",
            },
        },
    )
    pod = await phase(kube, "plugin", "Running")
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {
            "containerName": "main",
            "resourceName": "nvidia.com/gpu",
            "requestName": "container-0-request-0",
        }
    ]
    claim = await kube.get(RESOURCE_CLAIM, "default", status["resourceClaimName"])
    assert claim is not None
    assert claim["metadata"]["name"].startswith("plugin-extended-resources-")
    assert (
        claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    )
    assert [r["request"] for r in results(claim)] == ["container-0-request-0"] * 2
    await kube.delete(POD, "default", "plugin")

    async def claim_gone() -> bool:
        return await kube.get(RESOURCE_CLAIM, "default", status["resourceClaimName"]) is None

    await eventually(claim_gone, what="extended-resource claim deleted with its pod")


@sim("dra=0,plugin=2")
async def test_device_plugin_node_serves_its_own_resource(cluster: tuple[str, KubeClient]) -> None:
    _, kube = cluster
    await kube.create(
        DEVICE_CLASS,
        {
            "metadata": {"name": "gpu-extended.nvidia.com"},
            "spec": {"extendedResourceName": "nvidia.com/gpu"},
        },
    )
    await make_pod(kube, "plugin", limits={"nvidia.com/gpu": 2})
    pod = await phase(kube, "plugin", "Running")
    assert pod["spec"]["nodeName"] == "plugin-node-1"
    assert "extendedResourceClaimStatus" not in pod["status"]
    claims, _ = await kube.list(RESOURCE_CLAIM, "default")
    assert claims == []
    assert json.dumps(pod).count("extended-resources") == 0
