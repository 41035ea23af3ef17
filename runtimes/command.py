"""Container image, command line and port of each serving runtime.

Derived flags come from the Model's GPU count (or, without one, the devices the DRA
claims ask for); explicit settings in the InferenceService win over them, and an
option the user passes in extraArgs under any of its spellings (spellings.py)
replaces the one we would have derived, so every option appears once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api import InferenceServiceSpec, ModelSpec
from api.inferenceservice import MAX_TENSOR_SPLIT_PARTS
from runtimes.gpu import sized_devices, uses_gpu
from runtimes.images import NO_OVERRIDES, Overrides, image_for
from runtimes.pod_flags import bind_host, listen_port, llamacpp_field_flags
from runtimes.spellings import FLAGS, int_value, normalize_user_args, user_args

PORTS = {"vllm": 8000, "sglang": 8000, "tgi": 8080, "llamacpp": 8080}
HEALTH_PATHS = {"vllm": "/health", "sglang": "/health", "tgi": "/health", "llamacpp": "/health"}
ALL_LAYERS = 99  # LLMKube's "all of them" (layers unset or -1)
# Model.hardware.gpu.sharding.strategy -> llama.cpp b10068's --split-mode (its --help:
# {none,layer,row,tensor}). tensor is b10068's tensor parallelism (experimental; it
# needs flash attention and refuses some architectures at load); row needs a split
# buffer type, which at b10068 only the SYCL backend exports (src/llama-model.cpp
# make_gpu_buft_list): runtime_checks refuses it on every other GPU build.
SPLIT_MODES = {
    "layer": "layer",
    "tensor": "tensor",
    "row": "row",
    "pipeline": "layer",
    "none": "none",
}
MODEL_OPTIONS = {
    "vllm": ("--model",),
    "sglang": ("--model-path",),
    "tgi": ("--model-id",),
    "llamacpp": ("--model", "-hf"),
}
SGLANG_COMMAND = ["python3", "-m", "sglang.launch_server"]
VLLM_COMMAND = ["vllm", "serve"]  # the CUDA image's entrypoint; the CPU image has none

# spec.mode -> the runtime's flags (name, value or None for a bare flag).
MODE_FLAGS: dict[str, dict[str, tuple[tuple[str, str | None], ...]]] = {
    "llamacpp": {
        "embedding": (("--embedding", None), ("--pooling", "last")),
        "rerank": (("--reranking", None), ("--embedding", None), ("--pooling", "rank")),
    },
    "vllm": {"embedding": (("--runner", "pooling"),), "rerank": (("--runner", "pooling"),)},
    "sglang": {"embedding": (("--is-embedding", None),), "rerank": (("--is-embedding", None),)},
}


@dataclass(frozen=True)
class Member:
    """One pod of a multiNode group."""

    rank: int
    world: int
    leader: str
    rendezvous_port: int


@dataclass(frozen=True)
class RuntimeCommand:
    image: str
    command: list[str]
    args: list[str]
    port: int  # where the runtime really listens (a user --port wins)
    health_path: str = "/health"
    env: list[dict[str, Any]] = field(default_factory=list)
    serves_http: bool = True  # False for vLLM's headless multiNode members


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _Argv:
    """Derived options, leaving out every option the user set in extraArgs."""

    def __init__(self, runtime: str, extra_args: tuple[str, ...]) -> None:
        self.flags = FLAGS[runtime]
        self.extra = normalize_user_args(runtime, extra_args)
        self.user = user_args(runtime, self.extra)
        self.args: list[str] = []

    def add(self, name: str, value: object | None) -> None:
        """`--name value`; for a flag without value, any non-None value means present."""
        if value is None or name in self.user:
            return
        if self.flags[name].takes_value:
            self.args += [name, _fmt(value)]
        else:
            self.args.append(name)

    def toggle(self, name: str, on: bool | None) -> None:
        """A boolean option: its positive spelling, or its negative one when off."""
        if on is None or name in self.user:
            return
        self.args.append(name if on else self.flags[name].negatives[-1])

    def repeat(self, name: str, values: tuple[str, ...]) -> None:
        if name in self.user:
            return
        for v in values:
            self.args += [name, v]

    def mode(self, runtime: str, mode: str) -> None:
        for name, value in MODE_FLAGS.get(runtime, {}).get(mode, ()):
            self.add(name, value if value is not None else True)

    def port(self, default: int) -> int:
        return int_value(self.user.value("--port")) or default

    def done(self) -> list[str]:
        return self.args + list(self.extra)


def _multi(count: int | None) -> int | None:
    """Parallelism derived from count: only above one device is there anything to split."""
    return count if count and count > 1 else None


def tensor_split(layer_split: tuple[str, ...], count: int) -> str | None:
    """Ratios from LLMKube's layerSplit ranges ("0-15" = 16 layers), else an even split.

    None above llama.cpp's 15 parts: it then splits over all devices by free memory.
    """
    if layer_split:
        sizes = []
        for r in layer_split:
            lo, hi = r.split("-", 1)
            sizes.append(str(int(hi) - int(lo) + 1))
        return ",".join(sizes)
    return ",".join(["1"] * count) if count <= MAX_TENSOR_SPLIT_PARTS else None


def hub_revision(model: ModelSpec) -> str | None:
    """hf://org/repo@rev: the revision the runtime downloads."""
    source = model.location
    # spec.files: the loader fetched that revision's files; the runtime gets a path.
    return source.revision if source.kind == "hub" and not model.files else None


def model_flag(runtime: str, model_arg: str) -> str:
    """How the runtime is told what to load (vLLM: its positional argument, not an
    option): llama.cpp takes a hub repo with -hf."""
    if runtime == "sglang":
        return "--model-path"
    if runtime == "tgi":
        return "--model-id"
    return "--model" if model_arg.startswith("/") else "-hf"


def runtime_command(
    service: InferenceServiceSpec,
    model: ModelSpec,
    model_arg: str,
    served_name: str,
    claimed_devices: int | None = None,
    member: Member | None = None,
    mmproj: str | None = None,
    images: Overrides = NO_OVERRIDES,
) -> RuntimeCommand:
    """The runtime's image, command and argv.

    `claimed_devices`: the devices the pod's DRA claims ask for, when known: count sizes
    the runtime up to them, they size it without count (gpu.sized_devices).
    `member`: the multiNode rank this pod runs (vLLM only).
    `mmproj`: the staged spec.mmproj, llama.cpp's --mmproj (a user's --mmproj wins).
    `images`: the operator's runtimeImages (Settings.runtime_images).
    """
    runtime = service.runtime
    count = sized_devices(model, service, claimed_devices) or None
    gpu = uses_gpu(model, service)
    a = _Argv(runtime, service.extra_args)
    # llama.cpp's --model and -hf both say what to load: a user's either one wins.
    if any(name in a.user for name in MODEL_OPTIONS[runtime]):
        pass
    else:
        if runtime == "vllm":
            a.args.append(model_arg)  # `vllm serve <model>`: 0.34 deprecates --model
        else:
            a.add(model_flag(runtime, model_arg), model_arg)
        if runtime != "llamacpp":  # llama.cpp's -hf has no revision (refused in api)
            a.add("--revision", hub_revision(model))
    build = {"vllm": _vllm, "sglang": _sglang, "tgi": _tgi, "llamacpp": _llamacpp}[runtime]
    command, env = build(a, service, model, served_name, count, gpu, member)
    if runtime == "llamacpp":
        a.add("--mmproj", mmproj)
    return RuntimeCommand(
        image=image_for(model, service, images) or "",
        command=command,
        args=a.done(),
        port=a.port(listen_port(service, PORTS[runtime])),
        health_path=HEALTH_PATHS[runtime],
        env=env,
        serves_http=not (member and member.rank > 0),
    )


Built = tuple[list[str], list[dict[str, Any]]]


def _vllm(
    a: _Argv,
    service: InferenceServiceSpec,
    model: ModelSpec,
    served_name: str,
    count: int | None,
    gpu: bool,
    member: Member | None,
) -> Built:
    s = service.settings
    a.add("--served-model-name", served_name)
    a.add("--host", bind_host(service))
    a.add("--port", listen_port(service, PORTS["vllm"]))
    a.add("--tensor-parallel-size", s.tensor_parallel_size or _multi(count))
    a.add("--pipeline-parallel-size", s.pipeline_parallel_size)
    if gpu:
        a.add("--gpu-memory-utilization", s.gpu_memory_utilization)
        a.add("--cpu-offload-gb", s.cpu_offload_gb)
    a.add("--max-model-len", s.max_model_len)
    a.add("--quantization", s.quantization)
    a.add("--dtype", s.dtype)
    a.add("--kv-cache-dtype", s.kv_cache_dtype)
    a.toggle("--enable-prefix-caching", s.enable_prefix_caching)
    a.toggle("--enable-chunked-prefill", s.enable_chunked_prefill)
    a.add("--max-num-batched-tokens", s.max_num_batched_tokens)
    a.toggle("--enable-expert-parallel", s.enable_expert_parallel)
    a.add("--max-num-seqs", s.parallel_slots)
    a.add("--attention-backend", s.attention_backend)
    a.mode("vllm", service.mode)
    if member is not None:
        # vLLM's own multi-node mode without Ray: one data-parallel rank per node
        # (tensor parallel inside it); rank 0 serves the API, the others run headless.
        a.add("--data-parallel-size", member.world)
        a.add("--data-parallel-size-local", 1)
        a.add("--data-parallel-address", member.leader)
        a.add("--data-parallel-rpc-port", member.rendezvous_port)
        if member.rank > 0:
            a.add("--data-parallel-start-rank", member.rank)
            a.add("--headless", True)
    return list(VLLM_COMMAND), []


def _sglang(
    a: _Argv,
    service: InferenceServiceSpec,
    model: ModelSpec,
    served_name: str,
    count: int | None,
    gpu: bool,
    member: Member | None,
) -> Built:
    s = service.settings
    a.add("--served-model-name", served_name)
    a.add("--host", bind_host(service))
    a.add("--port", listen_port(service, PORTS["sglang"]))
    a.add("--tp-size", s.tensor_parallel_size or _multi(count))
    a.add("--dp-size", s.data_parallel_size)
    a.add("--ep-size", s.expert_parallel_size)
    if gpu:
        a.add("--mem-fraction-static", s.mem_fraction_static)
    a.add("--context-length", s.context_size)
    a.add("--quantization", s.quantization)
    a.mode("sglang", service.mode)
    return list(SGLANG_COMMAND), []


def _tgi(
    a: _Argv,
    service: InferenceServiceSpec,
    model: ModelSpec,
    served_name: str,
    count: int | None,
    gpu: bool,
    member: Member | None,
) -> Built:
    s = service.settings
    a.add("--hostname", bind_host(service))
    a.add("--port", listen_port(service, PORTS["tgi"]))
    a.add("--num-shard", _multi(count))
    a.add("--quantize", s.quantization)
    a.add("--dtype", s.dtype)
    a.add("--max-input-tokens", s.max_input_length)  # --max-input-length is deprecated
    a.add("--max-total-tokens", s.max_total_tokens)
    if gpu:
        a.add("--cuda-memory-fraction", s.cuda_memory_fraction)
    return [], []  # the image's entrypoint runs text-generation-launcher


def _llamacpp(
    a: _Argv,
    service: InferenceServiceSpec,
    model: ModelSpec,
    served_name: str,
    count: int | None,
    gpu: bool,
    member: Member | None,
) -> Built:
    s = service.settings
    a.add("--alias", served_name)
    a.add("--host", bind_host(service))
    a.add("--port", listen_port(service, PORTS["llamacpp"]))
    if gpu:
        layers = model.gpu.layers
        a.add("--n-gpu-layers", layers if layers and layers > 0 else ALL_LAYERS)
        if _multi(count):
            split_mode = SPLIT_MODES[model.gpu.sharding_strategy]
            a.add("--split-mode", split_mode)
            if split_mode != "none":
                a.add("--tensor-split", tensor_split(model.gpu.layer_split, count or 1))
    # CPU models too: llama.cpp's CPU backend has flash attention (unset: its "auto").
    if s.flash_attention is not None:
        a.add("--flash-attn", "on" if s.flash_attention else "off")
    a.add("--ctx-size", s.context_size)
    for name, value in llamacpp_field_flags(service.fields, a.user):
        a.add(name, value)
    a.add("--parallel", s.parallel_slots)
    a.toggle("--jinja", s.jinja)
    a.add("--cache-type-k", s.cache_type_k)
    a.add("--cache-type-v", s.cache_type_v)
    a.add("--cpu-moe", True if s.moe_cpu_offload else None)
    a.add("--n-cpu-moe", s.moe_cpu_layers)
    if s.no_kv_offload:
        a.toggle("--kv-offload", False)
    if s.no_warmup:
        a.toggle("--warmup", False)
    a.add("--batch-size", s.batch_size)
    a.add("--ubatch-size", s.ubatch_size)
    a.add("--reasoning-budget", s.reasoning_budget)
    a.repeat("--override-kv", s.metadata_overrides)
    a.repeat("--override-tensor", s.tensor_overrides)
    a.mode("llamacpp", service.mode)
    return [], []
