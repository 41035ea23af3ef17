"""REST paths of manifests' objects, for the control plane's plain-HTTPS admin client."""

from __future__ import annotations

from typing import Any


def object_path(obj: dict[str, Any]) -> str:
    """The REST path of a manifest's object (plural: the kind, lower case, plus s)."""
    api_version: str = obj["apiVersion"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    plural = PLURALS.get(obj["kind"], obj["kind"].lower() + "s")
    namespace = obj["metadata"].get("namespace")
    if namespace and obj["kind"] not in CLUSTER_SCOPED:
        base += f"/namespaces/{namespace}"
    return f"{base}/{plural}/{obj['metadata']['name']}"


PLURALS = {"DeviceClass": "deviceclasses", "ResourceClaimTemplate": "resourceclaimtemplates"}
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "Node",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "DeviceClass",
        "ResourceSlice",
        "ValidatingWebhookConfiguration",
        "PersistentVolume",
    }
)


def ready(obj: dict[str, Any] | None) -> bool:
    """The object's Ready condition is True (a Pod, an InferenceService)."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
