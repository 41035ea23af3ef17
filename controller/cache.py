"""Read access to the informers' stores, by resource type, and what is derived from them.

Beside the stores the cache keeps:
- a parse memo: `parsed(rt, obj, parse)` runs `parse` on the spec once per object and
  generation (resourceVersion for objects without one; an exception it raises is
  remembered the same way), so a reconciler that reads many objects does not re-parse
  the ones whose spec did not change;
- subscribers: handlers that see every event of a type before any event mapper does
  (the cache registers itself first on each informer), for indexes kept up to date
  from events (`extension` holds one such index per cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .informer import DELETED, Event, Handler, Informer
from .resources import ResourceType, object_key

Obj = dict[str, Any]
T = TypeVar("T")


class _Failed:
    """A parse that raised: the exception is raised again on every hit."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class Cache:
    def __init__(self) -> None:
        self.informers: dict[ResourceType, Informer] = {}
        self._subscribers: dict[ResourceType, list[Handler]] = {}
        # rt -> parse function -> (namespace, name) -> (generation or resourceVersion, uid, value)
        self._parsed: dict[ResourceType, dict[Callable[[Any], Any], dict[Any, Any]]] = {}
        self._extensions: dict[str, Any] = {}

    def add(self, informer: Informer) -> None:
        self.informers[informer.rt] = informer
        # First among the informer's handlers: memo and indexes are current before any
        # event mapper (which may read them) runs.
        informer.handlers.insert(0, lambda event: self._on_event(informer.rt, event))

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        informer = self.informers.get(rt)
        return informer.store.get(namespace, name) if informer is not None else None

    def list(self, rt: ResourceType, namespace: str | None = None) -> list[Obj]:
        informer = self.informers.get(rt)
        return informer.store.list(namespace) if informer is not None else []

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    # -- derived state -------------------------------------------------------------

    def parsed(self, rt: ResourceType, obj: Obj, parse: Callable[[Any], T]) -> T:
        """parse(obj["spec"]), computed once per version of the spec: per
        metadata.generation (which a status write leaves alone), else per resourceVersion."""
        meta = obj.get("metadata") or {}
        version = meta.get("generation") or meta.get("resourceVersion")
        uid = meta.get("uid")
        memo = self._parsed.setdefault(rt, {}).setdefault(parse, {})
        key = object_key(obj)
        hit = memo.get(key)
        if hit is not None and hit[0] == version and hit[1] == uid and version is not None:
            value = hit[2]
        else:
            try:
                value = parse(obj.get("spec"))
            except Exception as e:  # remembered like a value: the object has not changed
                value = _Failed(e)
            memo[key] = (version, uid, value)
        if isinstance(value, _Failed):
            raise value.error.with_traceback(None)
        return value  # type: ignore[no-any-return]

    def subscribe(self, rt: ResourceType, handler: Handler) -> None:
        """handler(event) for every event of rt, before the event mappers see it."""
        self._subscribers.setdefault(rt, []).append(handler)

    def extension(self, name: str, factory: Callable[[Cache], T]) -> T:
        """The one `name` object of this cache (e.g. an index), created on first use."""
        if name not in self._extensions:
            self._extensions[name] = factory(self)
        return self._extensions[name]  # type: ignore[no-any-return]

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if event.type == DELETED:
            key = object_key(event.obj)
            for memo in self._parsed.get(rt, {}).values():
                memo.pop(key, None)
        for handler in self._subscribers.get(rt, ()):
            handler(event)
