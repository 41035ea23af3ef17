"""The kinds the server serves built in, as kube-apiserver's discovery lists them.

The server's own table: it serves a cluster, not the controller, so it does not take its
kinds from the product (tests/server/test_testserver_contract.py checks that every kind the
controller uses is here, with the same group, version, plural, kind and scope).
Custom resources are added by their CRDs (registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(frozen=True)
class Builtin:
    rt: ResourceType
    status: bool = True  # status is a subresource
    scale: bool = False  # a scale subresource at .spec.replicas / .status.replicas
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()


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
CRD = ResourceType(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
WEBHOOKS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
HORIZONTAL_POD_AUTOSCALER = ResourceType(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"
)
POD_DISRUPTION_BUDGET = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
PERSISTENT_VOLUME_CLAIM = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
JOB = ResourceType("batch", "v1", "jobs", "Job")
RBAC = "rbac.authorization.k8s.io"

BUILTINS: tuple[Builtin, ...] = (
    Builtin(RESOURCE_CLAIM),
    Builtin(RESOURCE_CLAIM_TEMPLATE, status=False),
    Builtin(DEVICE_CLASS, status=False),
    Builtin(RESOURCE_SLICE),
    Builtin(DEPLOYMENT, scale=True, short_names=("deploy",), categories=("all",)),
    Builtin(REPLICA_SET, scale=True, short_names=("rs",), categories=("all",)),
    Builtin(POD, short_names=("po",), categories=("all",)),
    Builtin(SERVICE, short_names=("svc",), categories=("all",)),
    Builtin(EVENT, status=False, short_names=("ev",)),
    Builtin(NAMESPACE, short_names=("ns",)),
    Builtin(NODE, short_names=("no",)),
    Builtin(SECRET, status=False),
    Builtin(LEASE, status=False),
    Builtin(CRD, short_names=("crd", "crds")),
    Builtin(HORIZONTAL_POD_AUTOSCALER, short_names=("hpa",), categories=("all",)),
    Builtin(POD_DISRUPTION_BUDGET, short_names=("pdb",)),
    Builtin(PERSISTENT_VOLUME_CLAIM, short_names=("pvc",)),
    Builtin(JOB, categories=("all",)),
    # What a chart installs beside them.
    Builtin(
        ResourceType("", "v1", "serviceaccounts", "ServiceAccount"), False, short_names=("sa",)
    ),
    Builtin(ResourceType("", "v1", "configmaps", "ConfigMap"), False, short_names=("cm",)),
    Builtin(ResourceType(RBAC, "v1", "clusterroles", "ClusterRole", False), False),
    Builtin(ResourceType(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False), False),
    Builtin(ResourceType(RBAC, "v1", "roles", "Role"), False),
    Builtin(ResourceType(RBAC, "v1", "rolebindings", "RoleBinding"), False),
    Builtin(WEBHOOKS, status=False),
)
