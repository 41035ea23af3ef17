"""Legacy (v1) discovery documents, as kubectl reads them to map names, short names and kinds.

kubectl 1.27+ first asks for aggregated discovery; a plain APIGroupList answer makes it fall
back to these documents, which is what real clusters before 1.26 serve too.
"""

from __future__ import annotations

from objtypes import Obj

from .registry import Registry

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _groups(registry: Registry) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for group, version, _ in registry.types:
        versions = found.setdefault(group, [])
        if version not in versions:
            versions.append(version)
    return found


def discovery(registry: Registry, path: str) -> Obj | None:
    parts = [p for p in path.split("/") if p]
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
            ],
        }
    if parts == ["apis"]:
        groups = [
            {
                "name": g,
                "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
            }
            for g, vs in sorted(_groups(registry).items())
            if g
        ]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
    if parts == ["api", "v1"]:
        group, version = "", "v1"
    elif len(parts) == 3 and parts[0] == "apis":
        group, version = parts[1], parts[2]
    else:
        return None
    resources = []
    for (g, v, plural), reg in sorted(registry.types.items()):
        if (g, v) != (group, version):
            continue
        main: Obj = {
            "name": plural,
            "singularName": reg.singular or reg.rt.kind.lower(),
            "namespaced": reg.rt.namespaced,
            "kind": reg.rt.kind,
            "verbs": VERBS,
        }
        if reg.short_names:
            main["shortNames"] = reg.short_names
        if reg.categories:
            main["categories"] = reg.categories
        resources.append(main)
        subresources = (["status"] if reg.has_status else []) + (["scale"] if reg.scale else [])
        for sub in subresources:
            resources.append(
                {
                    "name": f"{plural}/{sub}",
                    "singularName": "",
                    "namespaced": reg.rt.namespaced,
                    "kind": "Scale" if sub == "scale" else reg.rt.kind,
                    **({"group": "autoscaling", "version": "v1"} if sub == "scale" else {}),
                    "verbs": ["get", "patch", "update"],
                }
            )
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
