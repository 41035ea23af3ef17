"""reconcilers/devices/dra.py on objects shaped as a resource.k8s.io/v1 API server returns them."""

from __future__ import annotations

import yaml

from objtypes import Obj
from reconcilers.devices import dra, kueue
from tests.support.manifests import claim_template


def template(name: str, requests: str) -> Obj:
    doc: Obj = yaml.safe_load(claim_template(name, requests))
    doc["metadata"]["namespace"] = "default"
    return doc


TWO_GPUS = template(
    "two-gpus",
    """\
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 2}""",
)
DEFAULT_COUNT = template(
    "one", "        - name: gpu\n          exactly: {deviceClassName: gpu.nvidia.com}"
)
ALL_GPUS = template(
    "all",
    """\
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}""",
)
PREFER_EIGHT = template(
    "prefer-eight",
    """\
        - name: gpus
          firstAvailable:
            - {name: eight, deviceClassName: gpu.nvidia.com, count: 8}
            - {name: two, deviceClassName: gpu.nvidia.com, count: 2}""",
)
GPU_AND_NIC = template(
    "gpu-nic",
    """\
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com, count: 4}
        - name: nic
          exactly: {deviceClassName: rdma.example.com, count: 1}""",
)

ALLOCATED_CLAIM: Obj = yaml.safe_load(
    """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: server-0-gpu-x7k2p
  namespace: default
  annotations: {resource.kubernetes.io/pod-claim-name: gpu}
  ownerReferences:
    - apiVersion: v1
      kind: Pod
      name: server-0
      uid: u-1
      controller: true
      blockOwnerDeletion: true
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 2}
status:
  allocation:
    devices:
      results:
        - {request: gpu, driver: gpu.nvidia.com, pool: node-a, device: gpu-0}
        - {request: gpu, driver: gpu.nvidia.com, pool: node-a, device: gpu-1}
    nodeSelector:
      nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: In, values: [node-a]}]
  reservedFor:
    - {resource: pods, name: server-0, uid: u-1}
"""
)

POD: Obj = yaml.safe_load(
    """
apiVersion: v1
kind: Pod
metadata: {name: server-0, namespace: default, uid: u-1}
spec:
  containers: [{name: main, image: x, resources: {claims: [{name: gpu}, {name: shared}]}}]
  resourceClaims:
    - {name: gpu, resourceClaimTemplateName: two-gpus}
    - {name: shared, resourceClaimName: team-gpu}
    - {name: later, resourceClaimTemplateName: one}
status:
  resourceClaimStatuses:
    - {name: gpu, resourceClaimName: server-0-gpu-x7k2p}
  extendedResourceClaimStatus:
    resourceClaimName: server-0-extended-resources-abcde
    requestMappings:
      - {containerName: main, resourceName: nvidia.com/gpu, requestName: container-0-request-0}
"""
)


def device_class(name: str, expression: str | None = None, extended: str | None = None) -> Obj:
    spec: Obj = {}
    if expression is not None:
        spec["selectors"] = [{"cel": {"expression": expression}}]
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
    }


def resource_slice(
    node: str | None, driver: str, devices: int, pool: str = "", generation: int = 1
) -> Obj:
    spec: Obj = {
        "driver": driver,
        "pool": {
            "name": pool or node or "shared",
            "generation": generation,
            "resourceSliceCount": 1,
        },
        "devices": [
            {"name": f"dev-{i}", "attributes": {"index": {"int": i}}} for i in range(devices)
        ],
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": spec,
    }


# -- requested devices --------------------------------------------------------------


def test_exact_count_is_count_and_defaults_to_one() -> None:
    assert dra.requested_devices(TWO_GPUS).total == 2
    assert dra.requested_devices(TWO_GPUS).by_class == {"gpu.nvidia.com": 2}
    assert dra.requested_devices(DEFAULT_COUNT).total == 1
    both = dra.requested_devices(GPU_AND_NIC)
    assert (both.total, both.by_class) == (5, {"gpu.nvidia.com": 4, "rdma.example.com": 1})
    assert both.reasons == []


def test_claims_and_templates_are_read_alike() -> None:
    assert dra.requested_devices(ALLOCATED_CLAIM).total == 2
    assert dra.claim_spec(ALLOCATED_CLAIM) == ALLOCATED_CLAIM["spec"]
    assert dra.claim_spec(TWO_GPUS) == TWO_GPUS["spec"]["spec"]


def test_all_mode_is_unknown_with_a_reason() -> None:
    demand = dra.requested_devices(ALL_GPUS)
    assert demand.total is None and demand.all_mode
    assert demand.by_class == {}
    assert demand.reasons == ['request "gpu" uses allocationMode All: the device count is unknown']


def test_first_available_is_unknown_unless_every_alternative_agrees() -> None:
    demand = dra.requested_devices(PREFER_EIGHT)
    assert demand.total is None and demand.first_available
    assert demand.by_class == {"gpu.nvidia.com": 8}
    assert demand.minimum_by_class == {"gpu.nvidia.com": 2}
    assert demand.classes == {"gpu.nvidia.com"}
    assert "first of 2" in demand.reasons[0] and '"eight"' in demand.reasons[0]
    assert "2 to 8 device(s), known only at allocation" in demand.reasons[0]
    same = template(
        "h100-or-a100",
        """\
        - name: gpus
          firstAvailable:
            - {name: h100, deviceClassName: h100.nvidia.com, count: 2}
            - {name: a100, deviceClassName: a100.nvidia.com, count: 2}""",
    )
    demand = dra.requested_devices(same)
    assert demand.total == 2 and "counted as 2 device(s)" in demand.reasons[0]
    assert demand.classes == {"h100.nvidia.com", "a100.nvidia.com"}


def test_pod_demand_sums_and_all_makes_it_unknown() -> None:
    assert dra.pod_demand([TWO_GPUS, GPU_AND_NIC]).total == 7
    assert dra.pod_demand([TWO_GPUS, GPU_AND_NIC]).by_class["gpu.nvidia.com"] == 6
    assert dra.pod_demand([TWO_GPUS, ALL_GPUS]).total is None
    assert dra.pod_demand([]).total == 0


def test_count_mismatch_names_both_numbers() -> None:
    demand = dra.requested_devices(TWO_GPUS)
    assert dra.count_mismatch(2, demand) is None
    assert dra.count_mismatch(None, demand) is None
    message = dra.count_mismatch(4, demand)
    assert message is not None and "count is 4" in message and "ask for 2" in message


def test_garbage_is_tolerated() -> None:
    assert dra.requested_devices({}).total == 0
    assert dra.requested_devices({"spec": {"devices": {"requests": "x"}}}).total == 0
    bad = template(
        "bad", "        - name: gpu\n          exactly: {deviceClassName: c, count: lots}"
    )
    assert dra.requested_devices(bad).total == 1


# -- allocation ---------------------------------------------------------------------


def test_allocated_devices_and_reservations() -> None:
    devices = dra.allocated_devices(ALLOCATED_CLAIM)
    assert [str(d) for d in devices] == [
        "gpu.nvidia.com/node-a/gpu-0",
        "gpu.nvidia.com/node-a/gpu-1",
    ]
    assert devices[0].request == "gpu"
    assert dra.is_allocated(ALLOCATED_CLAIM)
    assert dra.reserved_for(ALLOCATED_CLAIM) == ["server-0"]
    assert dra.allocated_devices(TWO_GPUS) == [] and not dra.is_allocated(TWO_GPUS)


def test_pod_claim_names_follow_status_for_templates() -> None:
    assert dra.pod_claim_names(POD) == {
        "gpu": "server-0-gpu-x7k2p",
        "shared": "team-gpu",
        "later": None,
        "": "server-0-extended-resources-abcde",
    }
    claims = {"server-0-gpu-x7k2p": ALLOCATED_CLAIM}
    assert len(dra.pod_allocated_devices(POD, claims)) == 2


# -- classes and slices -------------------------------------------------------------


def test_device_facts_join_an_allocation_result_with_its_slice() -> None:
    """productName and memory as NVIDIA's driver publishes them (unqualified: the
    driver's domain) or qualified, from the pool's newest generation only."""
    old = resource_slice("node-a", "gpu.nvidia.com", 2, generation=1)
    new = resource_slice("node-a", "gpu.nvidia.com", 2, generation=2)
    new["spec"]["devices"][1] |= {
        "attributes": {"productName": {"string": "NVIDIA L4"}},
        "capacity": {"memory": {"value": "24Gi"}},
    }
    old["spec"]["devices"][1] |= {"attributes": {"productName": {"string": "stale"}}}
    assert dra.device_facts([old, new], "gpu.nvidia.com", "dev-1") == {
        "productName": "NVIDIA L4",
        "memory": "24Gi",
    }
    qualified = resource_slice("node-a", "gpu.example.com", 1)
    qualified["spec"]["devices"][0] |= {
        "attributes": {"gpu.example.com/productName": {"string": "Example GPU"}},
        "capacity": {"gpu.example.com/memory": {"value": "80Gi"}},
    }
    assert dra.device_facts([qualified], "gpu.example.com", "dev-0") == {
        "productName": "Example GPU",
        "memory": "80Gi",
    }
    assert dra.device_facts([new], "gpu.nvidia.com", "dev-0") == {}  # says nothing of it
    assert dra.device_facts([new], "gpu.nvidia.com", "dev-9") == {}  # not published
    assert dra.device_facts([new], "other.example.com", "dev-1") == {}  # another driver


def test_class_drivers_from_cel() -> None:
    simple = dra.class_drivers(device_class("g", 'device.driver == "gpu.nvidia.com"'))
    assert simple == dra.ClassDrivers(frozenset({"gpu.nvidia.com"}), exact=True)
    nvidia = dra.class_drivers(
        device_class(
            "g",
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].type == 'gpu'",
        )
    )
    assert nvidia.drivers == frozenset({"gpu.nvidia.com"}) and not nvidia.exact
    either = dra.class_drivers(
        device_class("g", 'device.driver == "a.example.com" || device.driver == "b.example.com"')
    )
    assert either.drivers == frozenset({"a.example.com", "b.example.com"})
    assert dra.class_drivers(device_class("any")).drivers is None
    assert not dra.class_drivers(device_class("g", "device.attributes['x'].y == 1")).readable


def test_published_devices_per_node_and_driver_newest_generation() -> None:
    slices = [
        resource_slice("node-a", "gpu.nvidia.com", 4),
        resource_slice("node-b", "gpu.nvidia.com", 2),
        resource_slice("node-b", "gpu.nvidia.com", 8, pool="node-b", generation=2),
        resource_slice(None, "rdma.example.com", 1),
    ]
    # node-b's generation-1 slice is stale once generation 2 is published.
    assert dra.published_devices(slices) == {
        "node-a": {"gpu.nvidia.com": 4},
        "node-b": {"gpu.nvidia.com": 8},
        "": {"rdma.example.com": 1},
    }
    assert dra.devices_per_driver(slices) == {"gpu.nvidia.com": 12, "rdma.example.com": 1}


def test_capacity_problems_have_distinct_reasons_and_numbers() -> None:
    classes = {
        "gpu.nvidia.com": device_class("gpu.nvidia.com", 'device.driver == "gpu.nvidia.com"'),
        "odd": device_class("odd", "device.attributes['x'].y == 1"),
    }
    slices = [
        resource_slice("node-a", "gpu.nvidia.com", 4),
        resource_slice("node-b", "gpu.nvidia.com", 4),
    ]
    four = dra.requested_devices(
        template(
            "t", "        - name: g\n          exactly: {deviceClassName: gpu.nvidia.com, count: 4}"
        )
    )
    assert dra.capacity_problems(four, classes, slices) == []
    eight = dra.requested_devices(
        template(
            "t", "        - name: g\n          exactly: {deviceClassName: gpu.nvidia.com, count: 8}"
        )
    )
    (problem,) = dra.capacity_problems(eight, classes, slices)
    # Eight devices exist, but no single node has them.
    assert problem.reason == "InsufficientDevices"
    assert "needs 8" in problem.message and "publishes in ResourceSlices is 4" in problem.message
    missing = dra.requested_devices(GPU_AND_NIC)
    reasons = [p.reason for p in dra.capacity_problems(missing, classes, slices)]
    assert reasons == ["DeviceClassNotFound"]
    odd = dra.requested_devices(
        template("t", "        - name: g\n          exactly: {deviceClassName: odd}")
    )
    assert [p.reason for p in dra.capacity_problems(odd, classes, slices)] == ["DevicesUnknown"]


def test_extended_resource_class_lookup() -> None:
    older = device_class("gpu-old", extended="nvidia.com/gpu")
    newer = device_class("gpu-new", extended="nvidia.com/gpu")
    newer["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    classes = {"gpu-old": older, "gpu-new": newer, "plain": device_class("plain")}
    assert dra.extended_resource_class(classes, "nvidia.com/gpu") == "gpu-new"
    assert dra.extended_resource_class(classes, "amd.com/gpu") is None
    assert (
        dra.extended_resource_class(classes, "deviceclass.resource.kubernetes.io/plain") == "plain"
    )
    assert dra.extended_resource_class(classes, "deviceclass.resource.kubernetes.io/nope") is None
    tie = {"b": device_class("b", extended="x.io/gpu"), "a": device_class("a", extended="x.io/gpu")}
    assert dra.extended_resource_class(tie, "x.io/gpu") == "a"


# -- Kueue --------------------------------------------------------------------------


MAPPINGS = [
    {"name": "whole-gpus", "deviceClassNames": ["gpu.nvidia.com"]},
    {"name": "nics", "deviceClassNames": ["rdma.example.com", "rdma2.example.com"]},
]


def test_kueue_admits_mapped_template_claims() -> None:
    mapped = kueue.kueue_class_resources(MAPPINGS)
    assert mapped == {
        "gpu.nvidia.com": "whole-gpus",
        "rdma.example.com": "nics",
        "rdma2.example.com": "nics",
    }
    refs = [{"name": "gpu", "resourceClaimTemplateName": "gpu-nic"}]
    assert kueue.kueue_blockers(refs, {"gpu-nic": GPU_AND_NIC}, mapped) == []
    demand = dra.pod_demand([GPU_AND_NIC])
    assert kueue.kueue_charge(demand, mapped, replicas=3) == {"whole-gpus": 12, "nics": 3}


def test_kueue_blockers() -> None:
    templates = {"all": ALL_GPUS, "prefer-eight": PREFER_EIGHT, "gpu-nic": GPU_AND_NIC}
    refs = [
        {"name": "shared", "resourceClaimName": "team-gpu"},
        {"name": "a", "resourceClaimTemplateName": "all"},
        {"name": "f", "resourceClaimTemplateName": "prefer-eight"},
        {"name": "n", "resourceClaimTemplateName": "gpu-nic"},
        {"name": "m", "resourceClaimTemplateName": "missing"},
    ]
    blockers = kueue.kueue_blockers(refs, templates, {"gpu.nvidia.com"})
    assert [b.reason for b in blockers] == [
        "SharedClaim",
        "AllocationModeAll",
        "FirstAvailable",
        "UnmappedDeviceClass",
    ]
    assert '"team-gpu"' in blockers[0].message
    assert '"rdma.example.com"' in blockers[3].message
    # Unmapped classes are not charged.
    assert kueue.kueue_charge(dra.pod_demand([GPU_AND_NIC]), {"gpu.nvidia.com": "g"}, 2) == {"g": 8}


def test_module_imports_only_the_standard_library() -> None:
    import ast
    import sys
    from pathlib import Path

    tree = ast.parse(Path(dra.__file__).read_text())
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots


def test_capacity_checks_the_fewest_devices_a_request_accepts() -> None:
    gpu = device_class("gpu.nvidia.com", 'device.driver == "gpu.nvidia.com"')
    classes = {"gpu.nvidia.com": gpu}
    slices = [resource_slice("node-a", "gpu.nvidia.com", 4)]
    # firstAvailable: eight do not fit on any node, but its second alternative (two) does.
    assert dra.capacity_problems(dra.requested_devices(PREFER_EIGHT), classes, slices) == []
    # All: the class must exist and publish at least one device.
    assert dra.requested_devices(ALL_GPUS).minimum_by_class == {"gpu.nvidia.com": 1}
    assert dra.capacity_problems(dra.requested_devices(ALL_GPUS), classes, slices) == []
    (problem,) = dra.capacity_problems(dra.requested_devices(ALL_GPUS), classes, [])
    assert problem.reason == "InsufficientDevices"
    assert [p.reason for p in dra.capacity_problems(dra.requested_devices(ALL_GPUS), {}, [])] == [
        "DeviceClassNotFound"
    ]
