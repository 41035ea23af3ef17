"""Claims made for the user (reconcilers/devices/managed.py): when the controller makes a
ResourceClaimTemplate for a Model that names no claims, what it asks for, and what the
pod gets from it."""

from __future__ import annotations

from typing import Any

import pytest

from api import conditions as c
from api import parse_inference_service, parse_model
from objtypes import Obj
from reconcilers.devices import dra
from reconcilers.devices.managed import (
    CEL_SELECTOR_ANNOTATION,
    DEVICE_CLASS_ANNOTATION,
    MANAGED_CLAIM_LABEL,
    Cluster,
    ManagedClaims,
    Refused,
    applies,
    decide,
)
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec

NVIDIA_CLASS: Obj = {
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
}
DRA_ONLY = Cluster({"gpu.nvidia.com": NVIDIA_CLASS}, plugin_nodes=0, extended_class=None)


def isvc(name: str = "chat", annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": "team", "uid": "uid-1"}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"modelRef": "qwen", "runtime": "vllm", **spec}}


def gpu_model(**gpu: Any) -> Any:
    return parse_model(
        {
            "source": "Qwen/Qwen3-8B",
            "format": "safetensors",
            "hardware": {"accelerator": "cuda", "gpu": {"enabled": True, **gpu}},
        }
    )


def made(obj: Obj, model: Any, cluster: Cluster = DRA_ONLY, default: str | None = None) -> Any:
    return decide(obj, parse_inference_service(obj["spec"]), model, cluster, default)


def request_of(m: ManagedClaims) -> Obj:
    requests = m.template["spec"]["spec"]["devices"]["requests"]
    assert len(requests) == 1
    request: Obj = requests[0]
    return request


def test_a_dra_only_cluster_gets_a_template_of_count_devices_owned_by_the_service() -> None:
    m = made(isvc(), gpu_model(count=2))
    assert isinstance(m, ManagedClaims)
    assert request_of(m) == {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 2,
        },
    }
    meta = m.template["metadata"]
    assert meta["name"].startswith("chat-gpus-") and len(meta["name"]) == len("chat-gpus-") + 10
    assert meta["namespace"] == "team"
    assert meta["labels"][MANAGED_CLAIM_LABEL] == "true"
    assert meta["labels"]["inference.llmkube.dev/inferenceservice"] == "chat"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "name": "chat",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    # What the DRA reading of the controller sees in it: two devices of that class.
    demand = dra.pod_demand([m.template])
    assert demand.total == 2 and demand.by_class == {"gpu.nvidia.com": 2}


def test_without_count_the_template_asks_for_one_device() -> None:
    m = made(isvc(), gpu_model())
    assert isinstance(m, ManagedClaims)
    assert m.count == 1 and request_of(m)["exactly"]["count"] == 1


def test_the_models_gpu_memory_and_the_annotations_selectors_are_anded() -> None:
    lines = "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'\n\n  x == y  \n"
    m = made(isvc(annotations={CEL_SELECTOR_ANNOTATION: lines}), gpu_model(memory="80Gi"))
    assert isinstance(m, ManagedClaims)
    assert [s["cel"]["expression"] for s in request_of(m)["exactly"]["selectors"]] == [
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0',
        "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'",
        "x == y",
    ]
    assert "where device.capacity" in m.describe()


def test_the_memory_selector_names_the_driver_the_class_selects() -> None:
    custom: Obj = {
        "metadata": {"name": "big-gpus"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
    }
    cluster = Cluster({"big-gpus": custom}, 0, None)
    obj = isvc(annotations={DEVICE_CLASS_ANNOTATION: "big-gpus"})
    m = made(obj, gpu_model(memory="1536Mi"), cluster)
    assert isinstance(m, ManagedClaims) and m.device_class == "big-gpus"
    assert m.selectors == (
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("1536Mi")) >= 0',
    )


@pytest.mark.parametrize(
    "published",
    [
        Cluster({"gpu.nvidia.com": NVIDIA_CLASS}, plugin_nodes=1, extended_class=None),
        Cluster({"gpu.nvidia.com": NVIDIA_CLASS}, 0, extended_class="gpu.nvidia.com"),
        Cluster({}, 0, None),
    ],
    ids=["a-node-has-the-device-plugin", "kep-5004-serves-the-limit", "no-vendor-class"],
)
def test_the_device_plugin_request_stays_where_it_can_be_served(published: Cluster) -> None:
    assert made(isvc(), gpu_model(count=2), published) is None


def test_a_named_device_class_that_does_not_exist_is_refused_naming_it() -> None:
    by_annotation = made(isvc(annotations={DEVICE_CLASS_ANNOTATION: "mig.nvidia.com"}), gpu_model())
    assert isinstance(by_annotation, Refused)
    assert by_annotation.reason == c.DEVICE_CLASS_NOT_FOUND
    assert "'mig.nvidia.com'" in by_annotation.message
    assert DEVICE_CLASS_ANNOTATION in by_annotation.message
    by_flag = made(isvc(), gpu_model(), default="gpus.example.com")
    assert isinstance(by_flag, Refused) and "--dra-device-class" in by_flag.message


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        ({DEVICE_CLASS_ANNOTATION: "Bad Class;rm"}, "is not a DeviceClass name"),
        ({CEL_SELECTOR_ANNOTATION: "\n".join(["true"] * 33)}, "33 selectors, at most 32"),
        ({CEL_SELECTOR_ANNOTATION: "x" * (10 * 1024 + 1)}, "line 1: longer than 10240 bytes"),
    ],
    ids=["class-name", "too-many-selectors", "long-selector"],
)
def test_bad_annotations_are_refused_naming_the_annotation(
    annotations: dict[str, str], words: str
) -> None:
    refused = made(isvc(annotations=annotations), gpu_model())
    assert isinstance(refused, Refused) and refused.reason == c.INVALID_SPEC
    assert words in refused.message and "metadata.annotations[" in refused.message


def test_the_name_changes_with_what_the_template_asks_and_only_then() -> None:
    one = made(isvc(), gpu_model(count=2))
    again = made(isvc(), gpu_model(count=2))
    more = made(isvc(), gpu_model(count=4))
    assert isinstance(one, ManagedClaims) and isinstance(again, ManagedClaims)
    assert isinstance(more, ManagedClaims)
    assert one.name == again.name != more.name


def test_a_long_service_name_still_gives_a_valid_template_name() -> None:
    m = made(isvc(name="a" * 63), gpu_model())
    assert isinstance(m, ManagedClaims)
    assert len(m.name) <= 63 and m.name.startswith("a" * 40)


@pytest.mark.parametrize(
    ("spec", "model", "queued"),
    [
        ({}, parse_model({"source": "Qwen/Qwen3-8B", "format": "safetensors"}), False),
        (
            {},
            gpu_model(resourceClaims=[{"name": "g", "resourceClaimTemplateName": "mine"}]),
            False,
        ),
        ({}, gpu_model(), True),
    ],
    ids=["cpu-model", "user-claims", "kueue"],
)
def test_the_path_is_not_taken_for_these_services(spec: Obj, model: Any, queued: bool) -> None:
    obj = isvc(**spec)
    assert not applies(obj, parse_inference_service(obj["spec"]), model, queued)


def test_the_pod_gets_the_template_as_a_user_claim_and_no_device_plugin_limit() -> None:
    obj = isvc()
    service = parse_inference_service(obj["spec"])
    m = made(obj, gpu_model(count=2))
    assert isinstance(m, ManagedClaims)
    served = m.model(gpu_model(count=2))
    spec = pod_spec(scope_for(obj, service, served, claimed=2))
    assert spec["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": m.name}]
    container = spec["containers"][0]
    assert container["resources"].get("claims") == [{"name": "gpus"}]
    assert "nvidia.com/gpu" not in (container["resources"].get("limits") or {})
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}.items() <= (
        spec["tolerations"][0].items()
    )
    assert "--tensor-parallel-size" in container["args"]
    assert container["args"][container["args"].index("--tensor-parallel-size") + 1] == "2"
