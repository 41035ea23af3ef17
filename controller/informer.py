"""List-then-watch informer over raw watch streams, with a local cache.

The loop is the one client-go's reflector runs:
  1. list, replace the cache (telling handlers what changed while we were not watching),
  2. watch from the list's resourceVersion, applying each event to the cache,
  3. when the stream ends or breaks, resume watching from the last resourceVersion seen
     (bookmarks advance it without carrying an object), with backoff on errors,
  4. when the apiserver answers 410 Gone, that resourceVersion is compacted away: relist,
  5. when the server has not reached the resourceVersion we hold (an apiserver restarted
     on empty or restored storage: its resourceVersions started over), the cache
     describes another server: relist, dropping ghosts (a DELETED event each).

Step 5 cannot wait for the server to say so: kube-apiserver accepts a watch from a
resourceVersion it has not reached and stays silent until it gets there, sending
nothing at or below it (and client-go's reflector resumes such a watch, missing every
object created since the restore). So, after a watch broke because the network or the
server went away, the informer asks before resuming: a one-item list from last_rv
(resourceVersionMatch=NotOlderThan), which kube-apiserver refuses with 504
"Too large resource version" when it is behind. A restored server may already have
passed last_rv by then (busy, or the reconnect came late); where the server could not
be reached at all, the informer therefore relists instead of resuming. A stream cut
while the server stays reachable resumes without a list (client-go's behaviour).

Nothing an object or a handler does can end the loop: a handler that raises is logged
with the object's key and counted, a line that cannot be decoded is skipped the same
way, and any other failure restarts the loop after backoff (run() returns only when
cancelled). `failure` holds the last unexpected error until the loop recovers.

Objects are cached without metadata.managedFields, and compacted (see `transform`).
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog

from metrics.informer import InformerMetrics
from objtypes import Obj

from .clock import REAL, Clock
from .errors import ApiError, Gone, status_causes
from .http1 import ConnectFailed
from .kube import INVALID, KubeClient
from .resources import ResourceType, object_key

log = structlog.get_logger("informer")

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True)
class Event:
    type: str
    obj: Obj
    old: Obj | None = None


Handler = Callable[[Event], None]


class Store:
    """Objects of one type by namespace and name; what reconcilers read instead of the API."""

    def __init__(self) -> None:
        self._by_ns: dict[str, dict[str, Obj]] = {}
        self._count = 0

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._by_ns.get(namespace, {}).get(name)

    def list(self, namespace: str | None = None) -> list[Obj]:
        if namespace is not None:
            return list(self._by_ns.get(namespace, {}).values())
        return [o for bucket in self._by_ns.values() for o in bucket.values()]

    def __len__(self) -> int:
        return self._count

    def put(self, obj: Obj) -> Obj | None:
        ns, name = object_key(obj)
        bucket = self._by_ns.setdefault(ns, {})
        old = bucket.get(name)
        bucket[name] = obj
        self._count += old is None
        return old

    def remove(self, obj: Obj) -> Obj | None:
        ns, name = object_key(obj)
        old = self._by_ns.get(ns, {}).pop(name, None)
        self._count -= old is not None
        return old


_COMPACT_DEPTH = 32  # deeper parts (rare; up to jsondepth's 512) are kept as decoded


def _compact(value: Any, depth: int = 0) -> Any:
    """The same JSON value, with dict keys and short strings interned: every cached
    object repeats the same keys and most of the same values ("True", "Ready", the
    apiVersion...), which are then held once instead of once per object."""
    if depth > _COMPACT_DEPTH:
        return value
    kind = type(value)
    if kind is dict:
        return _compact_dict(value, depth)
    if kind is list:
        return _compact_list(value, depth)
    if kind is str and len(value) <= 64:
        return _intern(value)
    return value


# Every cached object passes through these twice per write (its event and our status
# echo): written as loops over exact JSON types, about twice as fast as one recursive
# function with isinstance checks.
def _compact_dict(value: dict[str, Any], depth: int) -> dict[str, Any]:
    deeper = depth + 1
    if deeper > _COMPACT_DEPTH:  # its values are kept as decoded
        return {_intern(k): v for k, v in value.items()}
    out: dict[str, Any] = {}
    for k, v in value.items():
        kind = type(v)
        if kind is str:
            if len(v) <= 64:
                v = _intern(v)
        elif kind is dict:
            v = _compact_dict(v, deeper)
        elif kind is list:
            v = _compact_list(v, deeper)
        out[_intern(k)] = v
    return out


def _compact_list(value: list[Any], depth: int) -> list[Any]:
    deeper = depth + 1
    if deeper > _COMPACT_DEPTH:
        return list(value)
    out: list[Any] = []
    for v in value:
        kind = type(v)
        if kind is str:
            if len(v) <= 64:
                v = _intern(v)
        elif kind is dict:
            v = _compact_dict(v, deeper)
        elif kind is list:
            v = _compact_list(v, deeper)
        out.append(v)
    return out


_intern = sys.intern


# Per type, what the cache leaves out beyond managedFields, as controller-runtime's
# per-object cache transforms do: of a Node, reconcilers read its labels, taints and
# allocatable resources, never the image list (often its largest part) or daemon facts.
_DROPPED_STATUS: dict[str, tuple[str, ...]] = {
    "Node": ("images", "nodeInfo", "volumesInUse", "volumesAttached", "daemonEndpoints"),
}


def transform(obj: Obj, kind: str = "") -> Obj:
    """What the cache holds of an object, as controller-runtime's default transform:
    without metadata.managedFields (often its largest part, read by no reconciler),
    and compacted (see _compact): about 40% of a Model's bytes. kind: the informer's,
    for the fields its objects need not keep (_DROPPED_STATUS)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    status = obj.get("status")
    if isinstance(status, dict):
        for key in _DROPPED_STATUS.get(kind, ()):
            status.pop(key, None)
    compact: Obj = _compact(obj)
    return compact


def resource_version(obj: Obj) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion", "")) if isinstance(meta, dict) else ""


def _uid(obj: Obj) -> str:
    meta = obj.get("metadata")
    return str(meta.get("uid", "")) if isinstance(meta, dict) else ""


def _rv_number(rv: str) -> int | None:
    """resourceVersions are opaque, but every apiserver we know sends integers."""
    try:
        return int(rv)
    except ValueError:
        return None


def _went_backwards(new: str, last: str) -> bool:
    n, o = _rv_number(new), _rv_number(last)
    return n is not None and o is not None and n < o


def _key(obj: Obj) -> str:
    ns, name = object_key(obj)
    return f"{ns}/{name}" if ns else name


class _Expired(Exception):
    """The resourceVersion we watch from is gone: relist."""


class _ServerReset(Exception):
    """The server's resourceVersions went backwards: it is not the one our cache came from."""


class Informer:
    def __init__(
        self,
        client: KubeClient,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout: int = 300,
        min_backoff: float = 0.2,
        max_backoff: float = 30.0,
        metrics: InformerMetrics | None = None,
        clock: Clock = REAL,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.clock = clock
        self.jitter = jitter  # in [0, 1): each backoff sleeps between half and all of it
        self.rt = rt
        self.namespace = namespace
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.store = Store()
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.last_rv = ""
        self._progress = 0  # events the current watch delivered
        # Counters that tests and benchmarks read: how often the loop had to start over.
        self.lists = 0
        self.watches = 0
        self.events = 0
        self.handler_errors = 0
        self.decode_errors = 0
        self.restarts = 0
        self.resets = 0  # relists because the server had not reached our resourceVersion
        self.probes = 0  # asked the server whether it reached last_rv (after a broken watch)
        self.failure: str | None = None  # the last unexpected error, until the loop recovers
        self.metrics = metrics
        if metrics:
            metrics.init_resource(rt.plural)
        self.log = log.bind(resource=rt.plural)

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def _dispatch(self, event: Event) -> None:
        self.events += 1
        for handler in self.handlers:
            try:
                handler(event)
            except Exception:  # a broken mapper must not stop the watch
                self.handler_errors += 1
                if self.metrics:
                    self.metrics.handler_errors.labels(self.rt.plural).inc()
                # structlog's exception() takes the message as `event`: name ours otherwise.
                self.log.exception(
                    "event handler failed", event_type=event.type, key=_key(event.obj)
                )

    def _bad_object(self, error: str, key: str) -> None:
        self.decode_errors += 1
        if self.metrics:
            self.metrics.decode_errors.labels(self.rt.plural).inc()
        self.log.error("object skipped: cannot decode it", key=key or "<unknown>", error=error)

    def _relisting(self, reason: str) -> None:
        if self.metrics:
            self.metrics.relists.labels(self.rt.plural, reason).inc()

    async def run(self) -> None:
        """Forever (until cancelled): an unexpected failure restarts the loop after backoff."""
        backoff = self.min_backoff
        while True:
            try:
                await self._run()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug or a hostile object: never let the informer die
                self.restarts += 1
                self.failure = f"{type(e).__name__}: {e}"[:300]
                if self.metrics:
                    self.metrics.restarts.labels(self.rt.plural).inc()
                self.log.exception("informer failed, restarting", rv=self.last_rv)
                backoff = await self._sleep(backoff)

    async def _run(self) -> None:
        backoff = self.min_backoff
        need_list, reason = True, "initial" if not self.lists else "restart"
        verify = False  # the last watch broke: ask the server before resuming from last_rv
        while True:
            try:
                if need_list:
                    self._relisting(reason)
                    await self._list()
                    need_list = verify = False
                    self.failure = None
                elif verify:
                    try:
                        await self._verify()
                    except ApiError as e:
                        if _too_large(e) or e.status == 429 or e.status >= 500:
                            raise
                        # Refused (a server that does not take the question): a list
                        # settles it, where asking again would never resume the watch.
                        need_list, reason = True, "unverified"
                        continue
                    verify = False
                await self._watch()
                backoff = self.min_backoff  # a stream that ended cleanly: resume at once
            except _Expired:
                self.log.info("resourceVersion expired, relisting", rv=self.last_rv)
                need_list, reason = True, "expired"
            except _ServerReset as e:
                self._server_reset(str(e))
                need_list, reason = True, "server_reset"
            except Gone:
                need_list, reason = True, "expired"
            except ApiError as e:
                if _too_large(e):  # asked for an RV this server has not reached: restored
                    self._server_reset(e.message)
                    need_list, reason = True, "server_reset"
                    continue
                self.log.warning("watch failed", status=e.status, error=e.message)
                wait = e.retry_after if e.retry_after is not None else 0.0
                backoff = await self._sleep(backoff, at_least=wait)
            except (aiohttp.ClientError, TimeoutError, ConnectionError, ValueError) as e:
                self.log.warning("watch connection lost", error=repr(e), rv=self.last_rv)
                if need_list:
                    pass  # the list is still to come, whatever went wrong
                elif _unreachable(e):
                    # What answers next may be another server (restored storage) whose
                    # resourceVersions have already passed ours: only a list can tell.
                    self.log.info("server unreachable, will relist", rv=self.last_rv)
                    need_list, reason = True, "unreachable"
                else:
                    verify = bool(self.last_rv)
                if self._progress:  # it was working: a dropped link, not a failing server
                    backoff = self.min_backoff
                backoff = await self._sleep(backoff)

    def _server_reset(self, why: str) -> None:
        self.resets += 1
        self.log.warning(
            "server has not reached our resourceVersion (restored or restarted on older "
            "storage), relisting",
            rv=self.last_rv,
            reason=why,
        )

    async def _verify(self) -> None:
        """Raise _ServerReset unless the server has reached last_rv.

        kube-apiserver refuses the read with 504 "Too large resource version" (raised
        here as ApiError, which the loop reads as a reset too); a server that answers
        anyway is caught by the resourceVersion it answers with.
        """
        self.probes += 1
        rv = await self.client.reached(
            self.rt, self.last_rv, self.namespace, label_selector=self.label_selector
        )
        if _went_backwards(rv, self.last_rv):
            raise _ServerReset(f"listed at {rv}, below {self.last_rv}")

    async def _sleep(self, backoff: float, at_least: float = 0.0) -> float:
        await self.clock.sleep(max(at_least, backoff * (0.5 + self.jitter() / 2)))
        return min(backoff * 2, self.max_backoff)

    async def _list(self) -> None:
        items, rv = await self.client.list(
            self.rt,
            self.namespace,
            label_selector=self.label_selector,
            on_bad_item=lambda e: self._bad_object(str(e), e.key),
        )
        self.lists += 1
        items = [transform(o, self.rt.kind) for o in items]
        fresh = {object_key(o): o for o in items}
        # Objects deleted while we were not watching (or that a restarted server never
        # had): their DELETED event was never seen.
        for gone in self.store.list():
            if object_key(gone) not in fresh:
                self.store.remove(gone)
                self._dispatch(Event(DELETED, gone))
        for obj in items:
            previous = self.store.put(obj)
            if previous is None:
                self._dispatch(Event(ADDED, obj))
            elif resource_version(previous) != resource_version(obj) or _uid(previous) != _uid(obj):
                # A restarted server can hand out the same resourceVersion again: uid tells.
                self._dispatch(Event(MODIFIED, obj, previous))
        self.last_rv = rv
        self.synced.set()

    async def _watch(self) -> None:
        self.watches += 1
        self._progress = 0
        stream = self.client.watch(
            self.rt,
            self.last_rv,
            self.namespace,
            label_selector=self.label_selector,
            timeout_seconds=self.watch_timeout,
        )
        async for raw in stream:
            type_, obj = raw.get("type"), raw.get("object") or {}
            if type_ == INVALID:
                self._bad_object(str(raw.get("error")), str(raw.get("key") or ""))
                continue
            if not isinstance(obj, dict):
                self._bad_object(f"watch event object is {type(obj).__name__}", "")
                continue
            rv = resource_version(obj)
            if rv and _went_backwards(rv, self.last_rv):
                raise _ServerReset(f"{type_} event at {rv}, below {self.last_rv}")
            if type_ == "ERROR":
                if obj.get("code") == 410:
                    raise _Expired()
                raise ApiError(
                    int(obj.get("code") or 500),
                    str(obj.get("reason", "")),
                    str(obj.get("message", "watch error")),
                    causes=status_causes(obj),
                )
            if type_ == "BOOKMARK":
                self.last_rv = rv or self.last_rv
                continue
            if type_ in (ADDED, MODIFIED):
                obj = transform(obj, self.rt.kind)
                old = self.store.put(obj)
                self._dispatch(Event(MODIFIED if old else ADDED, obj, old))
            elif type_ == DELETED:
                self._dispatch(Event(DELETED, obj, self.store.remove(obj)))
            self.last_rv = rv or self.last_rv
            self._progress += 1


def _too_large(e: ApiError) -> bool:
    """kube-apiserver's answer to a read from a resourceVersion it has not reached: the
    cause ResourceVersionTooLarge, or (servers before 1.17) a message saying so, as
    client-go's reflector reads it."""
    return "ResourceVersionTooLarge" in e.causes or (
        e.status in (500, 504) and "too large resource version" in e.message.lower()
    )


def _unreachable(e: BaseException) -> bool:
    """No connection could be made (refused, no route, name not found): aiohttp's
    ClientConnectorError (watches) or the lean transport's ConnectFailed (lists). A
    connection reset or cut mid-answer is not that: the server was there."""
    return isinstance(e, (aiohttp.ClientConnectorError, ConnectFailed))
