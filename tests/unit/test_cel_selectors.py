"""DRA's CEL selectors evaluated on published devices (reconcilers/devices/selectors.py)
and the explanation of a request no device satisfies (explain.py). The real scheduler's
answers for the same expressions: tests/cluster/test_cluster_cel_differential.py."""

from __future__ import annotations

from fractions import Fraction

import pytest

from devcluster.fake_dra_driver import device_class, resource_slice
from objtypes import Obj
from reconcilers.devices.explain import published, shortfalls
from reconcilers.devices.selectors import (
    Device,
    SelectorError,
    devices,
    matches,
    quantity_value,
)

NVIDIA = "gpu.nvidia.com"
CLASSES = {NVIDIA: device_class()}
EIGHT = devices([resource_slice("n1", 4), resource_slice("n2", 4)])


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", Fraction(80 * 2**30)),
        ("1.5", Fraction(3, 2)),
        ("500m", Fraction(1, 2)),
        ("1e3", Fraction(1000)),
        ("1.5e-3", Fraction(3, 2000)),
        ("-2Ki", Fraction(-2048)),
        (".5", Fraction(1, 2)),
        ("24G", Fraction(24 * 10**9)),
    ],
)
def test_quantities_are_read_exactly(text: str, value: Fraction) -> None:
    assert quantity_value(text) == value


@pytest.mark.parametrize("text", ["80GB", "1.2.3", "", "Gi", "1e", "80 Gi"])
def test_what_is_not_a_quantity_is_an_error(text: str) -> None:
    with pytest.raises(SelectorError):
        quantity_value(text)


def test_a_device_is_seen_with_its_drivers_domain_and_qualified_names_apart() -> None:
    (found,) = devices(
        [
            {
                "spec": {
                    "driver": NVIDIA,
                    "nodeName": "n1",
                    "pool": {"name": "n1", "generation": 1},
                    "devices": [
                        {
                            "name": "gpu-0",
                            "attributes": {
                                "productName": {"string": "NVIDIA L4"},
                                "example.com/rack": {"string": "r7"},
                                "driverVersion": {"version": "550.54.15"},
                                "index": {"int": 3},
                                "mig": {"bool": False},
                            },
                            "capacity": {"memory": {"value": "24Gi"}},
                        }
                    ],
                }
            }
        ]
    )
    assert found.attributes == {
        NVIDIA: {
            "productName": "NVIDIA L4",
            "driverVersion": {"@semver": "550.54.15"},
            "index": 3,
            "mig": False,
        },
        "example.com": {"rack": "r7"},
    }
    assert found.capacity == {NVIDIA: {"memory": {"@quantity": "24Gi"}}}
    assert matches('device.attributes["example.com"].rack == "r7"', found)
    assert matches(f'device.attributes["{NVIDIA}"].driverVersion.minor() == 54', found)
    assert not matches(f'device.capacity["{NVIDIA}"].memory.isGreaterThan(quantity("24Gi"))', found)


def test_only_the_newest_generation_of_a_pool_is_published() -> None:
    old, new = resource_slice("n1", 4), resource_slice("n1", 2)
    new["spec"]["pool"]["generation"] = 2
    new["metadata"]["name"] = "n1-next"
    assert len(devices([old, new])) == 2


H100 = EIGHT[0]
MEMORY = f'device.capacity["{NVIDIA}"].memory'


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f'device.capacity["{NVIDIA}"].memory.compareTo(quantity("80Gi")) == 0', True),
        (f'device.capacity["{NVIDIA}"].memory.isLessThan(quantity("80Gi"))', False),
        (f'device.capacity["{NVIDIA}"].memory.asInteger() == 85899345920', True),
        (f'device.capacity["{NVIDIA}"].memory.sign() == 1', True),
        (f'device.capacity["{NVIDIA}"].memory.isInteger()', True),
        (f'{MEMORY}.add(quantity("1Gi")).compareTo(quantity("81Gi")) == 0', True),
        (f'device.capacity["{NVIDIA}"].memory.sub(1).isLessThan(quantity("80Gi"))', True),
        ('isQuantity("80Gi") && !isQuantity("80GB")', True),
        (f'device.attributes["{NVIDIA}"].driverVersion.isGreaterThan(semver("580.95.4"))', True),
        (f'device.attributes["{NVIDIA}"].driverVersion.compareTo(semver("580.95.5")) == 0', True),
        (f'device.attributes["{NVIDIA}"].driverVersion.major() == 580', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ('semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))', True),
        ('semver("1.0.0-2").isLessThan(semver("1.0.0-10"))', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        (f'device.attributes["{NVIDIA}"].architecture in ["Hopper", "Ada"]', True),
        (f'has(device.attributes["{NVIDIA}"].uuid)', True),
        ('device.driver == "gpu.amd.com"', False),
    ],
)
def test_the_library_functions_answer_as_kubernetes_does(expression: str, expected: bool) -> None:
    assert matches(expression, H100) is expected


@pytest.mark.parametrize(
    "expression",
    [
        f'device.attributes["{NVIDIA}"].nothere == 1',
        f'device.capacity["{NVIDIA}"].memory.isLessThan("80Gi")',
        "device.driver == ",
        f'device.attributes["{NVIDIA}"].index',
    ],
    ids=["no-such-key", "no-such-overload", "syntax", "not-a-bool"],
)
def test_runtime_and_compile_errors_are_selector_errors(expression: str) -> None:
    with pytest.raises(SelectorError):
        matches(expression, H100)


def request(count: int, *selectors: str, mode: str = "ExactCount") -> Obj:
    exactly: Obj = {"deviceClassName": NVIDIA, "allocationMode": mode, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def test_the_selector_that_leaves_too_few_devices_is_named_with_what_is_published() -> None:
    big = f'device.capacity["{NVIDIA}"].memory.compareTo(quantity("96Gi")) >= 0'
    hopper = f'device.attributes["{NVIDIA}"].architecture == "Hopper"'
    (short,) = shortfalls("ResourceClaimTemplate big", request(1, hopper, big), CLASSES, EIGHT)
    assert short.selector == big and short.request == "gpu"
    assert short.message == (
        f"ResourceClaimTemplate big request 'gpu': 0 of 8 device(s) of DeviceClass "
        f"'{NVIDIA}' match {big} (one pod needs 1); published: 8 x NVIDIA H100 80GB HBM3, 80Gi"
    )


def test_a_count_no_node_has_is_told_with_the_most_one_node_offers() -> None:
    (short,) = shortfalls("ResourceClaim c", request(5), CLASSES, EIGHT)
    assert short.selector is None
    assert "one pod needs 5 device(s)" in short.message and "publishes is 4" in short.message
    index = f'device.attributes["{NVIDIA}"].index < 2'
    (short,) = shortfalls("ResourceClaim c", request(3, index), CLASSES, EIGHT)
    assert "4 of 8 device(s)" in short.message and "the most on one node is 2" in short.message


def test_satisfiable_requests_and_all_mode_give_no_shortfall() -> None:
    assert shortfalls("t", request(4), CLASSES, EIGHT) == []
    assert shortfalls("t", request(0, mode="All"), CLASSES, EIGHT) == []
    assert shortfalls("t", request(1), {}, EIGHT) == []  # a missing class is said elsewhere


def test_first_available_fails_only_when_every_alternative_does() -> None:
    def alternatives(*counts: int) -> Obj:
        subs = [{"name": f"x{n}", "deviceClassName": NVIDIA, "count": n} for n in counts]
        return {"devices": {"requests": [{"name": "gpu", "firstAvailable": subs}]}}

    assert shortfalls("t", alternatives(8, 2), CLASSES, EIGHT) == []
    (short,) = shortfalls("t", alternatives(8, 6), CLASSES, EIGHT)
    assert short.request == "gpu/x8"


def test_a_selector_that_fails_on_a_device_fails_the_request_as_the_scheduler_does() -> None:
    missing = f'device.attributes["{NVIDIA}"].nothere == 1'
    (short,) = shortfalls("ResourceClaim c", request(1, missing), CLASSES, EIGHT)
    assert "a selector fails: no such key: nothere" in short.message


def test_published_devices_are_summed_by_product_and_memory() -> None:
    l4 = Device(
        NVIDIA,
        "p",
        "l4",
        "n3",
        {NVIDIA: {"productName": "NVIDIA L4"}},
        {NVIDIA: {"memory": {"@quantity": "24Gi"}}},
    )
    assert published([*EIGHT, l4]) == "8 x NVIDIA H100 80GB HBM3, 80Gi, 1 x NVIDIA L4, 24Gi"
    assert published([]) == "none"
