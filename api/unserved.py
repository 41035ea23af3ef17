"""LLMKube fields that llmkube-py stores but does not act on, and which of them a spec sets.

A manifest written for LLMKube applies unchanged, so a field we do not serve is kept on
the object rather than refused; the reconcilers then name it in the `FieldsServed`
condition (False, reason `FieldsNotServed`) and one Warning Event, so the intent is never
dropped silently. A field leaves these tables in the change that starts serving it.

Paths are relative to `spec`; `[]` stands for every item of a list. A value equal to
the CRD's default (which the API server writes into every object) is not the user's
request and is not reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from objtypes import Obj

from .source import HF_HOSTS, SourceError, parse_source

MODEL: Mapping[str, object] = {
    "sourceSecretRef": None,
    # Descriptive in LLMKube too (the runtime reads the quantization from the weights).
    "quantization": None,
    "hardware.memoryBudget": None,
    "hardware.memoryFraction": None,
    "hardware.gpu.runtime": None,
}

# Served only where a loader stages the Model (http(s), hf://…/file, s3, spec.files): for a
# hub repo the runtime downloads, or a pvc/host path, nothing verifies or prefetches.
LOADER_ONLY: Mapping[str, object] = {
    "sha256": None,
    "refreshPolicy": "IfNotPresent",
    "prefetch": False,
    "prefetchTolerations": None,
}

# Read only by the runtimes named (LLMKube ignores them on the others).
ONLY_FOR_RUNTIMES: Mapping[str, tuple[str, ...]] = {
    "ropeScaling": ("llamacpp",),  # llama.cpp's --rope-scaling; vLLM/SGLang/TGI: no field
    "args": ("generic",),  # the generic runtime's argv, which llmkube-py does not serve
}

INFERENCE_SERVICE: Mapping[str, object] = {
    "resources.gpuMemory": None,
    "evictionProtection": None,
    "cacheTypeCustomK": None,
    "cacheTypeCustomV": None,
    "reasoningBudgetMessage": None,
    "turboQuantBits": None,
    "pagedSSDCacheDir": None,
    "hotCacheMaxSize": None,
    "pagedSSDCacheMaxSize": None,
    "personaPlexConfig": None,
    "multiNode.rdmaResource": None,
    "multiNode.ibGIDIndex": None,
    "multiNode.members[].fabric.socketInterface": None,
    "multiNode.members[].fabric.ibHCA": None,
    "multiNode.members[].modelCache": None,
}

# Said beside the path, where "not served" alone would leave the user guessing.
WHY_NOT: Mapping[str, str] = {
    "resources.gpuMemory": (
        "no effect in LLMKube either: gpuSharing.memoryLimitGiB is a shared GPU's VRAM"
        " charge, the Model's hardware.gpu.memory a model's footprint"
    ),
}

GPU_QUOTA: Mapping[str, object] = {
    "costBudgetRef": None,
}

# The keys of each runtime's config section that become flags (api/inferenceservice.py
# types them; docs/runtimes.md says which flag each one is). LLMKube's sections hold
# more options than these: the rest are kept and reported.
SERVED_RUNTIME_CONFIG: Mapping[str, frozenset[str]] = {
    "vllm": frozenset(
        {
            "tensorParallelSize",
            "pipelineParallelSize",
            "maxModelLen",
            "quantization",
            "dtype",
            "kvCacheDtype",
            "enablePrefixCaching",
            "enableChunkedPrefill",
            "maxNumBatchedTokens",
            "attentionBackend",
            "enableExpertParallel",
            "cpuOffloadGB",
            "gpuMemoryUtilization",
            "hfTokenSecretRef",
        }
    ),
    "sglang": frozenset(
        {
            "tensorParallelSize",
            "dataParallelSize",
            "expertParallelSize",
            "contextLength",
            "memFractionStatic",
            "quantization",
            "hfTokenSecretRef",
        }
    ),
    "tgi": frozenset({"quantize", "maxInputLength", "maxTotalTokens", "dtype", "hfTokenSecretRef"}),
}
_CONFIG_SECTION = {"vllm": "vllmConfig", "sglang": "sglangConfig", "tgi": "tgiConfig"}


def _found(node: Any, parts: list[str], path: str) -> Iterator[tuple[str, Any]]:
    """(concrete path, value) for each value present at parts below node."""
    if not parts:
        yield path, node
        return
    head, rest = parts[0], parts[1:]
    if head.endswith("[]"):
        items = node.get(head[:-2]) if isinstance(node, dict) else None
        if isinstance(items, list):
            for i, item in enumerate(items):
                yield from _found(item, rest, f"{path}.{head[:-2]}[{i}]")
        return
    if isinstance(node, dict) and node.get(head) is not None:
        yield from _found(node[head], rest, f"{path}.{head}")


def _set_paths(spec: Obj, table: Mapping[str, object]) -> list[str]:
    paths: list[str] = []
    for field, default in table.items():
        for path, value in _found(spec, field.split("."), "spec"):
            if value != default and value not in ({}, [], ""):
                paths.append(f"{path} ({WHY_NOT[field]})" if field in WHY_NOT else path)
    return paths


def _runtime_config_paths(spec: Obj) -> list[str]:
    runtime = spec.get("runtime") or "llamacpp"
    paths: list[str] = []
    for owner, section in _CONFIG_SECTION.items():
        config = spec.get(section)
        if not isinstance(config, dict):
            continue
        if owner != runtime:  # only spec.runtime's own section is read
            if config:
                paths.append(f"spec.{section}")
            continue
        served = SERVED_RUNTIME_CONFIG[owner]
        paths += [
            f"spec.{section}.{k}" for k, v in config.items() if k not in served and v is not None
        ]
    for key, runtimes in ONLY_FOR_RUNTIMES.items():
        if runtime not in runtimes and spec.get(key) not in (None, {}, []):
            paths.append(f"spec.{key}")
    return paths


def model_fields(spec: Any) -> list[str]:
    """The paths of the Model fields this spec sets that llmkube-py does not serve."""
    if not isinstance(spec, dict):
        return []
    paths = _set_paths(spec, MODEL)
    if not _loaded(spec):
        paths += _set_paths(spec, LOADER_ONLY)
    # sourceSecretRef: the s3 loader's credentials, or the HF token of an hf:// / repo source.
    source = str(spec.get("source") or "")
    hf_url = source.startswith("http") and urlsplit(source).hostname in HF_HOSTS
    if (
        hf_url
        or source.startswith(("s3://", "hf://"))
        or not source.startswith(("/", "pvc:", "file:", "http"))
    ):
        paths = [p for p in paths if p != "spec.sourceSecretRef"]
    return paths


def _loaded(spec: Obj) -> bool:
    """Whether a loader stages this Model (spec.files, or a one-file source)."""
    if spec.get("files") or spec.get("mmproj"):
        return True
    try:
        return parse_source(str(spec.get("source") or "")).kind in ("url", "hub-file", "s3")
    except SourceError:
        return False


def inference_service_fields(spec: Any) -> list[str]:
    """The paths of the InferenceService fields this spec sets that are not served."""
    if not isinstance(spec, dict):
        return []
    return _set_paths(spec, INFERENCE_SERVICE) + _runtime_config_paths(spec)


def gpu_quota_fields(spec: Any) -> list[str]:
    """The paths of the GPUQuota fields this spec sets that are not served."""
    return _set_paths(spec, GPU_QUOTA) if isinstance(spec, dict) else []
