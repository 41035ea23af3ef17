"""How a Model's GPU request reaches the pod, and what it costs against a GPUQuota.

Two paths, never both:
- DRA: resourceClaims go on the pod (spec.resourceClaims) and the inference container
  (resources.claims). No device-plugin limit is added: on a DRA-only cluster nodes
  advertise no nvidia.com/gpu, and such a limit would leave the pod Pending.
- Device plugin: a limit of `count` (default 1) on the vendor's extended resource.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .spec import InferenceServiceSpec, ModelSpec

DEFAULT_RESOURCE_NAMES = {
    "nvidia": "nvidia.com/gpu",
    "amd": "amd.com/gpu",
    "intel": "gpu.intel.com/i915",
}
# NVIDIA's time-slicing renames the shared resource this way (renameByDefault).
SHARED_RESOURCE_NAMES = {"nvidia": "nvidia.com/gpu.shared"}


@dataclass(frozen=True)
class GPUAttachment:
    limits: dict[str, str] = field(default_factory=dict)
    pod_claims: list[dict[str, str]] = field(default_factory=list)
    container_claims: list[dict[str, str]] = field(default_factory=list)


def device_plugin_resource(model: ModelSpec) -> str:
    gpu = model.gpu
    if gpu.resource_name:
        return gpu.resource_name
    if gpu.sharing == "shared" and gpu.vendor in SHARED_RESOURCE_NAMES:
        return SHARED_RESOURCE_NAMES[gpu.vendor]
    return DEFAULT_RESOURCE_NAMES[gpu.vendor]


def gpu_attachment(model: ModelSpec, service: InferenceServiceSpec) -> GPUAttachment:
    if model.uses_claims:
        return GPUAttachment(
            pod_claims=[c.pod_entry() for c in model.gpu.claims],
            container_claims=[{"name": c.name} for c in model.gpu.claims],
        )
    if not model.is_gpu_model:
        return GPUAttachment()
    count = model.gpu.count or service.gpu or 1
    return GPUAttachment(limits={device_plugin_resource(model): str(count)})


def runtime_device_count(model: ModelSpec) -> int | None:
    """The devices the runtime is sized for: count, and nothing else (see the seed guide)."""
    return model.gpu.count if model.is_gpu_model else None


def gpus_per_replica(model: ModelSpec, service: InferenceServiceSpec) -> int:
    """What one replica is charged against a GPUQuota.

    count per replica; a claims model without count is charged only when the
    InferenceService sets spec.resources.gpu; a device-plugin model is charged the
    limit it gets.
    """
    if model.gpu.count is not None and model.is_gpu_model:
        return model.gpu.count
    if model.uses_claims:
        return service.gpu or 0
    if model.is_gpu_model:
        return service.gpu or 1
    return 0


def members_per_replica(model: ModelSpec) -> int:
    return len(model.multi_node_nodes) or 1


def replica_charge(model: ModelSpec, service: InferenceServiceSpec) -> int:
    """GPUs one replica costs: per pod, times the member pods of a multiNode replica."""
    return gpus_per_replica(model, service) * members_per_replica(model)


def attachment_kind(model: ModelSpec) -> str:
    """How GPUs reach the pod, as status reports it: dra, device-plugin or none."""
    if model.uses_claims:
        return "dra"
    return "device-plugin" if model.is_gpu_model else "none"
