"""The kinds the server serves: built-ins, plus each CRD's versions as soon as it is created."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.resources import BUILTIN_TYPES, CRD, ResourceType

from .schema import VersionSchema
from .storage import WatchEvent, type_id

Obj = dict[str, Any]

# Kinds a cluster serves beyond those the controller uses: what a chart installs.
EXTRA_BUILTINS = (
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount"),
    ResourceType("", "v1", "configmaps", "ConfigMap"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
)
# Built-in kinds whose status is not a subresource.
_WITHOUT_STATUS = {
    "events",
    "leases",
    "secrets",
    "resourceclaimtemplates",
    "deviceclasses",
    "serviceaccounts",
    "configmaps",
    "clusterroles",
    "clusterrolebindings",
    "roles",
    "rolebindings",
    "validatingwebhookconfigurations",
}
# Built-ins' short names and categories, as kube-apiserver's discovery lists them.
_SHORT_NAMES = {
    "pods": ["po"],
    "services": ["svc"],
    "namespaces": ["ns"],
    "nodes": ["no"],
    "events": ["ev"],
    "configmaps": ["cm"],
    "serviceaccounts": ["sa"],
    "deployments": ["deploy"],
    "replicasets": ["rs"],
    "customresourcedefinitions": ["crd", "crds"],
}
_CATEGORIES = {
    "pods": ["all"],
    "services": ["all"],
    "deployments": ["all"],
    "replicasets": ["all"],
}
_SCALABLE_BUILTINS = {"deployments", "replicasets"}


@dataclass
class Scale:
    """A CRD's scale subresource: where replicas live in spec and status."""

    spec_replicas: str
    status_replicas: str
    label_selector: str | None = None


@dataclass
class Registered:
    rt: ResourceType
    has_status: bool
    schema: VersionSchema | None = None
    printer_columns: list[Obj] = field(default_factory=list)
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    singular: str = ""
    scale: Scale | None = None
    custom: bool = False


class Registry:
    def __init__(self) -> None:
        self.types: dict[tuple[str, str, str], Registered] = {}
        for rt in (*BUILTIN_TYPES, *EXTRA_BUILTINS):
            self.add(
                Registered(
                    rt,
                    has_status=rt.plural not in _WITHOUT_STATUS,
                    short_names=_SHORT_NAMES.get(rt.plural, []),
                    categories=_CATEGORIES.get(rt.plural, []),
                    scale=Scale(".spec.replicas", ".status.replicas")
                    if rt.plural in _SCALABLE_BUILTINS
                    else None,
                )
            )

    def add(self, reg: Registered) -> None:
        rt = reg.rt
        self.types[(rt.group, rt.version, rt.plural)] = reg

    def get(self, group: str, version: str, plural: str) -> Registered | None:
        return self.types.get((group, version, plural))

    def by_type_id(self) -> dict[str, ResourceType]:
        return {type_id(r.rt): r.rt for r in self.types.values()}

    def on_event(self, event: WatchEvent) -> None:
        """Serve custom resources as soon as their CRD is created, as the apiserver does."""
        if event.resource != f"{CRD.plural}.{CRD.group}":
            return
        spec = event.obj.get("spec", {})
        names = spec.get("names", {})
        group = spec.get("group", "")
        if event.type == "DELETED":
            for version in spec.get("versions", []):
                self.types.pop((group, version.get("name", ""), names.get("plural", "")), None)
            return
        for version in spec.get("versions", []):
            if version.get("served") is False:
                continue
            rt = ResourceType(
                group,
                version.get("name", ""),
                names.get("plural", ""),
                names.get("kind", ""),
                spec.get("scope", "Namespaced") == "Namespaced",
            )
            subresources = version.get("subresources") or {}
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            scale = subresources.get("scale")
            self.add(
                Registered(
                    rt,
                    has_status="status" in subresources,
                    schema=VersionSchema(schema) if isinstance(schema, dict) else None,
                    printer_columns=list(version.get("additionalPrinterColumns") or []),
                    short_names=list(names.get("shortNames") or []),
                    categories=list(names.get("categories") or []),
                    singular=names.get("singular") or names.get("kind", "").lower(),
                    scale=Scale(
                        scale.get("specReplicasPath", ".spec.replicas"),
                        scale.get("statusReplicasPath", ".status.replicas"),
                        scale.get("labelSelectorPath"),
                    )
                    if isinstance(scale, dict)
                    else None,
                    custom=True,
                )
            )
