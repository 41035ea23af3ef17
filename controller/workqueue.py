"""A rate-limited work queue with client-go's semantics, on asyncio.

- An item added many times before a worker takes it is processed once (dirty set).
- An item is never processed by two workers at once: added while in flight, it is
  queued again only when `done` is called (processing set).
- `add_after` holds an item back; the earliest of several delays wins.
- `add_rate_limited` delays by the rate limiter; `forget` clears its failure history.

One queue serves all reconcilers: each key names its controller, which the metrics
use as their `name` and `controller` labels, as controller-runtime's one queue per
controller would.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from metrics.workqueue import WorkqueueMetrics

from .clock import REAL, Clock, Timer
from .ratelimiter import RateLimiter, default_controller_rate_limiter

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):
    pass


class _Series:
    """One controller's children of the queue metrics."""

    def __init__(self, m: WorkqueueMetrics, controller: str) -> None:
        # workqueue_depth is read at scrape time: an int to count, not a locked gauge.
        self.depth = 0
        m.depth.labels(controller, controller).set_function(lambda: self.depth)
        self.adds = m.adds.labels(controller, controller)
        self.retries = m.retries.labels(controller, controller)
        self.queue_duration = m.queue_duration.labels(controller, controller)
        self.work_duration = m.work_duration.labels(controller, controller)


class RateLimitingQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        rate_limiter: RateLimiter | None = None,
        metrics: WorkqueueMetrics | None = None,
        controller_of: Callable[[K], str] = lambda item: "",
        clock: Clock = REAL,
    ) -> None:
        self.name = name
        self.clock = clock
        self._now = clock.monotonic  # bound once: read on every add, get and done
        self.rate_limiter = rate_limiter or default_controller_rate_limiter(clock=clock)
        self.metrics = metrics
        self.controller_of = controller_of
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: dict[K, float] = {}  # item -> when a worker took it
        self._enqueued_at: dict[K, float] = {}
        self._waiting: dict[K, tuple[float, Timer]] = {}
        self._has_items = asyncio.Event()
        self._shutting_down = False
        self._bound: dict[str, _Series] = {}

    # -- introspection ---------------------------------------------------------

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def processing(self) -> int:
        return len(self._processing)

    def num_requeues(self, item: K) -> int:
        return self.rate_limiter.num_requeues(item)

    def is_idle(self) -> bool:
        return not self._queue and not self._processing and not self._waiting

    # -- adding ----------------------------------------------------------------

    def _series(self, item: K) -> _Series | None:
        """The item's controller's metric series, bound once: label lookups are costly."""
        if self.metrics is None:
            return None
        controller = self.controller_of(item) or self.name
        series = self._bound.get(controller)
        if series is None:
            series = self._bound[controller] = _Series(self.metrics, controller)
            self._track_in_flight(controller)
        return series

    def add(self, item: K) -> None:
        if self._shutting_down or item in self._dirty:
            return
        series = self._series(item)
        if series is not None:
            series.adds.inc()
        self._dirty.add(item)
        if item in self._processing:
            return  # queued again by done()
        self._push(item, series)

    def _push(self, item: K, series: _Series | None) -> None:
        self._queue.append(item)
        self._enqueued_at[item] = self._now()
        if series is not None:
            series.depth += 1
        self._has_items.set()

    def add_after(self, item: K, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._now() + delay
        existing = self._waiting.get(item)
        if existing is not None:
            if existing[0] <= ready_at:
                return
            existing[1].cancel()
        timer = self.clock.call_later(delay, lambda: self._ready(item))
        self._waiting[item] = (ready_at, timer)

    def _ready(self, item: K) -> None:
        self._waiting.pop(item, None)
        self.add(item)

    def add_rate_limited(self, item: K) -> None:
        series = self._series(item)
        if series is not None:
            series.retries.inc()
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: K) -> None:
        self.rate_limiter.forget(item)

    # -- taking ----------------------------------------------------------------

    async def get(self) -> K:
        """The next item; the caller must call done(item) when finished with it."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown()
            self._has_items.clear()
            await self._has_items.wait()
        item = self._queue.popleft()
        if not self._queue:
            self._has_items.clear()
        now = self._now()
        enqueued = self._enqueued_at.pop(item, now)
        series = self._series(item)
        if series is not None:
            series.depth -= 1
            series.queue_duration.observe(now - enqueued)
        self._processing[item] = now
        self._dirty.discard(item)
        return item

    def done(self, item: K) -> None:
        started = self._processing.pop(item, None)
        series = self._series(item)
        if series is not None and started is not None:
            series.work_duration.observe(self._now() - started)
        if item in self._dirty:
            self._push(item, series)

    def shutdown(self) -> None:
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        self._has_items.set()

    # -- gauges computed at scrape time -------------------------------------------

    def _track_in_flight(self, controller: str) -> None:
        assert self.metrics is not None

        def in_flight() -> list[float]:
            now = self._now()
            return [
                now - started
                for item, started in self._processing.items()
                if (self.controller_of(item) or self.name) == controller
            ]

        self.metrics.unfinished_work.labels(controller, controller).set_function(
            lambda: sum(in_flight())
        )
        self.metrics.longest_running.labels(controller, controller).set_function(
            lambda: max(in_flight(), default=0.0)
        )
