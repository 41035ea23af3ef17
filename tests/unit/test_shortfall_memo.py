"""claim_shortfalls remembers its answer by everything it is worked out from
(reconcilers/devices/lookup.py): the claim's spec, the ResourceSlices and DeviceClasses
by resourceVersion, the DeviceTaintRules' taints. Each reconcile of a service on claims
asked it again, and its CEL evaluation against every published device was the largest
part of the product's CPU on a cluster with DRA (docs/benchmarks.md)."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from api import ModelSpec, parse_model
from controller.cache import Cache
from controller.resources import (
    DEVICE_CLASS,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    ResourceType,
)
from objtypes import Obj
from reconcilers.devices import explain, lookup

DRIVER = "gpu.nvidia.com"
SELECTOR = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("96Gi")) >= 0'


class Objects:
    """The two reads claim_shortfalls makes of a cache."""

    def __init__(self, objs: dict[ResourceType, list[Obj]]) -> None:
        self.objs = objs

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return next((o for o in self.objs.get(rt, []) if o["metadata"]["name"] == name), None)

    def list(self, rt: ResourceType, namespace: str | None = None) -> list[Obj]:
        return self.objs.get(rt, [])


def gpu_slice(memory: str, rv: str | None) -> Obj:
    meta: Obj = {"name": "node-1-gpus"}
    if rv:
        meta["resourceVersion"] = rv
    return {
        "metadata": meta,
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": memory}}}],
        },
    }


def world(memory: str, rv: str | None) -> Objects:
    cls = {
        "metadata": {"name": DRIVER, "resourceVersion": "1"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    exactly: Obj = {"deviceClassName": DRIVER, "count": 1}
    exactly["selectors"] = [{"cel": {"expression": SELECTOR}}]
    request = {"name": "gpu", "exactly": exactly}
    template = {
        "metadata": {"name": "big", "namespace": "default", "resourceVersion": "1"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    return Objects(
        {
            DEVICE_CLASS: [cls],
            RESOURCE_SLICE: [gpu_slice(memory, rv)],
            RESOURCE_CLAIM_TEMPLATE: [template],
        }
    )


def gpu_model(templates: dict[str, str]) -> ModelSpec:
    """A GPU Model naming these ResourceClaimTemplates (claim name: template name)."""
    claims = [{"name": n, "resourceClaimTemplateName": tpl} for n, tpl in templates.items()]
    gpu = {"enabled": True, "vendor": "nvidia", "resourceClaims": claims}
    return parse_model(
        {
            "source": "Qwen/Qwen3-8B",
            "format": "safetensors",
            "hardware": {"accelerator": "cuda", "gpu": gpu},
        }
    )


MODEL = gpu_model({"gpus": "big"})


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lookup._SHORTFALLS.clear()
    calls: list[str] = []
    real = explain.shortfalls

    def counted(claim: str, *args: Any) -> list[explain.Shortfall]:
        calls.append(claim)
        return real(claim, *args)

    monkeypatch.setattr(explain, "shortfalls", counted)
    return calls


def shortfalls(objects: Objects) -> list[str]:
    return lookup.claim_shortfalls(cast(Cache, objects), "default", MODEL)


def test_the_same_claim_and_slices_are_evaluated_once(evaluations: list[str]) -> None:
    small = world("80Gi", "7")
    first = shortfalls(small)
    assert len(first) == 1 and "96Gi" in first[0]
    assert shortfalls(copy.deepcopy(small)) == first
    assert len(evaluations) == 1


def test_a_slice_at_another_resource_version_is_evaluated_again(
    evaluations: list[str],
) -> None:
    assert shortfalls(world("80Gi", "7"))
    assert shortfalls(world("141Gi", "8")) == []
    assert len(evaluations) == 2


def test_objects_without_a_resource_version_are_never_remembered(
    evaluations: list[str],
) -> None:
    assert shortfalls(world("80Gi", None))
    assert shortfalls(world("141Gi", None)) == []
    assert shortfalls(world("80Gi", None))
    assert len(evaluations) == 3


def test_claims_asking_the_same_share_one_evaluation_and_keep_their_names(
    evaluations: list[str],
) -> None:
    small = world("80Gi", "7")
    twin = copy.deepcopy(small.objs[RESOURCE_CLAIM_TEMPLATE][0])
    twin["metadata"]["name"] = "big-too"
    small.objs[RESOURCE_CLAIM_TEMPLATE].append(twin)
    both = gpu_model({"a": "big", "b": "big-too"})
    said = lookup.claim_shortfalls(cast(Cache, small), "default", both)
    assert [m.split(" request ")[0] for m in said] == [
        "ResourceClaimTemplate big",
        "ResourceClaimTemplate big-too",
    ]
    assert "\x00" not in "".join(said) and len(evaluations) == 1
