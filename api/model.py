"""Model v1alpha1: LLMKube's field shapes, defaults and enums, and the typed spec we read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from .common import CONDITIONS, LOCAL_REF, RESOURCE_CLAIMS, TOLERATIONS
from .errors import InvalidSpec
from .quantity import bytes_of
from .schema import Array, Bool, Free, Int, Num, Object, Quantity, Rule, Str, validate
from .source import (
    REPO_FILE_PATTERN,
    SOURCE_PATTERN,
    ModelSource,
    explain_file,
    explain_source,
    parse_source,
    source_errors,
)

ACCELERATORS = ("cpu", "metal", "cuda", "rocm", "intel", "vulkan")
GPU_ACCELERATORS = ("cuda", "rocm", "intel", "vulkan")
FORMATS = ("gguf", "mlx", "safetensors", "pytorch", "custom")
VENDORS = ("nvidia", "amd", "intel")
SHARDING_STRATEGIES = ("layer", "tensor", "row", "pipeline", "none")
MODEL_PHASES = ("Pending", "Downloading", "Copying", "Ready", "Failed")
MAX_GPU_COUNT = 8
SHA256_PATTERN = r"^[a-fA-F0-9]{64}$"
DIGEST_SOURCES = ("spec", "hub", "computed")


def _claims_xor_resource_name(gpu: dict[str, Any]) -> bool:
    return not (gpu.get("resourceClaims") and gpu.get("resourceName"))


GPU = Object(
    fields={
        "enabled": Bool(),
        "count": Int(minimum=0, maximum=MAX_GPU_COUNT),
        "memory": Str(),
        "vendor": Str(enum=VENDORS, default="nvidia"),
        "resourceName": Str(pattern=r"^[a-z0-9.\-]+/[a-z0-9._\-]+$"),
        # LLMKube's pattern: a taint key with a prefix (the GPU toleration's key).
        "tolerationKey": Str(pattern=r"^[a-z0-9.\-]+/[a-z0-9._\-]+$"),
        "runtime": Str(enum=("vulkan", "rocm")),
        "layers": Int(minimum=-1),
        "sharding": Object(
            fields={
                "strategy": Str(enum=SHARDING_STRATEGIES, default="layer"),
                # llama.cpp takes at most 15 --tensor-split parts.
                "layerSplit": Array(items=Str(pattern=r"^\d+-\d+$"), max_items=15),
            }
        ),
        "resourceClaims": RESOURCE_CLAIMS,
    },
    rules=(
        Rule(
            "!(has(self.resourceClaims) && size(self.resourceClaims) > 0 "
            "&& has(self.resourceName))",
            "resourceClaims and resourceName are mutually exclusive",
            _claims_xor_resource_name,
        ),
    ),
)

SPEC = Object(
    fields={
        "source": Str(pattern=SOURCE_PATTERN, min_length=1, explain=explain_source),
        "sha256": Str(pattern=SHA256_PATTERN),
        "sourceSecretRef": LOCAL_REF,
        "refreshPolicy": Str(enum=("IfNotPresent", "OnChange"), default="IfNotPresent"),
        "prefetch": Bool(),
        "prefetchTolerations": TOLERATIONS,
        "format": Str(enum=FORMATS, default="gguf"),
        "quantization": Str(),
        "hardware": Object(
            fields={
                "accelerator": Str(enum=ACCELERATORS, default="cpu"),
                "memoryBudget": Str(),
                "memoryFraction": Num(minimum=0, maximum=1),
                "gpu": GPU,
            }
        ),
        "resources": Object(fields={"cpu": Quantity(), "memory": Quantity()}),
        "files": Array(items=Str(min_length=1, pattern=REPO_FILE_PATTERN, explain=explain_file)),
        "mmproj": Str(pattern=REPO_FILE_PATTERN, explain=explain_file),
        # llmkube-py extension: a digest for each file of spec.files / spec.mmproj.
        "fileDigests": Array(
            items=Object(
                fields={
                    "file": Str(min_length=1, pattern=REPO_FILE_PATTERN, explain=explain_file),
                    "sha256": Str(pattern=SHA256_PATTERN),
                },
                required=("file", "sha256"),
            ),
            map_keys=("file",),
            description=(
                "The sha256 of files in spec.files or spec.mmproj (spec.sha256 pins files[0]): "
                "the loader refuses a download or cached copy with another digest."
            ),
        ),
    },
    required=("source",),
)

STATUS = Object(
    fields={
        "phase": Str(enum=MODEL_PHASES),
        "size": Str(),
        "path": Str(),
        "cacheKey": Str(),
        "sha256": Str(),
        "stagedFiles": Array(items=Free()),
        # llmkube-py extension: each staged file, its digest and who vouches for it.
        "files": Array(
            items=Object(
                fields={
                    "name": Str(),
                    "size": Int(fmt="int64"),
                    "sha256": Str(),
                    "digestSource": Str(
                        enum=DIGEST_SOURCES,
                        description=(
                            "spec: pinned by spec.sha256 / spec.fileDigests; hub: the hub's "
                            "X-Linked-Etag; computed: hashed by the loader, vouched for by none."
                        ),
                    ),
                }
            )
        ),
        "filesOmitted": Int(
            description="Staged files left out of status.files (the loader's report is capped)."
        ),
        "sourceETag": Str(),
        "sourceContentLength": Int(fmt="int64"),
        "lastRevalidated": Str(),
        "acceleratorReady": Bool(),
        "gguf": Object(
            fields={
                "architecture": Str(),
                "modelName": Str(),
                "quantization": Str(),
                "contextLength": Int(fmt="int64"),
                "embeddingSize": Int(fmt="int64"),
                "layerCount": Int(fmt="int64"),
                "headCount": Int(fmt="int64"),
                "tensorCount": Int(fmt="int64"),
                "fileVersion": Int(fmt="int64"),
                "license": Str(),
            }
        ),
        "lastUpdated": Str(),
        "observedGeneration": Int(fmt="int64"),
        # llmkube-py extension: how the GPUs reach the pod, as resolved.
        "gpu": Object(
            fields={
                "count": Int(),
                "attachment": Str(enum=("dra", "device-plugin", "none")),
                "devicesPerPod": Int(
                    description="Devices per pod from the claims; 0: none, or known at allocation."
                ),
                "deviceClasses": Array(items=Str()),
                "extendedResourceClass": Str(
                    description="KEP-5004: the DeviceClass serving the device-plugin limit."
                ),
                "claims": Array(
                    items=Object(
                        fields={
                            "name": Str(),
                            "resourceClaimName": Str(),
                            "resourceClaimTemplateName": Str(),
                        }
                    )
                ),
            }
        ),
        "conditions": CONDITIONS,
    }
)


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
    enabled: bool | None = None  # None = not set; an explicit false means no GPU
    count: int = 0  # 0 = not set
    vendor: str = "nvidia"
    resource_name: str | None = None
    toleration_key: str | None = None
    layers: int | None = None
    sharding_strategy: str = "layer"
    layer_split: tuple[str, ...] = ()
    claims: tuple[ClaimRef, ...] = ()
    memory_bytes: int = 0  # hardware.gpu.memory: one GPU's memory (0: not said)


@dataclass(frozen=True)
class ModelSpec:
    source: str
    format: str = "gguf"
    accelerator: str = "cpu"
    gpu: GPUSpec = field(default_factory=GPUSpec)
    cpu: str | None = None
    memory: str | None = None
    source_secret: str | None = None  # sourceSecretRef.name
    sha256: str | None = None  # lower-case hex: the primary file's expected digest
    refresh_policy: str = "IfNotPresent"
    prefetch: bool = False
    prefetch_tolerations: tuple[dict[str, Any], ...] = ()
    files: tuple[str, ...] = ()  # files[0] is the primary file
    mmproj: str | None = None
    file_digests: tuple[tuple[str, str], ...] = ()  # (file, lower-case sha256): fileDigests

    @property
    def cache_key(self) -> str:
        """Where the loader stages this Model in the cache: from the spec alone (the
        controller fetches nothing), so every replica and restart finds the same files."""
        canonical = "\n".join((self.source, *self.files, f"mmproj={self.mmproj or ''}"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def staged_files(self) -> tuple[str, ...]:
        """files, then mmproj if it is not one of them (LLMKube's staging plan)."""
        extra = (self.mmproj,) if self.mmproj and self.mmproj not in self.files else ()
        return (*self.files, *extra)

    def pinned_sha256(self, index: int) -> str | None:
        """The digest spec pins for the index-th staged file (files[0]: spec.sha256 or its
        fileDigests entry; a one-file source: spec.sha256), or None."""
        if index == 0 and self.sha256:
            return self.sha256
        names = self.staged_files
        name = names[index] if index < len(names) else None
        return dict(self.file_digests).get(name) if name else None

    @property
    def location(self) -> ModelSource:
        """The parsed source (parse_model has refused one that does not parse)."""
        return parse_source(self.source)

    @property
    def uses_claims(self) -> bool:
        return bool(self.gpu.claims)

    @property
    def is_gpu_model(self) -> bool:
        """Whether the Model alone asks for a GPU (see has_gpu for the service's view)."""
        return has_gpu(self, None)


def has_gpu(model: ModelSpec, isvc_gpu: int | None) -> bool:
    """LLMKube's hasGPUPresent, on the guide's terms.

    Claims make a GPU model even without count. Otherwise `gpu.enabled: false` or
    `accelerator: cpu` (the default) / `metal` mean no GPU in the cluster; with a GPU
    accelerator, `enabled: true` or a GPU count (LLMKube's GPUCount) make one.
    """
    if model.uses_claims:
        return True
    if model.accelerator in ("cpu", "metal") or model.gpu.enabled is False:
        return False
    return bool(model.gpu.enabled) or gpu_count(model, isvc_gpu) > 0


def gpu_count(model: ModelSpec, isvc_gpu: int | None) -> int:
    """LLMKube's GPUCount: hardware.gpu.count if > 0, else the service's resources.gpu, else 0."""
    if model.gpu.count > 0:
        return model.gpu.count
    return isvc_gpu or 0


def _layer_split_errors(data: dict[str, Any]) -> list[str]:
    """Ranges "first-last" must not run backwards (the pattern checks their form)."""
    sharding = ((data.get("hardware") or {}).get("gpu") or {}).get("sharding") or {}
    errors = []
    for i, r in enumerate(sharding.get("layerSplit") or []):
        lo, hi = (int(x) for x in r.split("-", 1))
        if lo > hi:
            errors.append(
                f"spec.hardware.gpu.sharding.layerSplit[{i}]: {r!r}: first layer after last layer"
            )
    return errors


def _source_errors(data: dict[str, Any]) -> list[str]:
    source = data["source"]
    errors = source_errors(source)
    if not errors and parse_source(source).kind == "s3" and not data.get("sourceSecretRef"):
        errors.append(
            "spec.sourceSecretRef: an s3:// source needs a Secret with AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (optional AWS_REGION, AWS_ENDPOINT_URL, AWS_SESSION_TOKEN): "
            "the loader signs its request with them"
        )
    return errors


def _memory_errors(data: dict[str, Any]) -> list[str]:
    """hardware.gpu.memory is what a GPUQuota's vramBytes charges: it must say a size."""
    memory = ((data.get("hardware") or {}).get("gpu") or {}).get("memory")
    if memory and bytes_of(memory) is None:
        return [f"spec.hardware.gpu.memory: {memory!r} is not a size (e.g. 80Gi, 24GB)"]
    return []


def _file_errors(data: dict[str, Any]) -> list[str]:
    """Each name is checked by its pattern (REPO_FILE_PATTERN); here, the set of them."""
    files = list(data.get("files") or [])
    mmproj = data.get("mmproj")
    errors = []
    if mmproj and not files:
        errors.append("spec.mmproj: spec.files must name the primary model file (files[0]) too")
    if (files or mmproj) and not errors:
        kind = parse_source(data["source"])
        if kind.kind not in ("hub", "url", "s3") or kind.quant:
            errors.append(
                "spec.files: multi-file staging needs an hf://org/repo[@rev] (or org/repo) source, "
                "or an http(s) or s3:// base the files are under"
            )
    return errors + _digest_errors(data)


def _digest_errors(data: dict[str, Any]) -> list[str]:
    """fileDigests name staged files, and agree with spec.sha256 on files[0]."""
    files = list(data.get("files") or [])
    staged = [*files, *([data["mmproj"]] if data.get("mmproj") else [])]
    sha = (data.get("sha256") or "").lower()
    errors = []
    for i, entry in enumerate(data.get("fileDigests") or []):
        where = f"spec.fileDigests[{i}].file"
        name = entry["file"]
        if name not in staged:
            named = ", ".join(staged) if staged else "none (the Model stages one file)"
            errors.append(
                f"{where}: {name!r} is not a file of spec.files or spec.mmproj (they name: "
                f"{named}); pin a one-file source with spec.sha256"
            )
        elif files and name == files[0] and sha and entry["sha256"].lower() != sha:
            errors.append(
                f"{where}: {name!r} is files[0], which spec.sha256 pins to another digest "
                f"({sha}): give one of them"
            )
    return errors


def parse_model(spec: Any) -> ModelSpec:
    """The typed Model spec, or InvalidSpec listing every problem with its field path."""
    data, errors = validate(SPEC, spec, "spec")
    errors = errors or _layer_split_errors(data) + _source_errors(data) + _memory_errors(data)
    errors = errors or _file_errors(data)
    if errors:
        raise InvalidSpec(errors)
    hardware = data.get("hardware") or {}
    g = hardware.get("gpu") or {}
    sharding = g.get("sharding") or {}
    claims = tuple(
        ClaimRef(c["name"], c.get("resourceClaimName"), c.get("resourceClaimTemplateName"))
        for c in g.get("resourceClaims") or []
    )
    resources = data.get("resources") or {}
    return ModelSpec(
        source=data["source"],
        format=data.get("format", "gguf"),
        accelerator=hardware.get("accelerator", "cpu"),
        gpu=GPUSpec(
            enabled=g.get("enabled"),
            count=g.get("count") or 0,
            vendor=g.get("vendor", "nvidia"),
            resource_name=g.get("resourceName"),
            toleration_key=g.get("tolerationKey"),
            layers=g.get("layers"),
            sharding_strategy=sharding.get("strategy", "layer"),
            layer_split=tuple(sharding.get("layerSplit") or ()),
            claims=claims,
            memory_bytes=(bytes_of(g["memory"]) or 0) if g.get("memory") else 0,
        ),
        cpu=resources.get("cpu"),
        memory=resources.get("memory"),
        source_secret=(data.get("sourceSecretRef") or {}).get("name"),
        sha256=(data.get("sha256") or "").lower() or None,
        refresh_policy=data.get("refreshPolicy", "IfNotPresent"),
        prefetch=bool(data.get("prefetch")),
        prefetch_tolerations=tuple(data.get("prefetchTolerations") or ()),
        files=tuple(data.get("files") or ()),
        mmproj=data.get("mmproj") or None,
        file_digests=tuple((d["file"], d["sha256"].lower()) for d in data.get("fileDigests") or ()),
    )
