"""LLMKube's inference.llmkube.dev/v1alpha1 API: the one typed source of its fields.

Schemas (api.model.SPEC, ...) give both the CRDs (api.crdgen) and the controller's own
validation; parse_* turn a raw spec into typed dataclasses or raise InvalidSpec with every
problem by field path. Standard library only; imports nothing else of ours.
"""

from .errors import InvalidSpec
from .gpuquota import GPUQuotaSpec, LabelSelector, parse_gpu_quota
from .inferenceservice import (
    Endpoint,
    GPUSharing,
    InferenceServiceSpec,
    MultiNode,
    MultiNodeMember,
    PodSettings,
    RuntimeSettings,
    parse_inference_service,
    rule_errors,
)
from .integrations import GatewayExposure, ServiceLevelObjective
from .model import ClaimRef, GPUSpec, ModelSpec, gpu_count, has_gpu, parse_model

__all__ = [
    "ClaimRef",
    "Endpoint",
    "GPUQuotaSpec",
    "GPUSharing",
    "GPUSpec",
    "GatewayExposure",
    "InferenceServiceSpec",
    "InvalidSpec",
    "LabelSelector",
    "ModelSpec",
    "MultiNode",
    "MultiNodeMember",
    "PodSettings",
    "RuntimeSettings",
    "ServiceLevelObjective",
    "gpu_count",
    "has_gpu",
    "parse_gpu_quota",
    "parse_inference_service",
    "parse_model",
    "rule_errors",
]
