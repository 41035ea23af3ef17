"""InferenceService v1alpha1: LLMKube's field shapes, and the typed spec we read.

Every field of LLMKube's contract is in the schema, so the apiserver stores it; the
typed spec holds what llmkube-py acts on (docs/api.md: "LLMKube field -> what llmkube-py does").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .autoscaling import Autoscaling, parse_autoscaling
from .common import CONDITIONS, ENV, LABELS, LOCAL_REF, SECRET_KEY_REF, TOLERATIONS
from .errors import InvalidSpec
from .integrations import (
    GATEWAY,
    SLO,
    GatewayExposure,
    ServiceLevelObjective,
    parse_gateway,
    parse_slo,
)
from .model import MAX_GPU_COUNT, ModelSpec
from .podfields import ROPE_FACTOR_PATTERN, ROPE_TYPES, PodFields, parse_pod_fields
from .schema import (
    Array,
    Bool,
    Int,
    Num,
    Object,
    Opaque,
    Quantity,
    Rule,
    Str,
    StrMap,
    validate,
)
from .source import runtime_source_errors

RUNTIMES = ("llamacpp", "llamacpp-router", "personaplex", "vllm", "tgi", "sglang", "generic")
SERVED_RUNTIMES = ("vllm", "sglang", "tgi", "llamacpp")
MODES = ("chat", "embedding", "rerank")
MODE_PATHS = {"chat": "/v1/chat/completions", "embedding": "/v1/embeddings", "rerank": "/v1/rerank"}
SHARING_MODES = ("exclusive", "shared", "partitioned")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
PRIORITIES = ("critical", "high", "normal", "low", "batch")
ISVC_PHASES = (
    "Pending",
    "Creating",
    "Progressing",
    "Ready",
    "WaitingForGPU",
    "Stopped",
    "Suspended",
    "Failed",
)
MAX_REPLICAS = 10
# llama.cpp's --cache-type-k/-v choices (common/arg.cpp kv_cache_types, the same at the
# pinned b10068 and at b11312, where tests/data/runtime-options/llamacpp.json was read);
# LLMKube's CRD enum is this less bf16. Any other value exits llama-server ("Unsupported
# cache type"); tests/unit/test_llama_server_real.py reads the list off the binary's --help.
LLAMACPP_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
# The quantized ones: a quantized V cache needs flash attention.
LLAMACPP_QUANTIZED_CACHE_TYPES = ("q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
DEFAULT_PORT = 8080

_PROBE = Opaque(description="corev1.Probe")


def _multinode_single_replica(spec: dict[str, Any]) -> bool:
    return "multiNode" not in spec or spec.get("replicas", 1) <= 1


def _multinode_vllm(spec: dict[str, Any]) -> bool:
    return "multiNode" not in spec or spec.get("runtime") == "vllm"


def _head_address(mn: dict[str, Any]) -> bool:
    members = mn.get("members") or [{}]
    return bool((members[0].get("fabric") or {}).get("address"))


def _partitioned_profile(sharing: dict[str, Any]) -> bool:
    return sharing.get("mode") != "partitioned" or bool(sharing.get("profile"))


def _memory_limit_shared(sharing: dict[str, Any]) -> bool:
    return "memoryLimitGiB" not in sharing or sharing.get("mode") == "shared"


def _quantized_v_with_flash_attention(spec: dict[str, Any]) -> bool:
    """llama.cpp exits on a quantized V cache with flash attention off ("quantized V
    cache requires flash_attn"); unset (auto) turns it on where the device can."""
    return (
        spec.get("runtime", "llamacpp") != "llamacpp"
        or spec.get("flashAttention") is not False
        or spec.get("cacheTypeV") not in LLAMACPP_QUANTIZED_CACHE_TYPES
    )


RUNTIME_CONFIG_NOTE = (
    "LLMKube's set of options is larger than the fields typed here; unknown ones are kept."
)

VLLM_CONFIG = Object(
    fields={
        "tensorParallelSize": Int(minimum=1, maximum=64),
        "pipelineParallelSize": Int(minimum=1, maximum=64),
        "maxModelLen": Int(minimum=1),
        "quantization": Str(),
        "dtype": Str(),
        "kvCacheDtype": Str(),
        "enablePrefixCaching": Bool(),
        "enableChunkedPrefill": Bool(),
        "maxNumBatchedTokens": Int(minimum=1),
        "attentionBackend": Str(),
        "enableExpertParallel": Bool(),
        "cpuOffloadGB": Num(minimum=0),
        "gpuMemoryUtilization": Num(minimum=0, exclusive_minimum=True, maximum=1),
        "hfTokenSecretRef": SECRET_KEY_REF,
    },
    preserve=True,
    description=RUNTIME_CONFIG_NOTE,
)
SGLANG_CONFIG = Object(
    fields={
        "tensorParallelSize": Int(minimum=1, maximum=64),
        "dataParallelSize": Int(minimum=1, maximum=64),
        "expertParallelSize": Int(minimum=1, maximum=64),
        "contextLength": Int(minimum=1),
        "memFractionStatic": Num(minimum=0, exclusive_minimum=True, maximum=1),
        "quantization": Str(),
        "hfTokenSecretRef": SECRET_KEY_REF,
    },
    preserve=True,
    description=RUNTIME_CONFIG_NOTE,
)
TGI_CONFIG = Object(
    fields={
        "quantize": Str(),
        "maxInputLength": Int(minimum=1),
        "maxTotalTokens": Int(minimum=1),
        "dtype": Str(),
        "hfTokenSecretRef": SECRET_KEY_REF,
    },
    preserve=True,
    description=RUNTIME_CONFIG_NOTE,
)

SPEC = Object(
    fields={
        "modelRef": Str(min_length=1),
        "runtime": Str(enum=RUNTIMES, default="llamacpp"),
        "mode": Str(enum=MODES),
        "replicas": Int(minimum=0, maximum=MAX_REPLICAS, default=1),
        "suspend": Bool(),
        "revisionHistoryLimit": Int(minimum=0),
        "autoscaling": Object(
            fields={
                "minReplicas": Int(minimum=0),
                "maxReplicas": Int(minimum=1),
                "metrics": Array(
                    items=Object(
                        fields={
                            "type": Str(enum=("Pods", "Resource")),
                            "name": Str(),
                            "targetAverageValue": Str(),
                            "targetAverageUtilization": Int(minimum=1),
                        }
                    )
                ),
            }
        ),
        "image": Str(min_length=1),
        "endpoint": Object(
            fields={
                "port": Int(minimum=1, maximum=65535, default=DEFAULT_PORT),
                "path": Str(pattern=r"^/"),
                "type": Str(enum=SERVICE_TYPES, default="ClusterIP"),
                "nodePort": Int(minimum=30000, maximum=32767),
                "gateway": GATEWAY,
            }
        ),
        "resources": Object(
            fields={
                "gpu": Int(minimum=0, maximum=MAX_GPU_COUNT),
                "cpu": Quantity(),
                "memory": Quantity(),
                "hostMemory": Quantity(),
                "ephemeralStorage": Quantity(),
                "gpuMemory": Quantity(description="Accepted for LLMKube compatibility; no effect."),
                "gpuSharing": Object(
                    fields={
                        "mode": Str(enum=SHARING_MODES, default="exclusive"),
                        "profile": Str(),
                        "memoryLimitGiB": Int(minimum=1),
                    },
                    rules=(
                        Rule(
                            "!has(self.mode) || self.mode != 'partitioned' || has(self.profile)",
                            "partitioned needs a profile (e.g. 1g.10gb)",
                            _partitioned_profile,
                        ),
                        Rule(
                            "!has(self.memoryLimitGiB) || "
                            "(has(self.mode) && self.mode == 'shared')",
                            "memoryLimitGiB is only valid when mode is shared",
                            _memory_limit_shared,
                        ),
                    ),
                ),
            }
        ),
        "tolerations": TOLERATIONS,
        "nodeSelector": StrMap(),
        "podAnnotations": LABELS,
        "podLabels": LABELS,
        "topologySpreadConstraints": Opaque(kind="array"),
        "affinity": Opaque(description="corev1.Affinity"),
        "runtimeClassName": Str(),
        "imagePullSecrets": Array(items=LOCAL_REF),
        "priority": Str(enum=PRIORITIES, default="normal"),
        "priorityClassName": Str(),
        "evictionProtection": Bool(),
        # llama.cpp typed fields
        "contextSize": Int(minimum=128, maximum=2097152),
        "ropeScaling": Object(
            fields={
                # LLMKube's enum (linear, yarn, longrope) and llama.cpp's `none`; b10068's
                # --rope-scaling has no longrope: refused at parse (podfields.py).
                "type": Str(enum=ROPE_TYPES),
                # LLMKube's shape: a decimal string (no float pitfalls), llama.cpp's
                # --rope-scale value as written.
                "factor": Str(pattern=ROPE_FACTOR_PATTERN),
                "originalContext": Int(minimum=1),
            }
        ),
        "parallelSlots": Int(minimum=1),
        "flashAttention": Bool(),
        "jinja": Bool(),
        "cacheTypeK": Str(enum=LLAMACPP_CACHE_TYPES),
        "cacheTypeV": Str(enum=LLAMACPP_CACHE_TYPES),
        "cacheTypeCustomK": Str(),
        "cacheTypeCustomV": Str(),
        "moeCPUOffload": Bool(),
        "moeCPULayers": Int(minimum=0),
        "noKvOffload": Bool(),
        "noWarmup": Bool(),
        "speculativeDecoding": Object(
            fields={
                "type": Str(),
                "draftModelRef": Str(),
                "draftModel": Str(),
                "nDraftMax": Int(minimum=1),
                "pMin": Num(minimum=0, maximum=1),
            }
        ),
        "reasoningBudget": Int(minimum=-1),
        "reasoningBudgetMessage": Str(),
        "metadataOverrides": Array(items=Str()),
        "tensorOverrides": Array(items=Str()),
        "batchSize": Int(minimum=1),
        "uBatchSize": Int(minimum=1),
        # oMLX (metal agent)
        "turboQuantBits": Int(minimum=1),
        "pagedSSDCacheDir": Str(),
        "hotCacheMaxSize": Str(),
        "pagedSSDCacheMaxSize": Str(),
        # container
        "extraArgs": Array(items=Str()),
        "command": Array(items=Str()),
        "args": Array(items=Str()),
        "env": ENV,
        "extraVolumes": Opaque(kind="array"),
        "extraVolumeMounts": Opaque(kind="array"),
        "containerPort": Int(minimum=1, maximum=65535),
        "bindAddress": Str(default="::"),
        "probeOverrides": Object(
            fields={"startup": _PROBE, "liveness": _PROBE, "readiness": _PROBE}
        ),
        "skipModelInit": Bool(),
        "podSecurityContext": Opaque(description="corev1.PodSecurityContext"),
        "securityContext": Opaque(description="corev1.SecurityContext"),
        "modelCache": Object(
            fields={"persistence": Str(enum=("Cached", "Ephemeral")), "claimName": Str()}
        ),
        "personaPlexConfig": Object(preserve=True),
        "vllmConfig": VLLM_CONFIG,
        "tgiConfig": TGI_CONFIG,
        "sglangConfig": SGLANG_CONFIG,
        "disruption": Object(
            fields={"protectStartup": Bool(default=True), "protectAlways": Bool()}
        ),
        "rolloutPolicy": Object(
            fields={
                "waitForIdle": Bool(),
                "idleTimeoutSeconds": Int(minimum=0, default=300),
                "force": Bool(),
            }
        ),
        "slo": SLO,
        "maxPodLifetimeSeconds": Int(minimum=0, fmt="int64"),
        "maxPodLifetimeIdleTimeoutSeconds": Int(minimum=0, fmt="int64"),
        "multiNode": Object(
            fields={
                "members": Array(
                    items=Object(
                        fields={
                            "node": Str(min_length=1),
                            "fabric": Object(
                                fields={
                                    "address": Str(),
                                    "socketInterface": Str(),
                                    "ibHCA": Str(),
                                }
                            ),
                            "modelCache": Object(fields={"claimName": Str()}),
                        },
                        required=("node",),
                    ),
                    min_items=2,
                    max_items=64,
                ),
                "rdmaResource": Str(),
                "ibGIDIndex": Int(minimum=0),
                "rendezvousPort": Int(minimum=1, maximum=65535, default=29500),
            },
            required=("members",),
            rules=(
                Rule(
                    "size(self.members) == 0 || (has(self.members[0].fabric) && "
                    "has(self.members[0].fabric.address))",
                    "members[0].fabric.address is required (the head's address)",
                    _head_address,
                ),
            ),
        ),
    },
    required=("modelRef",),
    rules=(
        Rule(
            "!has(self.multiNode) || !has(self.replicas) || self.replicas <= 1",
            "multiNode: replicas must be at most 1",
            _multinode_single_replica,
        ),
        Rule(
            "!has(self.multiNode) || (has(self.runtime) && self.runtime == 'vllm')",
            "multiNode: only runtime vllm is supported",
            _multinode_vllm,
        ),
        Rule(
            "(has(self.runtime) && self.runtime != 'llamacpp') || !has(self.flashAttention) || "
            "self.flashAttention || !has(self.cacheTypeV) || !(self.cacheTypeV in "
            f"{list(LLAMACPP_QUANTIZED_CACHE_TYPES)})",
            "a quantized V cache needs flash attention in llama.cpp, and flashAttention is "
            "false: set it true (or leave it unset), or use cacheTypeV f16, bf16 or f32",
            _quantized_v_with_flash_attention,
            field_path=".cacheTypeV",
        ),
    ),
)

STATUS = Object(
    fields={
        "phase": Str(enum=ISVC_PHASES),
        "mode": Str(),
        "acceleration": Object(
            fields={"device": Str(), "layersOffloaded": Int(), "layersTotal": Int()}
        ),
        "readyReplicas": Int(),
        "desiredReplicas": Int(),
        "replicas": Int(description="Pods currently running (the scale subresource's status)."),
        "selector": Str(description="Label selector of the pods (the scale subresource's)."),
        "endpoint": Str(),
        "modelReady": Bool(),
        "lastUpdated": Str(),
        "schedulingStatus": Str(),
        "schedulingMessage": Str(),
        "queuePosition": Int(),
        "waitingFor": Str(),
        "effectivePriority": Str(),
        "gateway": Object(
            fields={
                "routeReady": Bool(),
                "modelName": Str(),
                "endpoint": Str(),
                "authEnabled": Bool(),
            }
        ),
        "multiNode": Object(
            fields={
                "size": Int(),
                "readyMembers": Int(),
                "members": Array(
                    items=Object(
                        fields={
                            "rank": Int(),
                            "node": Str(),
                            "pod": Str(),
                            "phase": Str(),
                            "ready": Bool(),
                            "restarts": Int(),
                        }
                    )
                ),
            }
        ),
        "observedGeneration": Int(fmt="int64"),
        # llmkube-py extensions (docs/api.md names them): quota and GPU attachment as resolved.
        "admittedReplicas": Int(),
        "restarts": Int(
            description="Restarts of the runtime container, summed over the current pods."
        ),
        "gpusPerReplica": Int(),
        "gpuAttachment": Str(enum=("dra", "device-plugin", "none")),
        "model": Str(),
        "runtime": Str(),
        "allocation": Object(
            description="What DRA allocated to the pods' claims (Models with claims only).",
            fields={
                "expectedDevices": Int(description="Devices the current pods should hold."),
                "allocatedDevices": Int(description="Devices allocated to the pods' claims."),
                "allocatedPods": Int(description="Pods whose claims are all allocated."),
                "requestedPerPod": Int(
                    description="Devices one pod's claims ask for (absent when unknown)."
                ),
                "devicesPerPod": Int(
                    description="Devices one allocated pod holds, kept while no pod is "
                    "allocated and the claims ask for the same; what a GPUQuota charges."
                ),
                "summary": Str(description="allocatedDevices/expectedDevices"),
                "pods": Array(
                    items=Object(
                        fields={
                            "name": Str(),
                            "devices": Array(
                                items=Object(
                                    fields={
                                        "claim": Str(),
                                        "request": Str(),
                                        "driver": Str(),
                                        "pool": Str(),
                                        "device": Str(),
                                        "productName": Str(
                                            description="The device's productName, as its "
                                            "ResourceSlice publishes it."
                                        ),
                                        "memory": Str(
                                            description="The device's memory capacity, as its "
                                            "ResourceSlice publishes it."
                                        ),
                                    }
                                )
                            ),
                        }
                    )
                ),
            },
        ),
        "managedClaims": Object(
            description="The ResourceClaimTemplate the controller made for a Model that "
            "names no resourceClaims where the GPUs are reachable only through DRA.",
            fields={
                "template": Str(description="The template's name (owned by the service)."),
                "deviceClass": Str(),
                "count": Int(description="Devices one pod's claim asks for."),
                "selectors": Array(items=Str(), description="Its CEL selectors (ANDed)."),
                "sharing": Str(
                    description="gpuSharing.mode as served through DRA: exclusive, shared "
                    "(a share of a device's memory) or partitioned (partition devices)."
                ),
                "memory": Str(
                    description="shared: the memory capacity each device's share consumes."
                ),
                "memoryFraction": Num(
                    description="shared: the fraction of the device's memory the runtime "
                    "preallocates (vLLM, SGLang, TGI)."
                ),
            },
        ),
        "kueue": Object(
            description="What Kueue's pod integration will see (kueue.x-k8s.io/queue-name).",
            fields={
                "queueName": Str(),
                "admissible": Bool(),
                "replicas": Int(),
                "devices": Array(
                    items=Object(
                        fields={
                            "deviceClass": Str(),
                            "resource": Str(description="Kueue's resource; empty: unmapped."),
                            "perPod": Int(),
                            "total": Int(),
                        }
                    )
                ),
                "summary": Str(description="The charge per Kueue resource, e.g. gpus: 4."),
            },
        ),
        "conditions": CONDITIONS,
    }
)


@dataclass(frozen=True)
class GPUSharing:
    mode: str = "exclusive"
    profile: str | None = None
    memory_limit_gib: int | None = None


@dataclass(frozen=True)
class MultiNodeMember:
    node: str
    address: str | None = None
    socket_interface: str | None = None
    ib_hca: str | None = None


@dataclass(frozen=True)
class MultiNode:
    members: tuple[MultiNodeMember, ...]
    rendezvous_port: int = 29500


@dataclass(frozen=True)
class Endpoint:
    port: int = DEFAULT_PORT
    path: str | None = None  # None: the mode's default path
    type: str = "ClusterIP"
    node_port: int | None = None


@dataclass(frozen=True)
class RuntimeSettings:
    """Explicit per-runtime settings; None means "derive it" or "leave the runtime's default".

    Only the section of spec.runtime is read (vllmConfig for vllm, and so on).
    """

    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None  # vLLM
    data_parallel_size: int | None = None  # SGLang
    expert_parallel_size: int | None = None  # SGLang
    gpu_memory_utilization: float | None = None
    cpu_offload_gb: float | None = None
    max_model_len: int | None = None
    mem_fraction_static: float | None = None
    context_size: int | None = None  # llama.cpp spec.contextSize, SGLang contextLength
    quantization: str | None = None  # vLLM/SGLang quantization, TGI quantize
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = None
    attention_backend: str | None = None
    enable_expert_parallel: bool | None = None
    max_input_length: int | None = None  # TGI
    max_total_tokens: int | None = None  # TGI
    # TGI's --cuda-memory-fraction: no spec field; set for a GPU shared through DRA.
    cuda_memory_fraction: float | None = None
    parallel_slots: int | None = None  # llama.cpp --parallel, vLLM --max-num-seqs
    flash_attention: bool | None = None
    jinja: bool | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    moe_cpu_offload: bool | None = None
    moe_cpu_layers: int | None = None
    no_kv_offload: bool | None = None
    no_warmup: bool | None = None
    batch_size: int | None = None
    ubatch_size: int | None = None
    reasoning_budget: int | None = None
    metadata_overrides: tuple[str, ...] = ()
    tensor_overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodSettings:
    """What reaches the pod unchanged: scheduling, metadata, env, pull secrets."""

    tolerations: tuple[dict[str, Any], ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] | None = None
    topology_spread_constraints: tuple[dict[str, Any], ...] = ()
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    env: tuple[dict[str, Any], ...] = ()
    image_pull_secrets: tuple[dict[str, Any], ...] = ()
    priority_class_name: str | None = None
    runtime_class_name: str | None = None


@dataclass(frozen=True)
class InferenceServiceSpec:
    model_ref: str
    runtime: str = "llamacpp"
    mode: str = "chat"
    replicas: int = 1
    suspend: bool = False
    image: str | None = None
    gpu: int | None = None  # spec.resources.gpu
    cpu: str | None = None
    memory: str | None = None
    # LLMKube's hostMemory: the RAM of CPU/GPU offloading; the memory request (and our
    # limit) when set, over `memory`.
    host_memory: str | None = None
    ephemeral_storage: str | None = None  # requests and limits of ephemeral-storage
    sharing: GPUSharing = field(default_factory=GPUSharing)
    multi_node: MultiNode | None = None
    endpoint: Endpoint = field(default_factory=Endpoint)
    pod: PodSettings = field(default_factory=PodSettings)
    settings: RuntimeSettings = field(default_factory=RuntimeSettings)
    extra_args: tuple[str, ...] = ()
    autoscaling: Autoscaling | None = None
    fields: PodFields = field(default_factory=PodFields)  # api/podfields.py
    priority: str = "normal"  # a GPUQuota's minPriority compares it
    # spec.modelCache: persistence Cached|Ephemeral (None: the operator's setting) and a
    # user-owned cache claim that replaces the operator's.
    cache_persistence: str | None = None
    cache_claim: str | None = None
    # <runtime>Config.hfTokenSecretRef: (Secret, key) that HF_TOKEN comes from.
    hf_token: tuple[str, str] | None = None
    slo: ServiceLevelObjective | None = None  # a Pyrra ServiceLevelObjective
    gateway: GatewayExposure | None = None  # the Envoy AI Gateway route

    @property
    def served(self) -> bool:
        return self.runtime in SERVED_RUNTIMES

    @property
    def wanted_replicas(self) -> int:
        """Replicas to run: none while suspended (Kueue's admission clears suspend)."""
        return 0 if self.suspend else self.replicas

    @property
    def endpoint_path(self) -> str:
        return self.endpoint.path or MODE_PATHS[self.mode]


def _settings(data: dict[str, Any]) -> RuntimeSettings:
    runtime = data.get("runtime", "llamacpp")
    vllm = (data.get("vllmConfig") or {}) if runtime == "vllm" else {}
    sglang = (data.get("sglangConfig") or {}) if runtime == "sglang" else {}
    tgi = (data.get("tgiConfig") or {}) if runtime == "tgi" else {}
    cpp = data if runtime == "llamacpp" else {}
    both = {**sglang, **vllm}
    return RuntimeSettings(
        tensor_parallel_size=both.get("tensorParallelSize"),
        pipeline_parallel_size=vllm.get("pipelineParallelSize"),
        data_parallel_size=sglang.get("dataParallelSize"),
        expert_parallel_size=sglang.get("expertParallelSize"),
        gpu_memory_utilization=vllm.get("gpuMemoryUtilization"),
        cpu_offload_gb=vllm.get("cpuOffloadGB"),
        max_model_len=vllm.get("maxModelLen"),
        mem_fraction_static=sglang.get("memFractionStatic"),
        context_size=cpp.get("contextSize") or sglang.get("contextLength"),
        quantization=both.get("quantization") or tgi.get("quantize"),
        dtype=vllm.get("dtype") or tgi.get("dtype"),
        kv_cache_dtype=vllm.get("kvCacheDtype"),
        enable_prefix_caching=vllm.get("enablePrefixCaching"),
        enable_chunked_prefill=vllm.get("enableChunkedPrefill"),
        max_num_batched_tokens=vllm.get("maxNumBatchedTokens"),
        attention_backend=vllm.get("attentionBackend"),
        enable_expert_parallel=vllm.get("enableExpertParallel"),
        max_input_length=tgi.get("maxInputLength"),
        max_total_tokens=tgi.get("maxTotalTokens"),
        parallel_slots=data.get("parallelSlots") if runtime in ("llamacpp", "vllm") else None,
        flash_attention=cpp.get("flashAttention"),
        jinja=cpp.get("jinja"),
        cache_type_k=cpp.get("cacheTypeK"),
        cache_type_v=cpp.get("cacheTypeV"),
        moe_cpu_offload=cpp.get("moeCPUOffload"),
        moe_cpu_layers=cpp.get("moeCPULayers"),
        no_kv_offload=cpp.get("noKvOffload"),
        no_warmup=cpp.get("noWarmup"),
        batch_size=cpp.get("batchSize"),
        ubatch_size=cpp.get("uBatchSize"),
        reasoning_budget=cpp.get("reasoningBudget"),
        metadata_overrides=tuple(cpp.get("metadataOverrides") or ()),
        tensor_overrides=tuple(cpp.get("tensorOverrides") or ()),
    )


TENSOR_SPLIT_FLAGS = ("--tensor-split", "-ts")
MAX_TENSOR_SPLIT_PARTS = 15  # llama.cpp: llama_max_devices() is 16 and it rejects >= 16 parts


def tensor_split_error(value: str) -> str | None:
    """What is wrong with a llama.cpp --tensor-split value ("3,1" or "3/1"), if anything."""
    parts = value.replace("/", ",").split(",")
    if len(parts) > MAX_TENSOR_SPLIT_PARTS:
        return f"at most {MAX_TENSOR_SPLIT_PARTS} parts (llama.cpp), got {len(parts)}"
    for p in parts:
        try:
            ok = float(p) >= 0 and math.isfinite(float(p))
        except ValueError:
            ok = False
        if not ok:
            return f"{value!r} is not a list of non-negative numbers separated by ',' or '/'"
    return None


def _extra_args_errors(data: dict[str, Any]) -> list[str]:
    """extraArgs llama-server would exit on: a malformed or too long --tensor-split."""
    if data.get("runtime", "llamacpp") != "llamacpp":
        return []
    args = list(data.get("extraArgs") or [])
    errors = []
    for i, arg in enumerate(args):
        flag, eq, inline = arg.partition("=")
        if flag not in TENSOR_SPLIT_FLAGS:
            continue
        if eq:
            value, at = inline, i
        elif i + 1 < len(args):
            value, at = args[i + 1], i + 1
        else:
            errors.append(f"spec.extraArgs[{i}]: {flag} needs a value")
            continue
        problem = tensor_split_error(value)
        if problem:
            errors.append(f"spec.extraArgs[{at}]: {flag}: {problem}")
    return errors


def parse_inference_service(spec: Any) -> InferenceServiceSpec:
    """The typed InferenceService spec, or InvalidSpec listing every problem by field path."""
    data, errors = validate(SPEC, spec, "spec")
    errors = errors or _extra_args_errors(data)
    autoscaling, scaling_errors = parse_autoscaling(data) if not errors else (None, [])
    errors += scaling_errors
    fields, field_errors = parse_pod_fields(data) if not errors else (PodFields(), [])
    errors += field_errors
    if errors:
        raise InvalidSpec(errors)
    res = data.get("resources") or {}
    sharing = res.get("gpuSharing") or {}
    mn = data.get("multiNode")
    ep = data.get("endpoint") or {}
    cache = data.get("modelCache") or {}
    section = {"vllm": "vllmConfig", "sglang": "sglangConfig", "tgi": "tgiConfig"}
    runtime = data.get("runtime", "llamacpp")
    token = ((data.get(section.get(runtime, "")) or {}) if runtime in section else {}).get(
        "hfTokenSecretRef"
    )
    return InferenceServiceSpec(
        cache_persistence=cache.get("persistence"),
        cache_claim=cache.get("claimName") or None,
        hf_token=(token["name"], token.get("key") or "HF_TOKEN") if token else None,
        model_ref=data["modelRef"],
        runtime=data.get("runtime", "llamacpp"),
        mode=data.get("mode", "chat"),
        replicas=data.get("replicas", 1),
        suspend=bool(data.get("suspend")),
        image=data.get("image"),
        gpu=res.get("gpu"),
        cpu=res.get("cpu"),
        memory=res.get("memory"),
        host_memory=res.get("hostMemory"),
        ephemeral_storage=res.get("ephemeralStorage"),
        sharing=GPUSharing(
            sharing.get("mode", "exclusive"), sharing.get("profile"), sharing.get("memoryLimitGiB")
        ),
        multi_node=(
            MultiNode(
                tuple(
                    MultiNodeMember(
                        m["node"],
                        (m.get("fabric") or {}).get("address"),
                        (m.get("fabric") or {}).get("socketInterface"),
                        (m.get("fabric") or {}).get("ibHCA"),
                    )
                    for m in mn.get("members") or []
                ),
                mn.get("rendezvousPort", 29500),
            )
            if mn
            else None
        ),
        endpoint=Endpoint(
            ep.get("port", DEFAULT_PORT),
            ep.get("path"),
            ep.get("type", "ClusterIP"),
            ep.get("nodePort"),
        ),
        pod=PodSettings(
            tolerations=tuple(data.get("tolerations") or ()),
            node_selector=dict(data.get("nodeSelector") or {}),
            affinity=data.get("affinity"),
            topology_spread_constraints=tuple(data.get("topologySpreadConstraints") or ()),
            pod_labels=dict(data.get("podLabels") or {}),
            pod_annotations=dict(data.get("podAnnotations") or {}),
            env=tuple(data.get("env") or ()),
            image_pull_secrets=tuple(data.get("imagePullSecrets") or ()),
            priority_class_name=data.get("priorityClassName"),
            runtime_class_name=data.get("runtimeClassName"),
        ),
        settings=_settings(data),
        extra_args=tuple(data.get("extraArgs") or ()),
        autoscaling=autoscaling,
        fields=fields,
        priority=data.get("priority", "normal"),
        slo=parse_slo(data),
        gateway=parse_gateway(data),
    )


def rule_errors(service: InferenceServiceSpec, model: ModelSpec) -> list[str]:
    """The guide's rules that span the InferenceService and its Model."""
    errors = []
    if model.uses_claims and service.sharing.mode != "exclusive":
        errors.append(
            f"spec.resources.gpuSharing.mode: {service.sharing.mode!r} cannot be combined with "
            f"resourceClaims (Model {service.model_ref!r}): the claim owns device placement; "
            "use exclusive or drop gpuSharing"
        )
    if model.uses_claims and service.multi_node is not None:
        errors.append(
            f"spec.multiNode: cannot be combined with resourceClaims (Model "
            f"{service.model_ref!r}): member pods pinned with nodeName bypass the scheduler "
            "that allocates DRA claims; run DRA models single-node"
        )
    if service.served and model.files:  # the loader stages them: the runtime gets paths
        if service.runtime == "llamacpp" and not model.files[0].endswith(".gguf"):
            errors.append(
                f"Model {service.model_ref!r} spec.files[0]: llama.cpp loads one .gguf file, "
                f"not {model.files[0]!r}"
            )
    elif service.served:  # a runtime we do not serve is refused on its own
        errors += runtime_source_errors(
            service.runtime, model.location, model.format, service.model_ref
        )
    return errors
