"""gpuSharing served through claims the controller makes (reconcilers/devices/managed.py):
`shared` as a share of a multi-allocatable device's memory (KEP-5075), `partitioned` as
partition devices of the vendor's partition class (KEP-4815), and the refusals that name
what is missing. The real scheduler's side is tests/cluster/test_cluster_gpu_sharing.py."""

from __future__ import annotations

from typing import Any

from api import conditions as c
from api import parse_inference_service, parse_model
from devcluster.fake_dra_driver import MIG_CLASS, device_class, resource_slices
from objtypes import Obj
from reconcilers.devices import explain, selectors
from reconcilers.devices.managed import (
    DEVICE_CLASS_ANNOTATION,
    SHAREABLE,
    Cluster,
    ManagedClaims,
    Refused,
    applies,
    decide,
)
from runtimes.command import runtime_command

CLASSES = {"gpu.nvidia.com": device_class(), MIG_CLASS: device_class(MIG_CLASS, "mig")}
SLICES = resource_slices("node-0", 2, sharing=True)
DEVICES = tuple(selectors.devices(SLICES))
SHARING = Cluster(CLASSES, plugin_nodes=0, extended_class=None, devices=DEVICES)
WHOLE_ONLY = Cluster(CLASSES, 0, None, tuple(selectors.devices([resource_slices("node-0", 2)[0]])))


def isvc(sharing: Obj, runtime: str = "vllm", **spec: Any) -> Obj:
    return {
        "metadata": {"name": "chat", "namespace": "team", "uid": "uid-1"},
        "spec": {
            "modelRef": "qwen",
            "runtime": runtime,
            "resources": {"gpuSharing": sharing},
            **spec,
        },
    }


MODEL = parse_model(
    {
        "source": "Qwen/Qwen3-8B",
        "format": "safetensors",
        "hardware": {"accelerator": "cuda", "gpu": {"enabled": True, "vendor": "nvidia"}},
    }
)


def made(obj: Obj, cluster: Cluster = SHARING) -> Any:
    service = parse_inference_service(obj["spec"])
    assert applies(obj, service, MODEL, False)
    return decide(obj, service, MODEL, cluster, None)


def exactly(m: ManagedClaims) -> Obj:
    found: Obj = m.template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    return found


def test_shared_asks_for_a_share_of_a_shareable_devices_memory() -> None:
    m = made(isvc({"mode": "shared", "memoryLimitGiB": 20}))
    assert isinstance(m, ManagedClaims)
    assert exactly(m) == {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
        "selectors": [{"cel": {"expression": SHAREABLE}}],
        "capacity": {"requests": {"memory": "20Gi"}},
    }
    assert (m.sharing, m.memory, m.fraction) == ("shared", "20Gi", 0.25)
    assert "20Gi of each one's memory (shared)" in m.describe()
    # Only the last GPU of the fake driver's node allows multiple allocations.
    shareable = [d.name for d in DEVICES if selectors.matches(SHAREABLE, d)]
    assert shareable == ["gpu-1"]


def test_the_runtime_preallocates_its_share_unless_the_user_said_otherwise() -> None:
    obj = isvc({"mode": "shared", "memoryLimitGiB": 20})
    m = made(obj)
    served = m.service(parse_inference_service(obj["spec"]))
    args = runtime_command(served, m.model(MODEL), "Qwen/Qwen3-8B", "qwen", 1).args
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.25", args

    mine = isvc({"mode": "shared", "memoryLimitGiB": 20}, vllmConfig={"gpuMemoryUtilization": 0.3})
    assert made(mine).fraction is None
    sglang = made(isvc({"mode": "shared", "memoryLimitGiB": 40}, runtime="sglang"))
    assert sglang.fraction == 0.5
    tgi_flag = isvc(
        {"mode": "shared", "memoryLimitGiB": 40},
        runtime="tgi",
        extraArgs=["--cuda-memory-fraction=0.4"],
    )
    assert made(tgi_flag).fraction is None
    tgi = isvc({"mode": "shared", "memoryLimitGiB": 40}, runtime="tgi")
    m = made(tgi)
    served = m.service(parse_inference_service(tgi["spec"]))
    args = runtime_command(served, m.model(MODEL), "Qwen/Qwen3-8B", "qwen", 1).args
    assert args[args.index("--cuda-memory-fraction") + 1] == "0.5", args
    # llama.cpp allocates what the model needs: no fraction to give.
    assert made(isvc({"mode": "shared", "memoryLimitGiB": 40}, runtime="llamacpp")).fraction is None


def test_shared_without_a_limit_or_a_shareable_device_is_refused_naming_why() -> None:
    no_limit = made(isvc({"mode": "shared"}))
    assert isinstance(no_limit, Refused) and no_limit.reason == c.INVALID_SPEC
    assert no_limit.message.startswith("spec.resources.gpuSharing.memoryLimitGiB: required")
    none = made(isvc({"mode": "shared", "memoryLimitGiB": 20}), WHOLE_ONLY)
    assert isinstance(none, Refused) and none.reason == c.NO_SHAREABLE_DEVICE
    assert "no device of DeviceClass 'gpu.nvidia.com' allows multiple allocations" in (none.message)


def test_shareable_devices_of_several_sizes_leave_the_fraction_to_the_user() -> None:
    small = resource_slices("node-1", 1, sharing=True)[0]
    for d in small["spec"]["devices"]:
        d["capacity"]["memory"]["value"] = "24Gi"
    mixed = Cluster(CLASSES, 0, None, tuple(selectors.devices([*SLICES, small])))
    refused = made(isvc({"mode": "shared", "memoryLimitGiB": 20}), mixed)
    assert isinstance(refused, Refused) and refused.reason == c.AMBIGUOUS_DEVICE_MEMORY
    assert "(24Gi, 80Gi)" in refused.message and "vllmConfig.gpuMemoryUtilization" in (
        refused.message
    )
    mine = isvc({"mode": "shared", "memoryLimitGiB": 20}, vllmConfig={"gpuMemoryUtilization": 0.2})
    assert isinstance(made(mine, mixed), ManagedClaims)


def test_a_share_larger_than_any_device_is_explained_by_its_capacity() -> None:
    m = made(isvc({"mode": "shared", "memoryLimitGiB": 96}))
    assert isinstance(m, ManagedClaims) and m.fraction is None
    (short,) = explain.shortfalls("T", m.template["spec"]["spec"], CLASSES, list(DEVICES))
    assert short.message == (
        "T request 'gpu': 0 of 1 matching device(s) have memory capacity of at least 96Gi "
        "(one pod needs 1); published: 1 x NVIDIA H100 80GB HBM3, 80Gi"
    )


def test_partitioned_asks_for_partitions_of_the_profile_in_the_partition_class() -> None:
    m = made(isvc({"mode": "partitioned", "profile": "1g.10gb"}))
    assert isinstance(m, ManagedClaims)
    assert exactly(m) == {
        "deviceClassName": MIG_CLASS,
        "allocationMode": "ExactCount",
        "count": 1,
        "selectors": [
            {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'}}
        ],
    }
    assert m.sharing == "partitioned" and m.fraction is None
    picked = [
        d.name
        for d in DEVICES
        if all(
            selectors.matches(e["cel"]["expression"], d)
            for e in [*CLASSES[MIG_CLASS]["spec"]["selectors"], *exactly(m)["selectors"]]
        )
    ]
    assert picked == [f"gpu-0-mig-1g10gb-{n}" for n in range(7)]


def test_partitioned_refusals_name_the_profile_or_the_missing_class() -> None:
    bad = made(isvc({"mode": "partitioned", "profile": 'x" || true || "'}))
    assert isinstance(bad, Refused) and bad.reason == c.INVALID_SPEC
    assert bad.message.startswith("spec.resources.gpuSharing.profile:")
    no_mig = Cluster({"gpu.nvidia.com": device_class()}, 0, None)
    missing = made(isvc({"mode": "partitioned", "profile": "1g.10gb"}), no_mig)
    assert isinstance(missing, Refused) and missing.reason == c.DEVICE_CLASS_NOT_FOUND
    assert "'mig.nvidia.com'" in missing.message
    named = isvc({"mode": "partitioned", "profile": "1g.10gb"})
    named["metadata"]["annotations"] = {DEVICE_CLASS_ANNOTATION: "gpu.nvidia.com"}
    own = made(named)
    assert isinstance(own, ManagedClaims) and own.device_class == "gpu.nvidia.com"


def test_with_the_device_plugin_resource_advertised_sharing_stays_on_it() -> None:
    plugin = Cluster(CLASSES, plugin_nodes=1, extended_class=None, devices=DEVICES)
    assert made(isvc({"mode": "shared", "memoryLimitGiB": 20}), plugin) is None
    assert made(isvc({"mode": "partitioned", "profile": "1g.10gb"}), plugin) is None


def test_a_fraction_flag_in_extra_args_in_any_spelling_is_the_users() -> None:
    for args in (["--gpu-memory-utilization", "0.3"], ["--gpu_memory_utilization=0.3"]):
        assert made(isvc({"mode": "shared", "memoryLimitGiB": 20}, extraArgs=args)).fraction is None
    sglang = isvc({"mode": "shared", "memoryLimitGiB": 20}, runtime="sglang")
    sglang["spec"]["extraArgs"] = ["--mem-fraction-static", "0.3"]
    assert made(sglang).fraction is None


def test_the_fake_driver_publishes_one_shareable_gpu_per_cluster() -> None:
    """--sharing: the first node's last GPU allows multiple allocations; every other GPU,
    the other nodes' last ones too, is whole and partitionable, with its counters (two
    shares asked of one device cannot be put on two nodes' devices)."""
    first, other = (
        resource_slices("node-0", 4, sharing=True),
        resource_slices("node-1", 4, sharing=True, shareable=False),
    )
    for spec, shareable, partitioned in (
        (first[0]["spec"], ["gpu-3"], 3),
        (other[0]["spec"], [], 4),
    ):
        devices = spec["devices"]
        assert [d["name"] for d in devices if d.get("allowMultipleAllocations")] == shareable
        assert len({d["name"].split("-mig-")[0] for d in devices if "-mig-" in d["name"]}) == (
            partitioned
        )
        assert len(spec["sharedCounters"]) == partitioned
