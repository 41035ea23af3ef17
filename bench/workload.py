"""What a benchmark creates and when an object counts as handled.

The harness is generic over a Workload: Models (one status write each), and
InferenceServices in one namespace (a Deployment, a Service and a status each), with a
GPUQuota over that namespace or without one, or with one pod each already there
(what a reconcile reads of its pods, among every pod of the namespace).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.resources import GPU_QUOTA, INFERENCE_SERVICE, MODEL, POD, ResourceType
from objtypes import Obj

NAMESPACES = 20


@dataclass(frozen=True)
class Workload:
    name: str
    resource: ResourceType
    make: Callable[[int], Obj]  # the i-th object to create
    handled: Callable[[Obj], bool]  # the controller has written what it should
    # created first, given the number of objects the run creates
    setup: Callable[[int], list[tuple[ResourceType, Obj]]] = lambda n: []
    controller: str = "model"  # the reconciler of `resource`, for its stats


def model(i: int) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": f"model-{i:06d}", "namespace": f"team-{i % NAMESPACES}"},
        "spec": {
            "source": f"https://models.example/qwen3-{i}.gguf",
            "format": "gguf",
            "hardware": {
                "accelerator": "cuda",
                "gpu": {"enabled": True, "vendor": "nvidia", "count": 1 + i % 4},
            },
        },
    }


def has_conditions(obj: Obj) -> bool:
    return bool((obj.get("status") or {}).get("conditions"))


MODELS = Workload("Models", MODEL, model, has_conditions)

SERVICE_NAMESPACE = "serving"
SERVICE_MODELS = 10


def inference_service(i: int) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": f"isvc-{i:06d}", "namespace": SERVICE_NAMESPACE},
        "spec": {"modelRef": f"model-{i % SERVICE_MODELS:06d}", "runtime": "vllm", "replicas": 1},
    }


def _service_models(objects: int) -> list[tuple[ResourceType, Obj]]:
    models = [model(i) for i in range(SERVICE_MODELS)]
    for m in models:
        m["metadata"]["namespace"] = SERVICE_NAMESPACE
        m["spec"]["hardware"]["gpu"]["count"] = 1
    return [(MODEL, m) for m in models]


def _with_quota(objects: int) -> list[tuple[ResourceType, Obj]]:
    """The Models, and a GPUQuota over the namespace that admits three services in four
    (1 GPU each): the last quarter is created over the limit and waits."""
    quota = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "GPUQuota",
        "metadata": {"name": "serving", "namespace": SERVICE_NAMESPACE},
        "spec": {"gpuCount": 1 + objects * 3 // 4, "namespaceRef": SERVICE_NAMESPACE},
    }
    return [*_service_models(objects), (GPU_QUOTA, quota)]


def quota_decided(obj: Obj) -> bool:
    """The service's status says whether a quota admits it (NoQuota without one)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "QuotaAdmitted" for c in conditions)


SERVICES = Workload(
    "InferenceServices without a GPUQuota",
    INFERENCE_SERVICE,
    inference_service,
    quota_decided,
    _service_models,
    "inferenceservice",
)
SERVICES_UNDER_QUOTA = Workload(
    "InferenceServices under a GPUQuota",
    INFERENCE_SERVICE,
    inference_service,
    quota_decided,
    _with_quota,
    "inferenceservice",
)


# The labels the controller puts on a service's pods (reconcilers/ownership.py), written here
# as a user would see them: the bench builds pods the way the cluster holds them.
POD_LABELS = {"app.kubernetes.io/managed-by": "llmkube"}
SERVICE_LABEL = "inference.llmkube.dev/inferenceservice"


def service_pod(i: int) -> Obj:
    """The pod of service i, labelled as its Deployment's ReplicaSet makes it (no status:
    a create leaves that to the kubelet)."""
    name = inference_service(i)["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-7d9f8-x{i:05d}",
            "namespace": SERVICE_NAMESPACE,
            "labels": {**POD_LABELS, SERVICE_LABEL: name},
        },
        "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]},
    }


def _with_pods(objects: int) -> list[tuple[ResourceType, Obj]]:
    """The Models, and one pod for each service the run will create."""
    return [*_service_models(objects), *((POD, service_pod(i)) for i in range(objects))]


SERVICES_WITH_PODS = Workload(
    "InferenceServices with one pod each",
    INFERENCE_SERVICE,
    inference_service,
    quota_decided,
    _with_pods,
    "inferenceservice",
)


def deep_size(value: Any, seen: set[int] | None = None) -> int:
    """Bytes held by a JSON-like value, counting shared objects once."""
    seen = seen if seen is not None else set()
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple):
        size += sum(deep_size(v, seen) for v in value)
    return size


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
