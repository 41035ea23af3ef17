"""What the runtime's parser cannot see: problems that would start a pod that never serves.

Each is reported on the InferenceService (Ready=False with the reason and the numbers)
instead of creating a workload that crash-loops or waits forever: parallelism above
the GPUs the pod gets, a mode or model format the runtime cannot serve, a config value
or extraArg the pinned release refuses (runtimes.arg_errors, which the webhook applies
too; here also vLLM's per-platform quantization), no image for the accelerator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from api import InferenceServiceSpec, ModelSpec, gpu_count
from runtimes.accepted_values import VLLM_PLATFORM_QUANTIZATION, VLLM_VERSION
from runtimes.arg_errors import FLASH_ATTN_OFF, effective, runtime_arg_errors
from runtimes.command import MODE_FLAGS, RuntimeCommand, runtime_command
from runtimes.gpu import sized_devices, uses_gpu
from runtimes.images import NO_OVERRIDES, Overrides, image_for, missing_image_message, variant
from runtimes.pod_checks import MountedPath, pod_field_problems, unmounted_model_paths
from runtimes.spellings import int_value, normalize_user_args, user_args
from runtimes.startup import llamacpp_env_problems, sglang_problems, vllm_problems

PARALLELISM_EXCEEDS_GPUS = "ParallelismExceedsGPUs"
MODE_NOT_SUPPORTED = "ModeNotSupported"
MODEL_FORMAT_NOT_SUPPORTED = "ModelFormatNotSupported"
INVALID_RUNTIME_CONFIG = "InvalidRuntimeConfig"
IMAGE_NOT_AVAILABLE = "ImageNotAvailable"

# Formats each runtime loads (llama.cpp: GGUF only; TGI: no GGUF).
FORMATS = {
    "llamacpp": ("gguf", "custom"),
    "tgi": ("safetensors", "pytorch", "custom"),
    "vllm": ("safetensors", "pytorch", "gguf", "custom"),
    "sglang": ("safetensors", "pytorch", "gguf", "custom"),
}
# Our image variant -> vLLM's platform whose supported_quantization list applies.
VLLM_PLATFORMS = {"rocm": "rocm", "intel": "xpu"}


@dataclass(frozen=True)
class Problem:
    reason: str
    message: str


def pod_gpus(model: ModelSpec, service: InferenceServiceSpec, claimed: int | None) -> int | None:
    """GPUs one pod's runtime may use: the device-plugin limit; for claims, count up to
    the devices they give per pod (gpu.sized_devices), None where neither is known."""
    if not uses_gpu(model, service):
        return 0
    if model.uses_claims:
        return sized_devices(model, service, claimed) or None
    return gpu_count(model, service.gpu) or 1


def parallelism(runtime: str, cmd: RuntimeCommand, multi_node: bool = False) -> tuple[int, str]:
    """The GPUs one pod's argv asks for, and how it got there (for the message)."""
    opts = user_args(runtime, tuple(cmd.args))

    def n(name: str) -> int:
        return int_value(opts.value(name)) or 1

    if runtime == "vllm":
        tp, pp = n("--tensor-parallel-size"), n("--pipeline-parallel-size")
        # Data-parallel ranks in this pod: the local size, else all of them (one node);
        # a multiNode member is one rank.
        local = opts.value("--data-parallel-size-local")
        dp = (
            n("--data-parallel-size-local")
            if local
            else 1
            if multi_node
            else n("--data-parallel-size")
        )
        how = f"tensor parallel {tp} x pipeline parallel {pp}"
        return tp * pp * dp, how + (f" x data parallel {dp}" if dp > 1 else "")
    if runtime == "sglang":
        tp, dp, pp = n("--tp-size"), n("--dp-size"), n("--pp-size")
        pipeline = f" x pipeline parallel {pp}" if pp > 1 else ""
        if "--enable-dp-attention" in cmd.args:  # data parallel inside the TP group
            return tp * pp, f"tensor parallel {tp}{pipeline} (dp attention {dp})"
        return tp * dp * pp, f"tensor parallel {tp} x data parallel {dp}{pipeline}"
    if runtime == "tgi":
        shards = n("--num-shard")
        return shards, f"{shards} shards"
    split = opts.value("--tensor-split")
    parts = len(split.replace("/", ",").split(",")) if split else 1
    return parts, f"{parts} --tensor-split parts"


def runtime_problems(
    service: InferenceServiceSpec,
    model: ModelSpec,
    model_arg: str,
    claimed_devices: int | None = None,
    cmd: RuntimeCommand | None = None,
    mounts: Sequence[MountedPath] | None = None,
    images: Overrides = NO_OVERRIDES,
) -> list[Problem]:
    """What would stop the runtime or its pods; cmd is the command already built from
    the same arguments, if the caller has it; mounts: the runtime container's mounts
    (sources/placement.runtime_mounts), to check the model paths extraArgs name; images: the
    operator's runtimeImages."""
    runtime = service.runtime
    problems = []
    if image_for(model, service, images) is None:
        problems.append(Problem(IMAGE_NOT_AVAILABLE, missing_image_message(model, service)))
    if service.mode != "chat" and service.mode not in MODE_FLAGS.get(runtime, {}):
        problems.append(
            Problem(
                MODE_NOT_SUPPORTED,
                f"spec.mode: {runtime} does not serve {service.mode} (use llamacpp, vllm or "
                "sglang)",
            )
        )
    if model.format not in FORMATS[runtime]:
        problems.append(
            Problem(
                MODEL_FORMAT_NOT_SUPPORTED,
                f"Model {service.model_ref!r} is {model.format}: {runtime} loads "
                f"{', '.join(FORMATS[runtime])}",
            )
        )
    elif (
        model.format == "gguf" and runtime in ("vllm", "sglang") and not model_arg.endswith(".gguf")
    ):
        problems.append(
            Problem(
                MODEL_FORMAT_NOT_SUPPORTED,
                f"Model {service.model_ref!r}: {runtime} loads GGUF only from a .gguf file "
                f"(a URL or path), not {model_arg!r}",
            )
        )
    if cmd is None:
        cmd = runtime_command(
            service, model, model_arg, service.model_ref, claimed_devices, images=images
        )
    opts = user_args(runtime, tuple(cmd.args))
    problems += [Problem(INVALID_RUNTIME_CONFIG, e) for e in runtime_arg_errors(service)]
    problems += _platform_problems(service, model)
    shards = int_value(opts.value("--num-shard")) or 1
    if runtime == "tgi" and opts.value("--quantize") == "exl2" and shards > 1:
        problems.append(
            Problem(
                INVALID_RUNTIME_CONFIG,
                f"{effective(service)['--quantize'].where}: TGI's launcher refuses exl2 "
                f"with {shards} shards ('Sharding is currently not supported with exl2'): "
                "use one GPU or another quantization",
            )
        )
    problems += [
        Problem(INVALID_RUNTIME_CONFIG, m) for m in pod_field_problems(service, tuple(cmd.args))
    ]
    if mounts is not None:
        problems += [
            Problem(INVALID_RUNTIME_CONFIG, m) for m in unmounted_model_paths(service, mounts)
        ]
    port = opts.value("--port")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        problems.append(
            Problem(
                INVALID_RUNTIME_CONFIG,
                f"spec.extraArgs: --port {port!r} is not a port number (1-65535); the "
                "runtime would exit, and the container port, probes and Service follow it",
            )
        )
    gpus = pod_gpus(model, service, claimed_devices)
    if runtime == "llamacpp":
        problems += [
            Problem(INVALID_RUNTIME_CONFIG, m)
            for m in _llamacpp_split_problems(service, model, cmd, gpus)
        ]
    startup = {"sglang": sglang_problems, "llamacpp": llamacpp_env_problems, "vllm": vllm_problems}
    if runtime in startup:
        problems += [Problem(INVALID_RUNTIME_CONFIG, m) for m in startup[runtime](service, cmd)]
    wanted, how = parallelism(runtime, cmd, service.multi_node is not None)
    extra = user_args(runtime, normalize_user_args(runtime, service.extra_args))
    if runtime == "llamacpp" and model.gpu.layer_split and "--tensor-split" not in extra:
        how += f" (Model {service.model_ref!r} spec.hardware.gpu.sharding.layerSplit)"
    if gpus and wanted > gpus:
        problems.append(
            Problem(
                PARALLELISM_EXCEEDS_GPUS,
                f"{runtime} is set to {how} = {wanted} GPUs, but each pod gets {gpus}",
            )
        )
    return problems


def _platform_problems(service: InferenceServiceSpec, model: ModelSpec) -> list[Problem]:
    """vLLM's quantization methods narrowed by the platform (ROCm, Intel XPU)."""
    platform = VLLM_PLATFORMS.get(variant(model, service))
    quantization = effective(service).get("--quantization")
    if service.runtime != "vllm" or platform is None or quantization is None:
        return []
    supported = VLLM_PLATFORM_QUANTIZATION[platform]
    if quantization.value.lower() in supported:
        return []
    return [
        Problem(
            INVALID_RUNTIME_CONFIG,
            f"{quantization.where}: vLLM {VLLM_VERSION} on {platform} does not support "
            f"{quantization.value!r} quantization (it supports {', '.join(supported)})",
        )
    ]


# llama.cpp images whose backend exports a split buffer type (b10068: SYCL only), which
# --split-mode row needs on every GPU it offloads to.
ROW_SPLIT_VARIANTS = ("intel",)


def _llamacpp_split_problems(
    service: InferenceServiceSpec, model: ModelSpec, cmd: RuntimeCommand, gpus: int | None
) -> list[str]:
    """The split mode the pod runs, refused where b10068 exits at load with it: row on a
    GPU build without split buffers ("device CUDA0 does not support split buffers"),
    tensor with flash attention off ("SPLIT_MODE_TENSOR requires flash_attn"), tensor on
    a pod with one GPU (its tensor-parallel device made of one GPU fails an assertion at
    warm-up: scripts/gpu-check on an H200, docs/runtimes.md)."""
    if not uses_gpu(model, service):
        return []  # no GPU device: the split mode has no effect
    extra = normalize_user_args("llamacpp", service.extra_args)
    mode = user_args("llamacpp", tuple(cmd.args)).value("--split-mode")
    user = user_args("llamacpp", extra).value("--split-mode")
    where = (
        "spec.extraArgs (--split-mode)"
        if user is not None
        else f"Model {service.model_ref!r} spec.hardware.gpu.sharding.strategy "
        f"({model.gpu.sharding_strategy})"
    )
    build = variant(model, service)
    problems = []
    if mode == "row" and build not in ROW_SPLIT_VARIANTS:
        problems.append(
            f"{where}: row split needs a split buffer type, which llama.cpp b10068 has only "
            f"in its SYCL build (the intel image): the {build} image exits at load ('device "
            "... does not support split buffers'); use tensor (parallel) or layer"
        )
    fa = user_args("llamacpp", tuple(cmd.args)).value("--flash-attn")
    if mode == "tensor" and gpus == 1:
        problems.append(
            f"{where}: tensor split on a pod with one GPU: llama.cpp b10068 aborts at "
            "warm-up (GGML_ASSERT in ggml-backend-meta.cpp, its tensor-parallel device made "
            "of one GPU); use layer or none, or give each pod more GPUs"
        )
    if mode == "tensor" and fa in FLASH_ATTN_OFF:
        problems.append(
            f"{where}: tensor split needs flash attention, and it is set {fa!r} "
            "(spec.flashAttention or -fa): llama.cpp b10068 exits with 'SPLIT_MODE_TENSOR "
            "requires flash_attn to be enabled'"
        )
    return problems
