"""A minimal OpenAPI v3 document per group-version, so kubectl can tell server-side field
validation is supported (it looks for a `fieldValidation` parameter on each kind's PATCH)
and sends `fieldValidation=Strict` instead of failing to download a schema. It describes
operations only; kubectl needs no component schemas for that decision.
"""

from __future__ import annotations

from objtypes import Obj

from .registry import Registry

_PARAMS = [
    {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi(registry: Registry, path: str) -> Obj | None:
    parts = [p for p in path.split("/") if p][2:]  # after openapi/v3
    gvs = sorted({(g, v) for g, v, _ in registry.types})
    if not parts:
        return {
            "paths": {
                _gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}"}
                for g, v in gvs
            }
        }
    wanted = "/".join(parts)
    for g, v in gvs:
        if _gv_path(g, v) != wanted:
            continue
        paths: Obj = {}
        for (rg, rv, plural), reg in registry.types.items():
            if (rg, rv) != (g, v):
                continue
            ns = "namespaces/{namespace}/" if reg.rt.namespaced else ""
            gvk = {"group": g, "version": v, "kind": reg.rt.kind}
            paths[f"/{wanted}/{ns}{plural}/{{name}}"] = {
                "patch": {
                    "x-kubernetes-group-version-kind": gvk,
                    "x-kubernetes-action": "patch",
                    "parameters": _PARAMS,
                    "responses": {"200": {"description": "OK"}},
                }
            }
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": paths,
            "components": {"schemas": {}},
        }
    return None
