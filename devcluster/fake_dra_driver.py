"""A fake DRA driver: publishes GPUs as nvidia-dra-driver-gpu does, to a real apiserver.

The real driver runs a kubelet plugin on every node that publishes one ResourceSlice per
node (pool = the node's name) with a device per GPU (`gpu-0`, `gpu-1`, ...), each
carrying attributes such as `type: gpu`, `uuid`, `productName` and a `memory` capacity,
and the chart installs a DeviceClass `gpu.nvidia.com` selecting them by driver and type.
This process does the same for nodes that have no GPU, so the real scheduler's DRA
plugin has devices to allocate. It applies the objects (server-side apply, its own field
manager) and keeps them there until it is stopped:

    python -m devcluster.fake_dra_driver --kubeconfig K --nodes n1,n2 --gpus 4

`--taints-file` names a JSON file, re-read before each publish, that maps
`<node>/<device>` to the device's taints (KEP-5055, `spec.devices[].taints`: key, value,
effect), as a real driver taints a device it finds unhealthy; a missing file taints none.

`--sharing` publishes the two shapes of a GPU that several pods use, as NVIDIA's driver
does (a stand-in for it, not the driver): the last GPU of the first node allows multiple
allocations (KEP-5075 consumable capacity: its `memory` is consumed by each share, as
the driver's ConsumableShares feature publishes it), and every other GPU is
partitionable (KEP-4815): beside the whole device, MIG partitions of type `mig` with a
`profile` (`1g.10gb` x 7, `3g.40gb` x 2) that draw on the GPU's shared counters (7
compute and 8 memory slices, all of them consumed by the whole device), so the scheduler
never over-commits one GPU. The DeviceClass `mig.nvidia.com` selects the partitions. One
shareable GPU in the cluster: services asking for shares of one device get that one,
wherever the scheduler puts them (with one on each node, two shares could land apart).
It comes last on its node: 1.34's allocator stops at a multi-allocatable device another
claim holds instead of going on to the next one (kubernetes/kubernetes#133705, fixed
after 1.34), so a whole-GPU request tries the other GPUs first. The control plane needs
the DRAConsumableCapacity and DRAPartitionableDevices gates before 1.36.
`--split-counters` puts the counters in a slice of their own in the node's pool, as the
API requires from 1.35 (before, devices and their counters share one slice).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.errors import ApiError
from controller.kube import KubeClient
from controller.resources import DEVICE_CLASS, RESOURCE_SLICE, ResourceType
from objtypes import Obj

DRIVER = "gpu.nvidia.com"
FIELD_MANAGER = "fake-dra-driver"
APPLY = "application/apply-patch+yaml"
GPU_MEMORY = "80Gi"
PRODUCT = "NVIDIA H100 80GB HBM3"
MIG_CLASS = "mig.nvidia.com"
# MIG profiles of an H100 80GB: (profile, instances, compute slices, memory slices, memory).
MIG_PROFILES = (("1g.10gb", 7, 1, 1, "10Gi"), ("3g.40gb", 2, 3, 4, "40Gi"))
COMPUTE_SLICES, MEMORY_SLICES = 7, 8


def device_class(name: str = DRIVER, kind: str = "gpu") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && "
                        f"device.attributes['{DRIVER}'].type == '{kind}'"
                    }
                }
            ]
        },
    }


def _attributes(node: str, i: int, kind: str = "gpu") -> Obj:
    return {
        "type": {"string": kind},
        "index": {"int": i},
        "uuid": {"string": f"GPU-{node}-{i:04d}"},
        "productName": {"string": PRODUCT},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "580.95.5"},
    }


def _counter_set(i: int) -> str:
    return f"gpu-{i}-counters"


def _whole(node: str, i: int, sharing: bool, shareable: bool) -> Obj:
    device: Obj = {
        "name": f"gpu-{i}",
        "attributes": _attributes(node, i),
        "capacity": {"memory": {"value": GPU_MEMORY}},
    }
    if shareable:
        device["allowMultipleAllocations"] = True
    elif sharing:  # the whole GPU takes every slice its partitions would
        device["consumesCounters"] = [
            {
                "counterSet": _counter_set(i),
                "counters": {
                    "compute-slices": {"value": str(COMPUTE_SLICES)},
                    "memory-slices": {"value": str(MEMORY_SLICES)},
                },
            }
        ]
    return device


def _partitions(node: str, i: int) -> list[Obj]:
    found = []
    for profile, instances, compute, memory, size in MIG_PROFILES:
        for n in range(instances):
            attributes = _attributes(node, i, "mig")
            attributes["uuid"] = {"string": f"MIG-{node}-{i:04d}-{profile}-{n}"}
            attributes["parentUUID"] = {"string": f"GPU-{node}-{i:04d}"}
            attributes["profile"] = {"string": profile}
            found.append(
                {
                    "name": f"gpu-{i}-mig-{profile.replace('.', '')}-{n}",
                    "attributes": attributes,
                    "capacity": {"memory": {"value": size}},
                    "consumesCounters": [
                        {
                            "counterSet": _counter_set(i),
                            "counters": {
                                "compute-slices": {"value": str(compute)},
                                "memory-slices": {"value": str(memory)},
                            },
                        }
                    ],
                }
            )
    return found


def _counters(partitionable: int) -> list[Obj]:
    return [
        {
            "name": _counter_set(i),
            "counters": {
                "compute-slices": {"value": str(COMPUTE_SLICES)},
                "memory-slices": {"value": str(MEMORY_SLICES)},
            },
        }
        for i in range(partitionable)
    ]


def resource_slices(
    node: str,
    gpus: int,
    taints: Mapping[str, Any] | None = None,
    *,
    sharing: bool = False,
    shareable: bool = True,
    split_counters: bool = False,
) -> list[Obj]:
    """The node's pool: one slice of devices (with `sharing`, their counters in it, or in
    a second slice with `split_counters`; `shareable`: its last GPU allows multiple
    allocations, else it is partitionable as the others)."""
    taints = taints or {}
    devices = []
    # With sharing, every GPU is partitionable but the shareable one (the last).
    partitionable = 0
    if sharing:
        partitionable = gpus - 1 if shareable else gpus
    for i in range(gpus):
        devices.append(_whole(node, i, sharing, sharing and i >= partitionable))
        if i < partitionable:
            devices += _partitions(node, i)
    for device in devices:
        if taints.get(f"{node}/{device['name']}"):
            device["taints"] = taints[f"{node}/{device['name']}"]
    counters = _counters(partitionable)
    count = 2 if counters and split_counters else 1
    pool = {"name": node, "generation": 1, "resourceSliceCount": count}
    spec: Obj = {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": devices}
    if counters and not split_counters:
        spec["sharedCounters"] = counters
    found = [_slice(f"{node}-{DRIVER}", spec)]
    if counters and split_counters:
        own = {"driver": DRIVER, "nodeName": node, "pool": pool, "sharedCounters": counters}
        found.append(_slice(f"{node}-{DRIVER}-counters", own))
    return found


def _slice(name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def resource_slice(node: str, gpus: int, taints: Mapping[str, Any] | None = None) -> Obj:
    """The node's one slice of whole GPUs."""
    return resource_slices(node, gpus, taints)[0]


def read_taints(path: Path | None) -> Mapping[str, Any]:
    if path is None or not path.exists():
        return {}
    found = json.loads(path.read_text())
    return found if isinstance(found, dict) else {}


async def publish(
    client: KubeClient,
    nodes: list[str],
    gpus: int,
    taints: Path | None = None,
    *,
    sharing: bool = False,
    split_counters: bool = False,
) -> None:
    objects: list[tuple[ResourceType, Obj]] = [(DEVICE_CLASS, device_class())]
    if sharing:
        objects.append((DEVICE_CLASS, device_class(MIG_CLASS, "mig")))
    tainted = read_taints(taints)
    for node in nodes:
        made = resource_slices(
            node,
            gpus,
            tainted,
            sharing=sharing,
            shareable=node == nodes[0],
            split_counters=split_counters,
        )
        objects += [(RESOURCE_SLICE, s) for s in made]
    for rt, obj in objects:
        path = rt.object_path(None, obj["metadata"]["name"])
        await client.request(
            "PATCH",
            path,
            body=obj,
            content_type=APPLY,
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
        )


async def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="fake_dra_driver")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--nodes", required=True, help="comma-separated node names")
    p.add_argument("--gpus", type=int, default=4, help="GPUs per node")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between re-publishes")
    p.add_argument("--taints-file", type=Path, help="JSON: <node>/<device> -> taints")
    p.add_argument("--sharing", action="store_true", help="shareable and partitionable GPUs")
    p.add_argument("--split-counters", action="store_true", help="counters in a slice apart")
    args = p.parse_args(argv)
    nodes = [n for n in args.nodes.split(",") if n]
    client = await KubeClient.connect(None, args.kubeconfig)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    published = False
    try:
        while not stop.is_set():
            # Re-applying unchanged objects writes nothing; one deleted comes back.
            try:
                await publish(
                    client,
                    nodes,
                    args.gpus,
                    args.taints_file,
                    sharing=args.sharing,
                    split_counters=args.split_counters,
                )
                if not published:
                    print("PUBLISHED", flush=True)
                    published = True
            except (ApiError, OSError, ValueError) as e:
                print(f"publish failed: {e}", file=sys.stderr, flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), args.interval)
    finally:
        await client.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
