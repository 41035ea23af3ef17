"""Our evaluation of DRA CEL selectors (reconcilers/devices/selectors.py, explain.py)
against the real scheduler's, row by row.

One kwok node gets a ResourceSlice of a test driver with three devices unlike each other
(an H100, an L4 and an A100: product, architecture, memory, driver version, an index, a
bool, and an attribute of another domain), and a DeviceClass selecting that driver. Each
row is a ResourceClaim asking for `count` devices with one selector, and a pod using it:
the real scheduler either allocates it or leaves the pod Unschedulable. Our evaluation
must say the same: no shortfall exactly when the scheduler allocated.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster import KubeCluster
from objtypes import Obj
from reconcilers.devices.explain import shortfalls
from reconcilers.devices.selectors import devices
from tests.support.cluster_objects import get, wait_for

pytestmark = pytest.mark.timeout(900)
DRIVER = "diff.example.com"
CLASS: Obj = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}


def device(name: str, product: str, arch: str, memory: str, version: str, index: int) -> Obj:
    return {
        "name": name,
        "attributes": {
            "productName": {"string": product},
            "architecture": {"string": arch},
            "driverVersion": {"version": version},
            "index": {"int": index},
            "mig": {"bool": arch == "Ampere"},
            "example.com/rack": {"string": "r1"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def diff_slice(node: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                device("h100", "NVIDIA H100 80GB HBM3", "Hopper", "80Gi", "580.95.5", 0),
                device("l4", "NVIDIA L4", "Ada", "24Gi", "550.54.15", 1),
                device("a100", "NVIDIA A100-SXM4-40GB", "Ampere", "40Gi", "535.104.5", 2),
            ],
        },
    }


A = f'device.attributes["{DRIVER}"]'
M = f'device.capacity["{DRIVER}"].memory'
ROWS: list[tuple[str, int]] = [
    (f'{M}.compareTo(quantity("80Gi")) >= 0', 1),
    (f'{M}.compareTo(quantity("96Gi")) >= 0', 1),
    (f'{M}.isLessThan(quantity("30Gi"))', 1),
    (f'{M}.compareTo(quantity("40Gi")) >= 0', 2),
    (f'{M}.compareTo(quantity("40Gi")) >= 0', 3),
    (f"{M}.asInteger() > 50000000000", 1),
    (f'{M}.isGreaterThan(quantity("85899345919"))', 1),
    (f'{A}.productName == "NVIDIA L4"', 1),
    (f'{A}.productName == "NVIDIA L40S"', 1),
    (f'{A}.architecture in ["Hopper", "Ampere"]', 2),
    (f'{A}.driverVersion.isGreaterThan(semver("560.0.0"))', 2),
    (f'{A}.driverVersion.isGreaterThan(semver("560.0.0"))', 1),
    (f"{A}.driverVersion.major() >= 535 && {A}.driverVersion.minor() != 54", 2),
    (f'{A}.driverVersion.compareTo(semver("550.54.15")) == 0', 1),
    (f"{A}.index > 0", 2),
    (f"{A}.index > 1", 2),
    (f"{A}.mig", 1),
    (f"!{A}.mig && {A}.index < 1", 1),
    ('device.attributes["example.com"].rack == "r1"', 3),
    ('"example.com" in device.attributes && !("other.example.com" in device.attributes)', 3),
    (f'has({A}.uuid) || {A}.architecture == "Ada"', 1),
    (f"{A}.nothere == 1", 1),
    ('device.driver == "other.example.com"', 1),
]


@pytest.fixture
def published(kube_cluster: KubeCluster) -> Iterator[Obj]:
    node = kube_cluster.nodes[0]
    made = diff_slice(node)
    kube_cluster.apply(CLASS)
    kube_cluster.apply(made)
    yield made
    kube_cluster.http("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{node}-{DRIVER}")
    kube_cluster.http("DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{DRIVER}")


def claim_spec(selector: str, count: int) -> Obj:
    return {
        "devices": {
            "requests": [
                {
                    "name": "dev",
                    "exactly": {
                        "deviceClassName": DRIVER,
                        "allocationMode": "ExactCount",
                        "count": count,
                        "selectors": [{"cel": {"expression": selector}}],
                    },
                }
            ]
        }
    }


def scheduler_allocates(cluster: KubeCluster, ns: str, i: int, spec: Obj) -> tuple[bool, str]:
    """Whether the real scheduler allocates the claim to a pod, and its word."""
    claims = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    pods = f"/api/v1/namespaces/{ns}/pods"
    name = f"row-{i}"
    cluster.http(
        "POST",
        claims,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    cluster.http(
        "POST",
        pods,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "dev"}]},
                    }
                ],
                "resourceClaims": [{"name": "dev", "resourceClaimName": name}],
            },
        },
    )

    def decided() -> tuple[bool, str] | None:
        pod = get(cluster, f"{pods}/{name}") or {}
        if pod.get("spec", {}).get("nodeName"):
            return (True, "scheduled")
        for c in (pod.get("status") or {}).get("conditions") or []:
            # A CEL runtime error fails the filter itself: reason SchedulerError.
            if c.get("type") == "PodScheduled" and c.get("reason") in (
                "Unschedulable",
                "SchedulerError",
            ):
                return (False, str(c.get("message")))
        return None

    outcome = wait_for(decided, f"row {i} scheduled or Unschedulable", cluster)
    cluster.http("DELETE", f"{pods}/{name}?gracePeriodSeconds=0")
    wait_for(lambda: get(cluster, f"{pods}/{name}") is None or None, f"pod {name} gone", cluster)
    cluster.http("DELETE", f"{claims}/{name}")
    wait_for(lambda: get(cluster, f"{claims}/{name}") is None or None, f"{name} gone", cluster)
    return outcome


def test_every_row_agrees_with_the_real_scheduler(
    kube_cluster: KubeCluster, namespace: str, published: Obj
) -> None:
    ours_devices = devices([published])
    disagreements = []
    table = []
    for i, (selector, count) in enumerate(ROWS):
        spec = claim_spec(selector, count)
        allocated, said = scheduler_allocates(kube_cluster, namespace, i, spec)
        short = shortfalls("ResourceClaim row", spec, {DRIVER: CLASS}, ours_devices)
        table.append(f"{'allocated' if allocated else 'unschedulable':<13} x{count} {selector}")
        if allocated == bool(short):
            disagreements.append(
                f"row {i} {selector!r} x{count}: scheduler "
                f"{'allocated' if allocated else 'refused: ' + said}; ours: "
                f"{short[0].message if short else 'no shortfall'}"
            )
    print("\n".join(table))
    assert disagreements == [], "\n".join(disagreements)
    # Both outcomes are in the table: it can tell a wrong answer either way.
    outcomes = {line.split()[0] for line in table}
    assert outcomes == {"allocated", "unschedulable"}
