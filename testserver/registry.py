"""The kinds the server serves: built-ins, plus each CRD's versions as soon as it is created."""

from __future__ import annotations

from dataclasses import dataclass, field

from objtypes import Obj

from .kinds import BUILTINS, CRD, ResourceType
from .schema import VersionSchema
from .storage import WatchEvent, type_id


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
        for builtin in BUILTINS:
            self.add(
                Registered(
                    builtin.rt,
                    has_status=builtin.status,
                    short_names=list(builtin.short_names),
                    categories=list(builtin.categories),
                    scale=Scale(".spec.replicas", ".status.replicas") if builtin.scale else None,
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
