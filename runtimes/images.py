"""Which container image serves a runtime on a Model's accelerator.

Exact tags, at the versions whose argv parsers tests/data/runtime-options/ describes:
moving a pin means regenerating that runtime's options file
(scripts/fetch-runtime-options.py) so the contract test checks the argv against the
new parser. A variant without a pin here (no official image we checked) must come
from spec.image or the chart's runtimeImages; until then the service says so.

Order: spec.image, then the chart's `runtimeImages.<runtime>.<variant>` (passed to the
controller as JSON in LLMKUBE_RUNTIME_IMAGES, read into the operator's Settings by
app/cli.py: nothing here reads the environment), then the pin below.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType

from api import InferenceServiceSpec, ModelSpec
from runtimes.gpu import uses_gpu

# The parser versions the options files were read from.
VERSIONS = {"vllm": "0.34.0", "sglang": "0.5.23", "tgi": "3.3.6", "llamacpp": "b10068"}

PINS: dict[str, dict[str, str]] = {
    "vllm": {
        "cuda": "vllm/vllm-openai:v0.34.0",
        # vLLM's own ROCm build, published per release as vllm/vllm-openai-rocm:v<version>
        # (v0.17.0 ... v0.31.0 seen in use); same `vllm serve` CLI and version.
        "rocm": "vllm/vllm-openai-rocm:v0.34.0",
        "cpu": "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.34.0",
    },
    # No ROCm pin: SGLang's ROCm tags carry the ROCm release and GPU family
    # (v0.5.4-rocm630-mi30x, later -rocm700-/-rocm720-mi30x) and we found no published
    # 0.5.23 one to check; AMD GPUs name theirs in spec.image or runtimeImages.sglang.rocm.
    "sglang": {"cuda": "lmsysorg/sglang:v0.5.23"},
    "tgi": {
        "cuda": "ghcr.io/huggingface/text-generation-inference:3.3.6",
        "rocm": "ghcr.io/huggingface/text-generation-inference:3.3.6-rocm",
        "intel": "ghcr.io/huggingface/text-generation-inference:3.3.6-intel-xpu",
        "cpu": "ghcr.io/huggingface/text-generation-inference:3.3.6-intel-cpu",
    },
    "llamacpp": {
        "cuda": "ghcr.io/ggml-org/llama.cpp:server-cuda-b10068",
        "rocm": "ghcr.io/ggml-org/llama.cpp:server-rocm-b10068",
        "intel": "ghcr.io/ggml-org/llama.cpp:server-intel-b10068",
        "vulkan": "ghcr.io/ggml-org/llama.cpp:server-vulkan-b10068",
        "cpu": "ghcr.io/ggml-org/llama.cpp:server-b10068",
    },
}
VARIANTS = ("cuda", "rocm", "intel", "vulkan", "cpu")
VENDOR_VARIANTS = {"nvidia": "cuda", "amd": "rocm", "intel": "intel"}
OVERRIDES_ENV = "LLMKUBE_RUNTIME_IMAGES"


def variant(model: ModelSpec, service: InferenceServiceSpec) -> str:
    """cpu without a GPU; else the accelerator's build (vulkan, rocm, intel) or the vendor's."""
    if not uses_gpu(model, service):
        return "cpu"
    if model.accelerator in ("rocm", "intel", "vulkan"):
        return model.accelerator
    return VENDOR_VARIANTS[model.gpu.vendor]


# runtime -> variant -> image: the operator's overrides of the pins.
Overrides = Mapping[str, Mapping[str, str]]
NO_OVERRIDES: Overrides = MappingProxyType({})


def parse_overrides(raw: str) -> Overrides:
    """The chart's runtimeImages JSON (empty strings mean "use the pin"); ValueError
    names what is wrong."""
    if not raw:
        return NO_OVERRIDES
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{OVERRIDES_ENV}: not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{OVERRIDES_ENV}: must be an object of runtime -> variant -> image")
    found: dict[str, dict[str, str]] = {}
    for runtime, variants in data.items():
        if runtime not in PINS:
            raise ValueError(f"{OVERRIDES_ENV}: unknown runtime {runtime!r}")
        if not isinstance(variants, dict):
            raise ValueError(f"{OVERRIDES_ENV}.{runtime}: must be an object of variant -> image")
        for v, image in variants.items():
            if v not in VARIANTS or not isinstance(image, str):
                raise ValueError(f"{OVERRIDES_ENV}.{runtime}.{v}: not a variant's image")
        found[runtime] = {v: image for v, image in variants.items() if image}
    return MappingProxyType(found)


def image_for(
    model: ModelSpec, service: InferenceServiceSpec, overrides: Overrides = NO_OVERRIDES
) -> str | None:
    """The image, or None when nothing is pinned or configured for this variant."""
    if service.image:
        return service.image
    v = variant(model, service)
    return overrides.get(service.runtime, {}).get(v) or PINS[service.runtime].get(v)


def missing_image_message(model: ModelSpec, service: InferenceServiceSpec) -> str:
    v = variant(model, service)
    return (
        f"no {service.runtime} image is pinned for {v}: set spec.image, or the chart value "
        f"runtimeImages.{service.runtime}.{v}"
    )
