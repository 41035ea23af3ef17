"""The simulated cluster's nodes, the ResourceSlice a DRA driver publishes for a node's
GPUs, and the DeviceClass, as a new cluster starts with them."""

from __future__ import annotations

from objtypes import Obj

from ..kinds import DEVICE_CLASS, NODE, RESOURCE_SLICE
from ..storage import Storage

DRA_NODE = "gpu-node-1"
PLUGIN_NODE = "plugin-node-1"
CPU_NODE = "node-1"
DRIVER = "gpu.nvidia.com"


def seed(storage: Storage, dra_gpus: int, plugin_gpus: int, shared_gpus: int = 0) -> None:
    if dra_gpus or shared_gpus:
        storage.create(NODE, "", _node(DRA_NODE, {}))
        storage.create(RESOURCE_SLICE, "", _slice(DRA_NODE, dra_gpus, shared_gpus))
    if plugin_gpus:
        storage.create(NODE, "", _node(PLUGIN_NODE, {"nvidia.com/gpu": str(plugin_gpus)}))
    if not dra_gpus and not plugin_gpus:
        storage.create(NODE, "", _node(CPU_NODE, {}))
    storage.create(
        DEVICE_CLASS,
        "",
        {
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )


def _node(name: str, extended: dict[str, str]) -> Obj:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", **extended}
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.34.0", "operatingSystem": "linux"},
        },
    }


def _slice(node: str, gpus: int, shared: int = 0) -> Obj:
    """What the NVIDIA DRA driver publishes for a node's GPUs (the last `shared` of them
    allowing multiple allocations, as its ConsumableShares feature does)."""
    return {
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "index": {"int": i},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                    **({"allowMultipleAllocations": True} if i >= gpus else {}),
                }
                for i in range(gpus + shared)
            ],
        },
    }
