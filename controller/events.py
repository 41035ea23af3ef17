"""Kubernetes Events for the objects the controller manages (core/v1, as kubectl shows them).

Recorded the way client-go's broadcaster does it, off the reconcile's critical path:

    record() ──> spam filter ──> bounded buffer ──> writer tasks ──> POST / PATCH Event
                 (per object)    (drops counted)    (one per shard)

- `record` only queues: a reconcile never waits for an Event's round trip.
- Repeats of the same type, reason and message on the same object are folded into one
  Event whose count and lastTimestamp go up; repeats still waiting in the buffer are
  merged before any request is made.
- Each object has a token bucket (client-go's defaults: a burst of 25, then one per
  five minutes), so a hot loop cannot flood the namespace.
- When the buffer is full the Event is dropped, never the reconcile slowed; drops are
  counted by reason in `llmkube_events_dropped_total`.
- Events of one object always go to the same writer, so their order and counts hold.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import structlog

from metrics.events import EventMetrics
from objtypes import Obj

from . import logging as log_setup
from .clock import now as _now
from .errors import ApiError
from .kube import KubeClient
from .resources import EVENT

NORMAL, WARNING = "Normal", "Warning"
log = structlog.get_logger("events")

# client-go's LRU sizes and per-object spam budget (tools/record). Its buffer holds 1,000
# Events; ours 10,000 (about 10 MB at worst), so that creating a few thousand objects at
# once, two Events each, loses none while the writers catch up.
DEFAULT_BUFFER = 10_000
DEFAULT_WRITERS = 8
LRU_SIZE = 4096
SPAM_BURST = 25
SPAM_QPS = 1 / 300
MESSAGE_LIMIT = 1024


class _LRU(OrderedDict[str, Any]):
    """A dict that forgets its least recently used keys beyond `size`."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def touch(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Pending:
    """One Event to write, with the repeats that arrived before it was written."""

    key: str  # name of the Event object: the object's name and a digest of what happened
    shard: int
    involved: Obj
    type_: str
    reason: str
    message: str
    first: str
    last: str
    repeats: int = 1


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        component: str = "llmkube-controller",
        *,
        metrics: EventMetrics | None = None,
        buffer: int = DEFAULT_BUFFER,
        writers: int = DEFAULT_WRITERS,
        spam_burst: int = SPAM_BURST,
        spam_qps: float = SPAM_QPS,
    ) -> None:
        self.client = client
        self.component = component
        self.host = socket.gethostname()
        self.metrics = metrics
        self.buffer = buffer
        self.spam_burst = spam_burst
        self.spam_qps = spam_qps
        self._queues: list[asyncio.Queue[_Pending]] = [asyncio.Queue() for _ in range(writers)]
        self._waiting: dict[str, _Pending] = {}  # queued, not yet taken by a writer
        self._queued = 0
        self._counts = _LRU(LRU_SIZE)  # Event name -> count written so far
        self._buckets = _LRU(LRU_SIZE)  # object uid -> its spam budget
        self._writers: list[asyncio.Task[None]] = []
        self.dropped = 0  # for tests and the bench; the metric is the operator's view
        self._dropped_by: dict[str, Any] = {}  # why -> its metric child, bound once

    # -- the reconcile side: synchronous, no I/O ------------------------------------

    async def record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        """Queue an Event; returns at once. Kept async for callers written against I/O."""
        self.emit(obj, type_, reason, message)

    def emit(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
        if not self._allow(uid):
            self._drop("spam", reason)
            return
        if self._queued >= self.buffer and not self._waiting:
            # Full, and no queued Event this one could fold into: drop it before paying
            # for its name (what the checks below would conclude, sooner).
            self._drop("buffer_full", reason)
            return
        message = message[:MESSAGE_LIMIT]
        digest = hashlib.sha1(f"{uid}/{type_}/{reason}/{message}".encode()).hexdigest()[:10]
        key = f"{meta.get('name')}.{digest}"
        now = _now()
        waiting = self._waiting.get(key)
        if waiting is not None:  # the same Event is still queued: fold it there
            waiting.repeats += 1
            waiting.last = now
            return
        if self._queued >= self.buffer:
            self._drop("buffer_full", reason)
            return
        self._start()
        pending = _Pending(
            key=key,
            shard=hash(uid) % len(self._queues),
            involved={
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            type_=type_,
            reason=reason,
            message=message,
            first=now,
            last=now,
        )
        self._waiting[key] = pending
        self._queued += 1
        self._queues[pending.shard].put_nowait(pending)
        if self.metrics is not None:
            self.metrics.queued.set(self._queued)

    def _allow(self, uid: str) -> bool:
        """Token bucket per object, refilled at spam_qps up to spam_burst."""
        now = time.monotonic()
        bucket: _Bucket | None = self._buckets.get(uid)
        if bucket is None:
            bucket = _Bucket(float(self.spam_burst), now)
        else:
            bucket.tokens = min(self.spam_burst, bucket.tokens + (now - bucket.at) * self.spam_qps)
            bucket.at = now
        self._buckets.touch(uid, bucket)
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _drop(self, why: str, reason: str) -> None:
        self.dropped += 1
        if self.metrics is not None:
            child = self._dropped_by.get(why)
            if child is None:
                child = self._dropped_by[why] = self.metrics.dropped.labels(why)
            child.inc()
        if log_setup.debug_enabled:  # a filtered call still costs a bound logger
            log.debug("event dropped", why=why, reason=reason)

    # -- the writer side: background tasks ------------------------------------------

    def _start(self) -> None:
        if not self._writers:
            self._writers = [
                asyncio.create_task(self._drain(q), name=f"events-{i}")
                for i, q in enumerate(self._queues)
            ]

    async def _drain(self, queue: asyncio.Queue[_Pending]) -> None:
        while True:
            pending = await queue.get()
            # Taken: repeats from now on queue a new write rather than fold into this one.
            self._waiting.pop(pending.key, None)
            try:
                await self._write(pending)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # best effort: an Event never fails anything else
                self._drop("write_error", pending.reason)
                log.warning("could not record event", reason=pending.reason, error=repr(e))
            finally:
                self._queued -= 1
                if self.metrics is not None:
                    self.metrics.queued.set(self._queued)
                queue.task_done()

    async def _write(self, p: _Pending) -> None:
        namespace = p.involved.get("namespace") or "default"
        count = self._counts.get(p.key)
        if count is not None:
            try:
                await self._patch(namespace, p, count + p.repeats)
                return
            except ApiError as e:
                if not e.not_found:
                    raise
                # The folded Event expired or was deleted: start a new one.
        try:
            await self._create(namespace, p)
            self._counts.touch(p.key, p.repeats)
            self._count_write("create")
        except ApiError as e:
            if not e.conflict:
                raise
            # Written by an earlier run of the controller: continue its count.
            existing = await self.client.get(EVENT, namespace, p.key) or {}
            await self._patch(namespace, p, int(existing.get("count") or 1) + p.repeats)

    async def _patch(self, namespace: str, p: _Pending, count: int) -> None:
        await self.client.patch(EVENT, namespace, p.key, {"count": count, "lastTimestamp": p.last})
        self._counts.touch(p.key, count)
        self._count_write("patch")

    def _count_write(self, action: str) -> None:
        if self.metrics is not None:
            self.metrics.written.labels(action).inc()

    async def _create(self, namespace: str, p: _Pending) -> None:
        await self.client.create(
            EVENT,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": p.key, "namespace": namespace},
                "involvedObject": p.involved,
                "type": p.type_,
                "reason": p.reason,
                "message": p.message,
                "source": {"component": self.component, "host": self.host},
                "reportingComponent": self.component,
                "reportingInstance": self.host,
                "firstTimestamp": p.first,
                "lastTimestamp": p.last,
                "count": p.repeats,
            },
        )

    # -- lifecycle -------------------------------------------------------------------

    @property
    def queued(self) -> int:
        return self._queued

    async def flush(self) -> None:
        """Until every Event queued so far has been written (or given up on)."""
        await asyncio.gather(*(q.join() for q in self._queues))

    async def stop(self, timeout: float = 2.0) -> None:
        """Write what is queued for up to `timeout` seconds, then stop the writers."""
        if self._writers:
            try:
                await asyncio.wait_for(self.flush(), timeout)
            except TimeoutError:
                log.warning("events not written at shutdown", queued=self._queued)
        for task in self._writers:
            task.cancel()
        await asyncio.gather(*self._writers, return_exceptions=True)
        self._writers = []
