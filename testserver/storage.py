"""In-memory object storage with Kubernetes resourceVersion semantics.

Every write gets the next global resourceVersion and is appended to a bounded event
log; watches replay the log from a resourceVersion and then follow live writes. A
watch from a resourceVersion older than the log keeps answers 410 Gone, exactly the
case an informer must handle by relisting.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar, cast

from objtypes import Obj

from .kinds import ResourceType

T = TypeVar("T")


class StorageError(Exception):
    """An API error, answered as a Status; details carries causes (422 Invalid, 409)."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details


def object_not_found(rt: ResourceType, name: str) -> StorageError:
    """kube-apiserver's 404 for a named object (apimachinery errors.NewNotFound): the
    message names group-qualified resource and name, and details name them apart, the
    group left out for the core group."""
    resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    details: Obj = {"name": name, "kind": rt.plural}
    if rt.group:
        details["group"] = rt.group
    return StorageError(404, "NotFound", f'{resource} "{name}" not found', details)


def too_large_resource_version(wanted: int, current: int, retry_after: int) -> StorageError:
    """kube-apiserver's answer to a read that asks for a resourceVersion it has not
    reached (k8s.io/apiserver storage.NewTooLargeResourceVersionError): 504 Timeout with
    the cause client-go's reflector looks for, and retryAfterSeconds when not 0."""
    details: Obj = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    }
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return StorageError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {wanted}, current: {current}",
        details,
    )


@dataclass
class WatchEvent:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str  # plural.group
    obj: Obj
    old: Obj | None
    _raw: bytes | None = field(default=None, repr=False)

    def raw(self) -> bytes:
        """The object serialized once, shared by every watcher that is sent this event."""
        if self._raw is None:
            self._raw = json.dumps(self.obj, separators=(",", ":")).encode()
        return self._raw


@dataclass(eq=False)
class Watcher:
    resource: str
    namespace: str | None
    matches: Callable[[Obj], bool]
    queue: asyncio.Queue[WatchEvent | None] = field(default_factory=asyncio.Queue)


def clone(value: T) -> T:
    """A deep copy of JSON data (all that is stored): a JSON round trip, in C, runs
    several times faster than copy.deepcopy, which is the hot path's largest cost."""
    try:
        return cast(T, json.loads(json.dumps(value)))
    except (TypeError, ValueError):  # not JSON data (a caller's own object): the slow way
        return copy.deepcopy(value)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def type_id(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def _spec_part(obj: Obj, has_status: bool) -> Obj:
    """What counts for metadata.generation: everything but metadata, and status when
    status is a subresource (without one, a status change is a change like any other)."""
    skip = ("metadata", "status") if has_status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skip}


class Storage:
    """Stored objects are never mutated in place once stored: writes store a new dict, so
    readers (views, list snapshots, watch events) may share them without copying."""

    def __init__(self, history: int = 10_000) -> None:
        self.rv = 0
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self.log: deque[WatchEvent] = deque(maxlen=history)
        # Oldest resourceVersion a watch may still start from.
        self.compacted_rv = 0
        self.watchers: set[Watcher] = set()
        self.listeners: list[Callable[[WatchEvent], None]] = []
        self.uids: set[str] = set()
        # Stored object's JSON, by id(): serialized once per change, shared by every read.
        self._raw: dict[int, tuple[Obj, bytes]] = {}

    def raw(self, obj: Obj) -> bytes:
        """obj (a stored object) as JSON bytes, serialized at most once while it is stored."""
        hit = self._raw.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        data = json.dumps(obj, separators=(",", ":")).encode()
        self._raw[id(obj)] = (obj, data)
        return data

    # -- reads -----------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.objects.get(type_id(rt), {}).get((namespace, name))
        if obj is None:
            raise object_not_found(rt, name)
        return clone(obj)

    def view(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """The stored object itself: read-only for the caller (no copy on the read path)."""
        obj = self.objects.get(type_id(rt), {}).get((namespace, name))
        if obj is None:
            raise object_not_found(rt, name)
        return obj

    def select_view(
        self, rt: ResourceType, namespace: str | None, matches: Callable[[Obj], bool]
    ) -> list[Obj]:
        """Matching stored objects sorted by namespace and name, read-only for the caller."""
        return [
            o
            for (ns, _), o in sorted(self.objects.get(type_id(rt), {}).items())
            if (namespace is None or ns == namespace) and matches(o)
        ]

    def select(
        self, rt: ResourceType, namespace: str | None, matches: Callable[[Obj], bool]
    ) -> list[Obj]:
        return clone(self.select_view(rt, namespace, matches))

    def event_raw(self, event: WatchEvent) -> bytes:
        """An event's object as JSON: shared with reads while the object is still stored."""
        meta = event.obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if self.objects.get(event.resource, {}).get(key) is event.obj:
            return self.raw(event.obj)
        return event.raw()

    # -- writes ----------------------------------------------------------------

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _emit(self, rt: ResourceType, type_: str, obj: Obj, old: Obj | None) -> None:
        event = WatchEvent(self.rv, type_, type_id(rt), obj, old)
        if len(self.log) == self.log.maxlen:
            self.compacted_rv = self.log[0].rv
        self.log.append(event)
        for watcher in list(self.watchers):
            if watcher.resource == event.resource:
                watcher.queue.put_nowait(event)
        for listener in self.listeners:
            listener(event)

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        obj: Obj,
        *,
        share: bool = False,
        owned: bool = False,
    ) -> Obj:
        """Store a copy of obj (owned=True: obj itself, the caller hands it over and keeps
        no reference); share=True returns the stored object itself (read-only)."""
        obj = obj if owned else clone(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise StorageError(422, "Invalid", "metadata.name: Required value")
            meta["name"] = f"{prefix}{uuid.uuid4().hex[:5]}"
        if rt.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        key = (namespace if rt.namespaced else "", meta["name"])
        bucket = self.objects.setdefault(type_id(rt), {})
        if key in bucket:
            raise StorageError(
                409, "AlreadyExists", f'{rt.plural}.{rt.group} "{meta["name"]}" already exists'
            )
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        meta["generation"] = 1
        meta["resourceVersion"] = str(self._next_rv())
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        bucket[key] = obj
        self.uids.add(meta["uid"])
        self._emit(rt, "ADDED", obj, None)
        return obj if share else clone(obj)

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        new: Obj,
        *,
        subresource: str = "",
        has_status: bool = True,
        share: bool = False,
        owned: bool = False,
    ) -> Obj:
        """Replace an object; a stale metadata.resourceVersion answers 409 Conflict.
        owned and share as for create."""
        bucket = self.objects.get(type_id(rt), {})
        key = (namespace if rt.namespaced else "", name)
        old = bucket.get(key)
        if old is None:
            raise object_not_found(rt, name)
        new = new if owned else clone(new)
        meta = new.setdefault("metadata", {})
        sent_rv = meta.get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise StorageError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rt.plural}.{rt.group} "{name}": '
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        if subresource == "status":
            # A new top level and metadata; spec is shared with the stored object (immutable).
            merged = {**old, "metadata": dict(old["metadata"]), "status": new.get("status", {})}
            if "managedFields" in meta:  # the status writer's entry (subresource status)
                merged["metadata"]["managedFields"] = meta["managedFields"]
        else:
            merged = new
            # Immutable and server-owned metadata survive a replace.
            for k in ("uid", "creationTimestamp", "generation", "namespace", "name"):
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
            if has_status and "status" in old:
                merged["status"] = old["status"]
            elif has_status:
                merged.pop("status", None)
            if _spec_part(merged, has_status) != _spec_part(old, has_status):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        merged["apiVersion"] = rt.api_version
        merged["kind"] = rt.kind
        merged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if merged == old:
            # No-op writes keep their resourceVersion, as upstream.
            return old if share else clone(old)
        merged["metadata"]["resourceVersion"] = str(self._next_rv())
        self._raw.pop(id(old), None)
        bucket[key] = merged
        self._emit(rt, "MODIFIED", merged, old)
        return merged if share else clone(merged)

    def delete(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        bucket = self.objects.get(type_id(rt), {})
        key = (namespace if rt.namespaced else "", name)
        old = bucket.pop(key, None)
        if old is None:
            raise object_not_found(rt, name)
        self.uids.discard(old["metadata"].get("uid", ""))
        self._raw.pop(id(old), None)
        old = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self._next_rv())}}
        self._emit(rt, "DELETED", old, None)
        return old

    def dependents(self, uid: str) -> list[tuple[str, tuple[str, str]]]:
        """Objects whose ownerReferences name uid, for cascading deletion."""
        found = []
        for tid, bucket in self.objects.items():
            for key, obj in bucket.items():
                refs = obj.get("metadata", {}).get("ownerReferences") or []
                if any(r.get("uid") == uid for r in refs):
                    found.append((tid, key))
        return found

    # -- watches ---------------------------------------------------------------

    def compact(self) -> None:
        """Forget all history: every watch resumed from an older resourceVersion gets 410."""
        self.log.clear()
        self.compacted_rv = self.rv

    def subscribe(
        self,
        rt: ResourceType,
        namespace: str | None,
        since_rv: int,
        matches: Callable[[Obj], bool],
    ) -> tuple[Watcher, list[WatchEvent]]:
        """Register a watcher and return the events after since_rv it must replay first.

        Both happen without an await in between, so no write can fall in the gap.
        """
        if since_rv < self.compacted_rv:
            raise StorageError(
                410, "Expired", f"too old resource version: {since_rv} ({self.compacted_rv})"
            )
        watcher = Watcher(type_id(rt), namespace, matches)
        replay = [e for e in self.log if e.rv > since_rv and e.resource == watcher.resource]
        self.watchers.add(watcher)
        return watcher, replay

    def unsubscribe(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def expire_watchers(self) -> None:
        """End every open watch with an ERROR 410, as an apiserver does after compaction."""
        self.compact()
        for watcher in list(self.watchers):
            watcher.queue.put_nowait(None)
