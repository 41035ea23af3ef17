"""Make an owned object match what the reconciler wants, with server-side apply.

Every write of an owned object (Deployment, Service, multiNode member Pod) is a
server-side apply as field manager `llmkube-controller`: the object holds what we apply,
the API server records which fields are ours, and fields set by other managers —
`kubectl rollout restart`'s `restartedAt` annotation on the pod template, a label added
by a policy engine, an env var injected by a webhook — survive our next write. A field
we stop applying is removed by the server, because it is ours and no longer applied.

Applies force conflicts: a field we apply is ours to decide (someone who `kubectl edit`s
our Deployment's image gets it put back), as controller-runtime controllers do. An object
missing from the cache is looked up before it is created (an apply would merge into an
object someone else made), and that creating apply does not force, so an object made in
between answers 409 and is checked for ownership instead of being taken over.

No apply is sent when the desired state already holds, so reconciles are idempotent and
quiet. The cache holds no managedFields, so what we applied last is recognised by a hash
of the desired object in an annotation (it changes also when we stop wanting a field,
which a comparison with the live object would miss); otherwise, a field we apply that
differs in the live object (someone edited it) is put back.

Objects we do not own (no controller ownerReference to our object) are never touched.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from controller.cache import Cache
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.resources import ResourceType
from objtypes import Obj

HASH_ANNOTATION = "inference.llmkube.dev/desired-hash"
FIELD_MANAGER = "llmkube-controller"
APPLY_PATCH = "application/apply-patch+yaml"
# List items that kube merges by key (patch merge keys / list-map keys): another
# manager's extra items in these lists are not a difference from what we apply.
_ITEM_KEYS = ("containerPort", "port", "mountPath", "name")
_PORT_KEYS = ("containerPort", "port")


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


def _item_key(item: Any) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    for field in _ITEM_KEYS:
        if field in item:
            protocol = item.get("protocol", "TCP") if field in _PORT_KEYS else None
            return (field, item[field], protocol)
    return None


def contains(desired: Any, live: Any) -> bool:
    """Every field of desired is in live with the same value.

    live may carry more: defaults, other managers' fields and, in keyed lists
    (containers, env, ports, volumes...), other managers' items. Other lists are
    atomic and compared whole (args, command, tolerations).
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            k in live and contains(v, live[k]) for k, v in desired.items()
        )
    if isinstance(desired, list):
        if not isinstance(live, list):
            return False
        keys = [_item_key(d) for d in desired]
        if desired and all(k is not None for k in keys):
            by_key = {_item_key(v): v for v in live}
            return all(
                k in by_key and contains(d, by_key[k]) for k, d in zip(keys, desired, strict=True)
            )
        return len(desired) == len(live) and all(
            contains(d, v) for d, v in zip(desired, live, strict=True)
        )
    return bool(desired == live)


def owned_by(obj: Obj, owner_uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner_uid and r.get("controller") for r in refs)


def _body_in_sync(desired: Obj, live: Obj) -> bool:
    body = {k: v for k, v in desired.items() if k not in ("metadata", "status")}
    return contains(body, live)


def _metadata_in_sync(desired: Obj, live: Obj) -> bool:
    want, have = desired["metadata"], live.get("metadata") or {}
    annotations = have.get("annotations") or {}
    return (
        annotations.get(HASH_ANNOTATION) == desired_hash(desired)
        and contains(want.get("labels") or {}, have.get("labels") or {})
        and contains(want.get("annotations") or {}, annotations)
    )


def in_sync(desired: Obj, live: Obj) -> bool:
    """What we apply already holds: the same desired object as last time, unedited."""
    return _metadata_in_sync(desired, live) and _body_in_sync(desired, live)


def apply_configuration(rt: ResourceType, desired: Obj) -> Obj:
    """The object we apply: desired with its type and the hash of what we applied."""
    body = copy.deepcopy({k: v for k, v in desired.items() if k != "status"})
    body["apiVersion"], body["kind"] = rt.api_version, rt.kind
    meta = body["metadata"]
    meta.pop("resourceVersion", None)
    meta.setdefault("annotations", {})[HASH_ANNOTATION] = desired_hash(desired)
    return body


async def apply(client: KubeClient, rt: ResourceType, desired: Obj, *, force: bool) -> Obj:
    """One server-side apply of desired as llmkube-controller; the object afterwards."""
    meta = desired["metadata"]
    query = {"fieldManager": FIELD_MANAGER}
    if force:
        query["force"] = "true"
    return await client.request(
        "PATCH",
        rt.object_path(meta.get("namespace"), meta["name"]),
        query=query,
        body=apply_configuration(rt, desired),
        content_type=APPLY_PATCH,
    )


async def ensure(
    client: KubeClient,
    cache: Cache,
    rt: ResourceType,
    desired: Obj,
    owner_uid: str,
    *,
    keep: tuple[str, ...] = (),
) -> Obj:
    """Create or update desired; the live object afterwards. Raises NotOwned.

    `keep` (server-set fields such as a Service's clusterIP) needs no handling under
    server-side apply: fields we do not apply are never ours to reset. It stays for
    callers written against the replace-based version.
    """
    del keep
    ns, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    live = cache.get(rt, ns, name) or await client.get(rt, ns, name)
    if live is None:
        try:
            return await apply(client, rt, desired, force=False)
        except ApiError as e:
            if not e.conflict:
                raise
            # Someone created it since our look: is it ours?
            live = await client.get(rt, ns, name)
            if live is None:
                raise
    if not owned_by(live, owner_uid):
        raise NotOwned(rt, name)
    if in_sync(desired, live):
        return live
    return await apply(client, rt, desired, force=True)


async def ensure_or_remove(
    client: KubeClient, cache: Cache, rt: ResourceType, owner: Obj, desired: Obj | None
) -> None:
    """An owned object the spec may ask for (named after its owner): desired is applied,
    or, when None, the object of that name is deleted if it is ours (never someone
    else's). Raises NotOwned for one of that name that is not ours."""
    meta = owner["metadata"]
    if desired is not None:
        await ensure(client, cache, rt, desired, meta["uid"])
        return
    live = cache.get(rt, meta["namespace"], meta["name"])
    if live is not None and owned_by(live, meta["uid"]):
        await client.delete(rt, meta["namespace"], meta["name"])


async def replace_pod_if_changed(
    client: KubeClient, cache: Cache, rt: ResourceType, desired: Obj, owner_uid: str
) -> Obj | None:
    """A pod's spec is immutable: a pod whose spec or desired object changed is deleted
    and made anew; only its labels and annotations are applied in place."""
    ns, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    live = cache.get(rt, ns, name)
    if live is not None:
        if not owned_by(live, owner_uid):
            raise NotOwned(rt, name)
        annotations = (live.get("metadata") or {}).get("annotations") or {}
        if annotations.get(HASH_ANNOTATION) != desired_hash(desired) or not _body_in_sync(
            desired, live
        ):
            await client.delete(rt, ns, name)
            return None  # created on the next pass, once the old pod is gone
    return await ensure(client, cache, rt, desired, owner_uid)
