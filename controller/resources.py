"""The Kubernetes resource types the controller reads and writes, and their REST paths."""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "inference.llmkube.dev"
VERSION = "v1alpha1"


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None = None) -> str:
        """Path of the collection; with no namespace, the all-namespaces list/watch path."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, namespace: str | None, name: str, subresource: str = "") -> str:
        path = f"{self.collection_path(namespace)}/{name}"
        return f"{path}/{subresource}" if subresource else path


MODEL = ResourceType(GROUP, VERSION, "models", "Model")
INFERENCE_SERVICE = ResourceType(GROUP, VERSION, "inferenceservices", "InferenceService")
GPU_QUOTA = ResourceType(GROUP, VERSION, "gpuquotas", "GPUQuota")

RESOURCE_CLAIM = ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
RESOURCE_CLAIM_TEMPLATE = ResourceType(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate"
)
DEVICE_CLASS = ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_SLICE = ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)

DEPLOYMENT = ResourceType("apps", "v1", "deployments", "Deployment")
REPLICA_SET = ResourceType("apps", "v1", "replicasets", "ReplicaSet")
POD = ResourceType("", "v1", "pods", "Pod")
SERVICE = ResourceType("", "v1", "services", "Service")
EVENT = ResourceType("", "v1", "events", "Event")
NAMESPACE = ResourceType("", "v1", "namespaces", "Namespace", False)
NODE = ResourceType("", "v1", "nodes", "Node", False)
SECRET = ResourceType("", "v1", "secrets", "Secret")
LEASE = ResourceType("coordination.k8s.io", "v1", "leases", "Lease")
HORIZONTAL_POD_AUTOSCALER = ResourceType(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"
)
POD_DISRUPTION_BUDGET = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
PERSISTENT_VOLUME_CLAIM = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
JOB = ResourceType("batch", "v1", "jobs", "Job")
CRD = ResourceType(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    DEVICE_CLASS,
    RESOURCE_SLICE,
    DEPLOYMENT,
    REPLICA_SET,
    POD,
    SERVICE,
    EVENT,
    NAMESPACE,
    NODE,
    SECRET,
    LEASE,
    HORIZONTAL_POD_AUTOSCALER,
    POD_DISRUPTION_BUDGET,
    PERSISTENT_VOLUME_CLAIM,
    JOB,
    CRD,
)
CUSTOM_TYPES: tuple[ResourceType, ...] = (MODEL, INFERENCE_SERVICE, GPU_QUOTA)


def object_key(obj: dict[str, object]) -> tuple[str, str]:
    """(namespace, name) of an object; namespace is "" for cluster-scoped objects."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "", ""
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
