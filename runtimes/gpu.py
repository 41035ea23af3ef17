"""How a Model's GPU request reaches the pod (its charge against a GPUQuota is
reconcilers/quota/rule.py's).

Two paths, never both:
- DRA: resourceClaims go on the pod (spec.resourceClaims) and the inference container
  (resources.claims). No device-plugin limit is added: on a DRA-only cluster nodes
  advertise no nvidia.com/gpu, and such a limit would leave the pod Pending.
- Device plugin: a limit of LLMKube's GPU count (at least 1) on the vendor's resource.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from api import InferenceServiceSpec, ModelSpec, gpu_count, has_gpu

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
    toleration: dict[str, str] | None = None  # of the GPU nodes' taint (gpu_toleration)


def device_plugin_resource(model: ModelSpec, service: InferenceServiceSpec | None = None) -> str:
    gpu = model.gpu
    if gpu.resource_name:
        return gpu.resource_name
    sharing = service.sharing if service else None
    if sharing and sharing.mode == "partitioned" and gpu.vendor == "nvidia":
        return f"nvidia.com/mig-{sharing.profile}"
    if sharing and sharing.mode == "shared" and gpu.vendor in SHARED_RESOURCE_NAMES:
        return SHARED_RESOURCE_NAMES[gpu.vendor]
    return DEFAULT_RESOURCE_NAMES[gpu.vendor]


def uses_gpu(model: ModelSpec, service: InferenceServiceSpec) -> bool:
    return has_gpu(model, service.gpu)


def gpu_toleration(model: ModelSpec, service: InferenceServiceSpec) -> dict[str, str]:
    """The taint GPU nodes carry (`nvidia.com/gpu=present:NoSchedule` from GKE, AKS and
    the GPU operator), tolerated as LLMKube does: keyed by hardware.gpu.tolerationKey,
    else the device-plugin resource. DRA pods get it too: the ExtendedResourceToleration
    admission plugin only adds it for extended-resource requests, and without it a
    claim's pod never lands on a tainted GPU node."""
    key = model.gpu.toleration_key or device_plugin_resource(model, service)
    return {"key": key, "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def gpu_attachment(model: ModelSpec, service: InferenceServiceSpec) -> GPUAttachment:
    if model.uses_claims:
        return GPUAttachment(
            pod_claims=[c.pod_entry() for c in model.gpu.claims],
            container_claims=[{"name": c.name} for c in model.gpu.claims],
            toleration=gpu_toleration(model, service),
        )
    if not uses_gpu(model, service):
        return GPUAttachment()
    count = gpu_count(model, service.gpu) or 1
    return GPUAttachment(
        limits={device_plugin_resource(model, service): str(count)},
        toleration=gpu_toleration(model, service),
    )


def runtime_device_count(model: ModelSpec, service: InferenceServiceSpec) -> int:
    """The devices the runtime is sized for: LLMKube's GPU count (0 when it has no GPU)."""
    return gpu_count(model, service.gpu) if uses_gpu(model, service) else 0


def sized_devices(model: ModelSpec, service: InferenceServiceSpec, claimed: int | None) -> int:
    """The devices one pod's runtime is sized for (0: no GPU).

    LLMKube's GPU count sizes it (the guide), up to the devices the pod's claims give
    (`claimed`, when known before allocation): above that the pod could not run the
    parallelism, so it is sized for the devices it really gets (DeviceCount=False
    CountMismatch says the numbers differ). Without count, the claims' devices; where
    they are known only at allocation (allocationMode All, firstAvailable), count.
    """
    if not uses_gpu(model, service):
        return 0
    count = runtime_device_count(model, service)
    if model.uses_claims and claimed:
        return min(count, claimed) if count else claimed
    return count


def attachment_kind(model: ModelSpec, service: InferenceServiceSpec | None = None) -> str:
    """How GPUs reach the pod, as status reports it: dra, device-plugin or none."""
    if model.uses_claims:
        return "dra"
    gpu = has_gpu(model, service.gpu if service else None)
    return "device-plugin" if gpu else "none"
