"""Make an owned object match what the reconciler wants, safely under concurrency.

Writes are optimistic: a replace carries the resourceVersion it was computed from,
so a concurrent change answers 409 and nothing is overwritten blindly. The reconciler
writes only when something differs, which keeps reconciles idempotent and quiet:

- the hash of the desired object, kept in an annotation, changes when what we want
  changes (also when we stop wanting a field, which a plain comparison would miss);
- otherwise, when someone edited a field we own (desired is no longer contained in
  live), we put it back.

Objects we do not own (no controller ownerReference to our object) are never touched.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from controller.cache import Cache
from controller.kube import ApiError, KubeClient
from controller.resources import ResourceType

Obj = dict[str, Any]
HASH_ANNOTATION = "inference.llmkube.dev/desired-hash"


class NotOwned(Exception):
    def __init__(self, rt: ResourceType, name: str) -> None:
        super().__init__(
            f"{rt.kind} {name} exists and is not owned by this object; "
            "rename or delete it to let LLMKube manage it"
        )


def desired_hash(desired: Obj) -> str:
    content = {k: v for k, v in desired.items() if k != "status"}
    blob = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def contains(desired: Any, live: Any) -> bool:
    """Every field of desired is in live with the same value (live may have defaults)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            k in live and contains(v, live[k]) for k, v in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(contains(d, v) for d, v in zip(desired, live, strict=True))
        )
    return bool(desired == live)


def owned_by(obj: Obj, owner_uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner_uid and r.get("controller") for r in refs)


def in_sync(desired: Obj, live: Obj) -> bool:
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if annotations.get(HASH_ANNOTATION) != desired_hash(desired):
        return False
    body = {k: v for k, v in desired.items() if k not in ("metadata", "status")}
    return contains(body, live) and contains(
        desired["metadata"].get("labels") or {}, (live.get("metadata") or {}).get("labels") or {}
    )


def _updated(live: Obj, desired: Obj, keep: tuple[str, ...]) -> Obj:
    """live with desired's metadata and body; `keep` names server-set spec fields to carry."""
    updated = copy.deepcopy(live)
    meta = updated.setdefault("metadata", {})
    want = desired["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), **(want.get("labels") or {})}
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        **(want.get("annotations") or {}),
        HASH_ANNOTATION: desired_hash(desired),
    }
    meta["ownerReferences"] = want.get("ownerReferences", [])
    for key, value in desired.items():
        if key in ("metadata", "status", "apiVersion", "kind"):
            continue
        new_value = copy.deepcopy(value)
        if key == "spec" and isinstance(new_value, dict):
            for field in keep:
                if field in (live.get("spec") or {}) and field not in new_value:
                    new_value[field] = live["spec"][field]
        updated[key] = new_value
    return updated


async def ensure(
    client: KubeClient,
    cache: Cache,
    rt: ResourceType,
    desired: Obj,
    owner_uid: str,
    *,
    keep: tuple[str, ...] = (),
) -> Obj:
    """Create or update desired; the live object afterwards. Raises NotOwned."""
    ns, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    live = cache.get(rt, ns, name)
    if live is None:
        body = copy.deepcopy(desired)
        body["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = desired_hash(desired)
        try:
            return await client.create(rt, body)
        except ApiError as e:
            if e.status != 409:
                raise
            live = await client.get(rt, ns, name)  # our cache had not seen it yet
            if live is None:
                raise
    for attempt in range(2):
        if not owned_by(live, owner_uid):
            raise NotOwned(rt, name)
        if in_sync(desired, live):
            return live
        try:
            return await client.replace(rt, _updated(live, desired, keep))
        except ApiError as e:
            if not e.conflict or attempt == 1:
                raise
            # The cache was behind: look at the live object once before giving up.
            fresh = await client.get(rt, ns, name)
            if fresh is None:
                raise
            live = fresh
    raise AssertionError("unreachable")


async def replace_pod_if_changed(
    client: KubeClient, cache: Cache, rt: ResourceType, desired: Obj, owner_uid: str
) -> Obj | None:
    """Pods are immutable: a pod that differs from desired is deleted and made anew."""
    ns, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    live = cache.get(rt, ns, name)
    if live is not None:
        if not owned_by(live, owner_uid):
            raise NotOwned(rt, name)
        if in_sync(desired, live):
            return live
        await client.delete(rt, ns, name)
        return None  # created on the next pass, once the old pod is gone
    return await ensure(client, cache, rt, desired, owner_uid)
