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


def device_class() -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && "
                        f"device.attributes['{DRIVER}'].type == 'gpu'"
                    }
                }
            ]
        },
    }


def resource_slice(node: str, gpus: int, taints: Mapping[str, Any] | None = None) -> Obj:
    taints = taints or {}
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "index": {"int": i},
                "uuid": {"string": f"GPU-{node}-{i:04d}"},
                "productName": {"string": PRODUCT},
                "architecture": {"string": "Hopper"},
                "driverVersion": {"version": "580.95.5"},
            },
            "capacity": {"memory": {"value": GPU_MEMORY}},
            **({"taints": taints[f"{node}/gpu-{i}"]} if taints.get(f"{node}/gpu-{i}") else {}),
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def read_taints(path: Path | None) -> Mapping[str, Any]:
    if path is None or not path.exists():
        return {}
    found = json.loads(path.read_text())
    return found if isinstance(found, dict) else {}


async def publish(
    client: KubeClient, nodes: list[str], gpus: int, taints: Path | None = None
) -> None:
    objects: list[tuple[ResourceType, Obj]] = [(DEVICE_CLASS, device_class())]
    tainted = read_taints(taints)
    objects += [(RESOURCE_SLICE, resource_slice(node, gpus, tainted)) for node in nodes]
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
                await publish(client, nodes, args.gpus, args.taints_file)
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
