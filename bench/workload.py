"""What a benchmark creates and when an object counts as handled.

The harness is generic over a Workload, so another pipeline (InferenceServices under a
GPUQuota, once those API shapes settle) is one more Workload here, not a new harness.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.resources import MODEL, ResourceType

Obj = dict[str, Any]
NAMESPACES = 20


@dataclass(frozen=True)
class Workload:
    name: str
    resource: ResourceType
    make: Callable[[int], Obj]  # the i-th object to create
    handled: Callable[[Obj], bool]  # the controller has written what it should
    setup: Callable[[], list[tuple[ResourceType, Obj]]] = lambda: []  # created first


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

# Hook for issue 15's GPUQuota pipeline (1k/3k InferenceServices with a quota, and the
# same without one): add Workloads whose `setup` creates the Models and the GPUQuota and
# whose `make` creates InferenceServices, then list them in bench.__main__.WORKLOADS.


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
