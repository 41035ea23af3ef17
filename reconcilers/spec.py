"""Typed specs of Model, InferenceService and GPUQuota, and the rules they must satisfy.

This is the one place the rules live: the reconcilers report them as conditions and
the validating webhook rejects the same objects at admission.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .fields import FieldReader

GPU_ACCELERATORS = ("cuda", "rocm", "oneapi", "xpu", "vulkan")
ACCELERATORS = (*GPU_ACCELERATORS, "cpu", "metal")
VENDORS = ("nvidia", "amd", "intel")
SHARING_MODES = ("exclusive", "partitioned", "shared")
RUNTIMES = ("vllm", "sglang", "tgi", "llamacpp")
FORMATS = ("gguf", "safetensors", "pytorch", "onnx")
SPLIT_MODES = ("none", "layer", "row")
MAX_GPUS = 64  # per pod; larger counts are typos, not hardware


class InvalidSpec(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class ClaimRef:
    """One pod-level claim: a shared ResourceClaim or a per-pod ResourceClaimTemplate."""

    name: str
    claim_name: str | None = None
    template_name: str | None = None

    def pod_entry(self) -> dict[str, str]:
        entry = {"name": self.name}
        if self.claim_name:
            entry["resourceClaimName"] = self.claim_name
        if self.template_name:
            entry["resourceClaimTemplateName"] = self.template_name
        return entry


@dataclass(frozen=True)
class GPUSpec:
    enabled: bool = False
    vendor: str = "nvidia"
    count: int | None = None
    resource_name: str | None = None
    sharing: str = "exclusive"
    claims: tuple[ClaimRef, ...] = ()


@dataclass(frozen=True)
class ModelSpec:
    source: str
    format: str | None = None
    accelerator: str | None = None
    gpu: GPUSpec = field(default_factory=GPUSpec)
    multi_node_nodes: tuple[str, ...] = ()

    @property
    def uses_claims(self) -> bool:
        return bool(self.gpu.claims)

    @property
    def is_gpu_model(self) -> bool:
        """Claims make a GPU model even without count: it gets GPU runtime flags."""
        return self.gpu.enabled or self.uses_claims or (self.accelerator in GPU_ACCELERATORS)

    @property
    def multi_node(self) -> bool:
        return bool(self.multi_node_nodes)


def parse_model(spec: Any) -> ModelSpec:
    errors: list[str] = []
    r = FieldReader(spec, "spec", errors)
    source = r.text("source", required=True) or ""
    fmt = r.text("format", choices=FORMATS)
    hardware = r.child("hardware")
    accelerator = hardware.text("accelerator", choices=ACCELERATORS)
    g = hardware.child("gpu")
    claims = []
    seen: set[str] = set()
    for entry in g.objects("resourceClaims"):
        name = entry.text("name", required=True)
        claim_name = entry.text("resourceClaimName")
        template_name = entry.text("resourceClaimTemplateName")
        if (claim_name is None) == (template_name is None):
            errors.append(
                f"{entry.path}: set exactly one of resourceClaimName and resourceClaimTemplateName"
            )
        if name and name in seen:
            errors.append(f"{entry.path}.name: duplicate claim name {name!r}")
        if name:
            seen.add(name)
            claims.append(ClaimRef(name, claim_name, template_name))
    gpu = GPUSpec(
        enabled=g.boolean("enabled"),
        vendor=g.text("vendor", choices=VENDORS) or "nvidia",
        count=g.integer("count", minimum=1, maximum=MAX_GPUS),
        resource_name=g.text("resourceName"),
        sharing=g.text("gpuSharing", choices=SHARING_MODES) or "exclusive",
        claims=tuple(claims),
    )
    mn = r.child("multiNode")
    nodes = mn.strings("nodes")
    if r.has("multiNode") and not nodes:
        errors.append("spec.multiNode.nodes: list the nodes to pin member pods to")
    model = ModelSpec(source, fmt, accelerator, gpu, nodes)
    errors.extend(model_rule_errors(model))
    if errors:
        raise InvalidSpec(errors)
    return model


def model_rule_errors(m: ModelSpec) -> list[str]:
    """The combinations the seed guide forbids."""
    errors = []
    if m.uses_claims and m.gpu.resource_name:
        errors.append("spec.hardware.gpu: resourceClaims and resourceName are mutually exclusive")
    if m.uses_claims and m.gpu.sharing != "exclusive":
        errors.append(
            f"spec.hardware.gpu.gpuSharing: {m.gpu.sharing!r} cannot be combined with "
            "resourceClaims: the claim owns device placement; use exclusive or drop the field"
        )
    if m.uses_claims and m.multi_node:
        errors.append(
            "spec.multiNode: cannot be combined with resourceClaims: member pods pinned with "
            "nodeName bypass the scheduler that allocates DRA claims; run DRA models single-node"
        )
    if m.gpu.sharing == "partitioned" and not m.uses_claims and not m.gpu.resource_name:
        errors.append(
            "spec.hardware.gpu.resourceName: gpuSharing partitioned needs the partition's "
            "resource name (for example nvidia.com/mig-1g.10gb)"
        )
    if m.accelerator == "cpu" and (m.gpu.enabled or m.uses_claims):
        errors.append("spec.hardware.accelerator: cpu contradicts a GPU request")
    return errors


@dataclass(frozen=True)
class RuntimeSettings:
    """Explicit per-runtime settings; None means "derive it"."""

    tensor_parallel_size: int | None = None
    gpu_memory_utilization: float | None = None
    cpu_offload_gb: float | None = None
    max_model_len: int | None = None
    mem_fraction_static: float | None = None
    num_shard: int | None = None
    n_gpu_layers: int | None = None
    split_mode: str | None = None
    tensor_split: str | None = None
    context_size: int | None = None


@dataclass(frozen=True)
class InferenceServiceSpec:
    model_ref: str
    runtime: str
    replicas: int = 1
    image: str | None = None
    gpu: int | None = None  # spec.resources.gpu
    cpu: str | None = None
    memory: str | None = None
    settings: RuntimeSettings = field(default_factory=RuntimeSettings)
    extra_args: tuple[str, ...] = ()


def parse_inference_service(spec: Any) -> InferenceServiceSpec:
    errors: list[str] = []
    r = FieldReader(spec, "spec", errors)
    model_ref = r.text("modelRef", required=True) or ""
    runtime = r.text("runtime", choices=RUNTIMES) or "llamacpp"
    replicas = r.integer("replicas", minimum=0, maximum=1000)
    res = r.child("resources")
    vllm, sglang, tgi, llama = (
        r.child("vllmConfig"),
        r.child("sglangConfig"),
        r.child("tgiConfig"),
        r.child("llamacppConfig"),
    )
    tensor_split = llama.data.get("tensorSplit")
    if isinstance(tensor_split, list):
        tensor_split = ",".join(str(v) for v in tensor_split)
    elif tensor_split is not None and not isinstance(tensor_split, str):
        errors.append("spec.llamacppConfig.tensorSplit: must be a string or a list")
        tensor_split = None
    settings = RuntimeSettings(
        tensor_parallel_size=(
            vllm.integer("tensorParallelSize", minimum=1, maximum=MAX_GPUS)
            if runtime == "vllm"
            else sglang.integer("tensorParallelSize", minimum=1, maximum=MAX_GPUS)
        ),
        gpu_memory_utilization=vllm.number("gpuMemoryUtilization", above=0, maximum=1),
        cpu_offload_gb=vllm.number("cpuOffloadGB", minimum=0),
        max_model_len=vllm.integer("maxModelLen", minimum=1),
        mem_fraction_static=sglang.number("memFractionStatic", above=0, maximum=1),
        num_shard=tgi.integer("numShard", minimum=1, maximum=MAX_GPUS),
        n_gpu_layers=llama.integer("nGpuLayers", minimum=-1),
        split_mode=llama.text("splitMode", choices=SPLIT_MODES),
        tensor_split=tensor_split,
        context_size=llama.integer("contextSize", minimum=1),
    )
    parsed = InferenceServiceSpec(
        model_ref=model_ref,
        runtime=runtime,
        replicas=1 if replicas is None else replicas,
        image=r.text("image"),
        gpu=res.integer("gpu", minimum=0, maximum=MAX_GPUS),
        cpu=res.text("cpu"),
        memory=res.text("memory"),
        settings=settings,
        extra_args=r.strings("extraArgs"),
    )
    if errors:
        raise InvalidSpec(errors)
    return parsed


@dataclass(frozen=True)
class GPUQuotaSpec:
    limit: int


def parse_gpu_quota(spec: Any) -> GPUQuotaSpec:
    errors: list[str] = []
    r = FieldReader(spec, "spec", errors)
    limit = r.integer("limit", minimum=0)
    if limit is None and not errors:
        errors.append("spec.limit: required")
    if errors:
        raise InvalidSpec(errors)
    assert limit is not None
    return GPUQuotaSpec(limit)
