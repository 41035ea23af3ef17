"""Read access to the informers' stores, by resource type, and what is derived from them.

Beside the stores the cache keeps:
- a parse memo: `parsed(rt, obj, parse)` runs `parse` on the spec once per object and
  generation (resourceVersion for objects without one; an exception it raises is
  remembered the same way), so a reconciler that reads many objects does not re-parse
  the ones whose spec did not change;
- indexes: `add_index(rt, name, fn)` files each object under the values fn gives it
  (client-go's Indexer, controller-runtime's field indexer), per namespace, and
  `by_index(rt, name, value, namespace)` reads them back without scanning the store;
  kept on every event (add, an update that changes the values, delete, relist);
- subscribers: handlers that see every event of a type before any event mapper does
  (the cache registers itself first on each informer), for indexes kept up to date
  from events (`extension` holds one such index per cache).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from objtypes import Obj

from .informer import DELETED, Event, Handler, Informer
from .resources import ResourceType, object_key

Objs = list[Obj]  # `list` is also a Cache method: annotations inside the class use this
T = TypeVar("T")
IndexFunc = Callable[[Obj], Iterable[str]]


class _Failed:
    """A parse that raised: the exception is raised again on every hit."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _Index:
    """value -> namespace -> names (insertion-ordered), and what each object is filed under."""

    __slots__ = ("_names", "_values", "fn")

    def __init__(self, fn: IndexFunc) -> None:
        self.fn = fn
        self._names: dict[str, dict[str, dict[str, None]]] = {}
        self._values: dict[tuple[str, str], tuple[str, ...]] = {}

    def put(self, obj: Obj) -> None:
        key = object_key(obj)
        values = tuple(dict.fromkeys(self.fn(obj)))
        if self._values.get(key, ()) == values:
            return  # the common update: nothing indexed moved
        self.remove(key)
        if values:
            self._values[key] = values
            ns, name = key
            for value in values:
                self._names.setdefault(value, {}).setdefault(ns, {})[name] = None

    def remove(self, key: tuple[str, str]) -> None:
        ns, name = key
        for value in self._values.pop(key, ()):
            by_ns = self._names[value]
            by_ns[ns].pop(name, None)
            if not by_ns[ns]:
                del by_ns[ns]
                if not by_ns:
                    del self._names[value]

    def keys(self, value: str, namespace: str | None) -> list[tuple[str, str]]:
        by_ns = self._names.get(value)
        if not by_ns:
            return []
        if namespace is not None:
            return [(namespace, name) for name in by_ns.get(namespace, ())]
        return [(ns, name) for ns, names in by_ns.items() for name in names]


class Cache:
    def __init__(self) -> None:
        self.informers: dict[ResourceType, Informer] = {}
        self._subscribers: dict[ResourceType, list[Handler]] = {}
        # rt -> parse function -> (namespace, name) -> (generation or resourceVersion, uid, value)
        self._parsed: dict[ResourceType, dict[Callable[[Any], Any], dict[Any, Any]]] = {}
        self._extensions: dict[str, Any] = {}
        self._indexes: dict[ResourceType, dict[str, _Index]] = {}

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

    def add_index(self, rt: ResourceType, name: str, fn: IndexFunc) -> None:
        """File rt's objects under fn(obj) (e.g. a label's value), per namespace.

        Adding the same index again is a no-op; another function under the same name
        is a programming error. Objects already cached are indexed at once."""
        indexes = self._indexes.setdefault(rt, {})
        existing = indexes.get(name)
        if existing is not None:
            if existing.fn is not fn:
                raise ValueError(f"index {name!r} of {rt.plural} already has another function")
            return
        index = indexes[name] = _Index(fn)
        for obj in self.list(rt):
            index.put(obj)

    def by_index(
        self, rt: ResourceType, name: str, value: str, namespace: str | None = None
    ) -> Objs:
        """The cached objects filed under value (in namespace; None: every namespace)."""
        index = self._indexes.get(rt, {}).get(name)
        if index is None:
            raise KeyError(f"no index {name!r} on {rt.plural}")
        found = (self.get(rt, ns, n) for ns, n in index.keys(value, namespace))
        return [obj for obj in found if obj is not None]

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
        indexes = self._indexes.get(rt, {}).values()
        if event.type == DELETED:
            key = object_key(event.obj)
            for memo in self._parsed.get(rt, {}).values():
                memo.pop(key, None)
            for index in indexes:
                index.remove(key)
        else:
            for index in indexes:
                index.put(event.obj)
        for handler in self._subscribers.get(rt, ()):
            handler(event)
