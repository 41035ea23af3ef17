"""Apply YAML manifests (create, or replace what exists) through the dynamic client.

The CRDs and the seed guide's examples ship inside this package (`app/data`), so an
installed wheel finds them wherever it runs; tests keep them identical to
charts/llmkube/crds and examples/ (tests/unit/test_packaging.py; `make sync-data` copies).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from controller.kube import KubeClient
from controller.resources import BUILTIN_TYPES, CUSTOM_TYPES, ResourceType
from objtypes import Obj

DATA = Path(__file__).resolve().parent / "data"  # installed beside this module
CRD_DIR = DATA / "crds"
EXAMPLES = DATA / "examples"
_KINDS = {(rt.api_version, rt.kind): rt for rt in (*BUILTIN_TYPES, *CUSTOM_TYPES)}


def load(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def resource_type(obj: Obj) -> ResourceType:
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in _KINDS:
        raise ValueError(f"unknown kind {key[1]} in {key[0]}")
    return _KINDS[key]


async def apply(client: KubeClient, obj: Obj, namespace: str = "default") -> Obj:
    rt = resource_type(obj)
    meta = obj.setdefault("metadata", {})
    if rt.namespaced:
        meta.setdefault("namespace", namespace)
    live = await client.get(rt, meta.get("namespace"), meta["name"])
    if live is None:
        return await client.create(rt, obj)
    meta["resourceVersion"] = live["metadata"]["resourceVersion"]
    return await client.replace(rt, obj)


async def apply_text(client: KubeClient, text: str, namespace: str = "default") -> list[Obj]:
    return [await apply(client, doc, namespace) for doc in load(text)]


async def install_crds(client: KubeClient) -> None:
    for path in sorted(CRD_DIR.glob("*.yaml")):
        await apply_text(client, path.read_text())
