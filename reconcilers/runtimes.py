"""Container image and command line of each serving runtime.

Derived flags come from the Model's GPU count; explicit settings in the
InferenceService win over them, and a flag the user passes in extraArgs (under any
of its spellings) replaces the one LLMKube would have derived.
"""

from __future__ import annotations

from dataclasses import dataclass

from api import InferenceServiceSpec, ModelSpec

from .gpu import runtime_device_count, uses_gpu

IMAGES = {
    "vllm": "vllm/vllm-openai:v0.11.0",
    "sglang": "lmsysorg/sglang:v0.5.4",
    "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.6",
}
LLAMACPP_IMAGES = {
    "nvidia": "ghcr.io/ggml-org/llama.cpp:server-cuda",
    "amd": "ghcr.io/ggml-org/llama.cpp:server-rocm",
    "intel": "ghcr.io/ggml-org/llama.cpp:server-intel",
    "cpu": "ghcr.io/ggml-org/llama.cpp:server",
}
PORTS = {"vllm": 8000, "sglang": 8000, "tgi": 8080, "llamacpp": 8080}
ALL_LAYERS = 99  # LLMKube's "all of them" (layers unset or -1)
# Model.hardware.gpu.sharding.strategy -> llama.cpp --split-mode
SPLIT_MODES = {"layer": "layer", "tensor": "row", "row": "row", "pipeline": "layer", "none": "none"}

# Spellings of one option; a user passing any of them owns that option.
ALIASES = {
    "--tensor-parallel-size": ("--tensor-parallel-size", "-tp"),
    "--tp": ("--tp", "--tp-size", "--tensor-parallel-size"),
    "--num-shard": ("--num-shard",),
    "--n-gpu-layers": ("--n-gpu-layers", "-ngl", "--gpu-layers"),
    "--split-mode": ("--split-mode", "-sm"),
    "--tensor-split": ("--tensor-split", "-ts"),
    "--ctx-size": ("--ctx-size", "-c"),
    "--gpu-memory-utilization": ("--gpu-memory-utilization",),
    "--cpu-offload-gb": ("--cpu-offload-gb",),
    "--max-model-len": ("--max-model-len",),
    "--mem-fraction-static": ("--mem-fraction-static",),
    "--port": ("--port",),
    "--host": ("--host", "--hostname"),
}


# spec.mode -> llama-server flags (LLMKube's), skipped when extraArgs already set them.
LLAMACPP_MODE_FLAGS = {
    "embedding": (("--embedding",), ("--pooling", "last")),
    "rerank": (("--reranking",), ("--embedding",), ("--pooling", "rank")),
}


@dataclass(frozen=True)
class RuntimeCommand:
    image: str
    command: list[str]
    args: list[str]
    port: int
    health_path: str = "/health"


def _user_flags(extra_args: tuple[str, ...]) -> set[str]:
    return {a.split("=", 1)[0] for a in extra_args if a.startswith("-")}


class _Args:
    """Derived flags, skipping any the user set in extraArgs."""

    def __init__(self, extra_args: tuple[str, ...]) -> None:
        self.extra = extra_args
        self.user = _user_flags(extra_args)
        self.args: list[str] = []

    def add(self, flag: str, value: object | None) -> None:
        if value is None or self.user.intersection(ALIASES.get(flag, (flag,))):
            return
        self.args += [flag, _fmt(value)]

    def done(self) -> list[str]:
        return self.args + list(self.extra)


def _fmt(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _multi(count: int | None) -> int | None:
    """Parallelism derived from count: only above one device is there anything to split."""
    return count if count and count > 1 else None


def _tensor_split(layer_split: tuple[str, ...], count: int) -> str:
    """Ratios from LLMKube's layerSplit ranges ("0-15" = 16 layers), else an even split."""
    if layer_split:
        sizes = []
        for r in layer_split:
            lo, hi = r.split("-", 1)
            sizes.append(str(int(hi) - int(lo) + 1))
        return ",".join(sizes)
    return ",".join(["1"] * count)


def runtime_command(
    service: InferenceServiceSpec,
    model: ModelSpec,
    model_arg: str,
    served_name: str,
    claimed_devices: int | None = None,
) -> RuntimeCommand:
    """The runtime's image, command and argv.

    `claimed_devices`: the devices the pod's DRA claims ask for, when known; it sizes
    the runtime only when LLMKube's GPU count is absent (count always wins).
    """
    s = service.settings
    count = runtime_device_count(model, service) or claimed_devices or None
    gpu = uses_gpu(model, service)
    port = PORTS[service.runtime]
    a = _Args(service.extra_args)
    if service.runtime == "vllm":
        a.args += ["--model", model_arg, "--served-model-name", served_name]
        a.add("--host", "0.0.0.0")
        a.add("--port", port)
        a.add("--tensor-parallel-size", s.tensor_parallel_size or _multi(count))
        if gpu:
            a.add("--gpu-memory-utilization", s.gpu_memory_utilization)
            a.add("--cpu-offload-gb", s.cpu_offload_gb)
        a.add("--max-model-len", s.max_model_len)
        return RuntimeCommand(service.image or IMAGES["vllm"], [], a.done(), port)
    if service.runtime == "sglang":
        a.args += ["--model-path", model_arg, "--served-model-name", served_name]
        a.add("--host", "0.0.0.0")
        a.add("--port", port)
        a.add("--tp", s.tensor_parallel_size or _multi(count))
        if gpu:
            a.add("--mem-fraction-static", s.mem_fraction_static)
        if service.mode == "embedding" and "--is-embedding" not in a.user:
            a.args.append("--is-embedding")
        command = ["python3", "-m", "sglang.launch_server"]
        return RuntimeCommand(service.image or IMAGES["sglang"], command, a.done(), port)
    if service.runtime == "tgi":
        a.args += ["--model-id", model_arg]
        a.add("--hostname", "0.0.0.0")
        a.add("--port", port)
        a.add("--num-shard", _multi(count))
        return RuntimeCommand(service.image or IMAGES["tgi"], [], a.done(), port)
    # llama.cpp
    if model_arg.startswith(("/", "./")):
        a.args += ["--model", model_arg]
    else:
        a.args += ["-hf", model_arg]
    a.args += ["--alias", served_name]
    a.add("--host", "0.0.0.0")
    a.add("--port", port)
    if gpu:
        layers = model.gpu.layers
        a.add("--n-gpu-layers", layers if layers and layers > 0 else ALL_LAYERS)
        if _multi(count):
            split_mode = SPLIT_MODES[model.gpu.sharding_strategy]
            a.add("--split-mode", split_mode)
            if split_mode != "none":
                a.add("--tensor-split", _tensor_split(model.gpu.layer_split, count or 1))
    a.add("--ctx-size", s.context_size)
    for group in LLAMACPP_MODE_FLAGS.get(service.mode, ()):
        if group[0] not in a.user:
            a.args += group
    vendor = model.gpu.vendor if gpu else "cpu"
    image = service.image or LLAMACPP_IMAGES.get(vendor, LLAMACPP_IMAGES["cpu"])
    return RuntimeCommand(image, [], a.done(), port)
