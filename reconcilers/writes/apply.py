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

Each apply's answer is remembered (OwnWrites) for the watches that follow its resource:
the watch event carrying the object at that resourceVersion is our own write coming
back, which the reconcile that made it has already read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from typing import Any

from controller.cache import Cache
from controller.errors import ApiError
from controller.informer import ADDED, DELETED, Event
from controller.kube import KubeClient
from controller.reconcile import Predicate
from controller.resources import ResourceType, object_key
from objtypes import Obj

HASH_ANNOTATION = "inference.llmkube.dev/desired-hash"
FIELD_MANAGER = "llmkube-controller"
APPLY_PATCH = "application/apply-patch+yaml"
# List items that kube merges by key (patch merge keys / list-map keys): another
# manager's extra items in these lists are not a difference from what we apply.
_ITEM_KEYS = ("containerPort", "port", "mountPath", "name")
_PORT_KEYS = ("containerPort", "port")


class OwnWrites:
    """Our own writes of owned objects, recognised when the watch brings them back.

    A write's watch event (ADDED for a create, MODIFIED for an update) carries the object
    as the write made it, which the reconcile that wrote it reads from the answer: waking
    that reconcile again would redo the same work to the same end. Two cases:

    - the answer came first: its resourceVersion is remembered until the event at that
      resourceVersion is seen (an event at any other one, another writer's change or ours
      superseded, is not an echo);
    - the event came first (the watch and the request travel on different connections):
      an ADDED event while our create of that object is in flight is dropped. The
      reconcile that creates it reads the create's answer, or after a 409 (someone else
      created it) its own GET, both at least as new; if the create fails, the reconcile
      fails and is retried from the cache. An update's early echo is not told apart: it
      costs one more reconcile.

    Only the resource types a watch follows are remembered (an entry nobody consumes
    would stay), at most one entry per object; the entry goes when its echo or the
    object's DELETED event is seen, or is replaced by our next write of the object.
    """

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._followed: set[ResourceType] = set()
        self._written: dict[tuple[ResourceType, str, str], str] = {}
        self._creating: set[tuple[ResourceType, str, str]] = set()

    def __len__(self) -> int:
        return len(self._written)

    def follow(self, rt: ResourceType) -> Predicate:
        """A watch predicate for rt: False for the echo of our own write, True otherwise."""
        self._followed.add(rt)

        def not_an_echo(event: Event) -> bool:
            return not self.echo(rt, event)

        return not_an_echo

    @contextlib.contextmanager
    def creating(self, rt: ResourceType, ns: str, name: str) -> Iterator[None]:
        """While our create of the object is on its way."""
        key = (rt, ns, name)
        if rt not in self._followed:
            yield
            return
        self._creating.add(key)
        try:
            yield
        finally:
            self._creating.discard(key)

    def wrote(self, rt: ResourceType, obj: Obj) -> None:
        """obj is what a write of ours answered."""
        if rt not in self._followed:
            return
        ns, name = object_key(obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        cached = self._cache.get(rt, ns, name)
        if not rv or (cached is not None and cached["metadata"].get("resourceVersion") == rv):
            # The echo came before the answer (or the apply changed nothing): no event
            # at this resourceVersion is still to come.
            self._written.pop((rt, ns, name), None)
            return
        self._written[rt, ns, name] = rv

    def echo(self, rt: ResourceType, event: Event) -> bool:
        """Is this event our own write of the object coming back? (Consumed once.)"""
        ns, name = object_key(event.obj)
        key = (rt, ns, name)
        if event.type == ADDED and key in self._creating:
            return True
        written = self._written.get(key)
        if written is None:
            return False
        if event.type == DELETED:
            del self._written[key]
            return False
        if event.obj["metadata"].get("resourceVersion") != written:
            return False
        del self._written[key]
        return True


def own_writes(cache: Cache) -> OwnWrites:
    """The cache's one OwnWrites (shared by ensure and the watches' predicates)."""
    return cache.extension("own-writes", OwnWrites)


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

    Walked with a stack of its own, not by recursion: an object of any depth (a
    user's opaque field nested hundreds of levels) is compared without RecursionError.
    """
    pending: list[tuple[Any, Any]] = [(desired, live)]
    while pending:
        want, have = pending.pop()
        if isinstance(want, dict):
            if not isinstance(have, dict) or any(k not in have for k in want):
                return False
            pending.extend((v, have[k]) for k, v in want.items())
        elif isinstance(want, list):
            if not isinstance(have, list):
                return False
            keys = [_item_key(d) for d in want]
            if want and all(k is not None for k in keys):
                by_key = {_item_key(v): v for v in have}
                if any(k not in by_key for k in keys):
                    return False
                pending.extend((d, by_key[k]) for k, d in zip(keys, want, strict=True))
            elif len(want) != len(have):
                return False
            else:
                pending.extend(zip(want, have, strict=True))
        elif want != have:
            return False
    return True


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
    """The object we apply: desired with its type and the hash of what we applied.
    desired is left as it is; the body shares all but its top level, metadata and
    annotations with it (it is serialized once, never changed)."""
    body = {k: v for k, v in desired.items() if k != "status"}
    body["apiVersion"], body["kind"] = rt.api_version, rt.kind
    meta = body["metadata"] = dict(body["metadata"])
    meta.pop("resourceVersion", None)
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        HASH_ANNOTATION: desired_hash(desired),
    }
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
            with own_writes(cache).creating(rt, ns, name):
                created = await apply(client, rt, desired, force=False)
            return _remembered(cache, rt, created)
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
    return _remembered(cache, rt, await apply(client, rt, desired, force=True))


def _remembered(cache: Cache, rt: ResourceType, written: Obj) -> Obj:
    own_writes(cache).wrote(rt, written)
    return written


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
