"""The work queue alone: adds/s and dedup, against a plain asyncio.Queue in the same run."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from controller.workqueue import RateLimitingQueue
from metrics.workqueue import WorkqueueMetrics


@dataclass
class QueueResult:
    name: str
    adds: int
    processed: int
    add_rate: float  # adds per second
    drain_rate: float  # items taken (and done) per second

    @property
    def dedup(self) -> float:
        return self.adds / self.processed if self.processed else 0.0


async def _rate_limiting(adds: int, keys: int, with_metrics: bool) -> QueueResult:
    metrics = WorkqueueMetrics(CollectorRegistry()) if with_metrics else None
    q: RateLimitingQueue[tuple[str, int]] = RateLimitingQueue(
        "bench", metrics=metrics, controller_of=lambda k: k[0]
    )
    items = [("model", i % keys) for i in range(adds)]
    start = time.perf_counter()
    for item in items:
        q.add(item)
    added = time.perf_counter()
    processed = 0
    while len(q):
        item = await q.get()
        q.done(item)
        processed += 1
    drained = time.perf_counter()
    name = "RateLimitingQueue" + (" + metrics" if with_metrics else "")
    return QueueResult(
        name, adds, processed, adds / (added - start), processed / max(drained - added, 1e-9)
    )


async def _plain(adds: int, keys: int) -> QueueResult:
    q: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    items = [("model", i % keys) for i in range(adds)]
    start = time.perf_counter()
    for item in items:
        q.put_nowait(item)
    added = time.perf_counter()
    processed = 0
    while not q.empty():
        await q.get()
        q.task_done()
        processed += 1
    drained = time.perf_counter()
    return QueueResult(
        "asyncio.Queue (baseline)",
        adds,
        processed,
        adds / (added - start),
        processed / max(drained - added, 1e-9),
    )


async def run(adds: int = 200_000, keys: int = 20_000) -> list[QueueResult]:
    return [
        await _plain(adds, keys),
        await _rate_limiting(adds, keys, with_metrics=False),
        await _rate_limiting(adds, keys, with_metrics=True),
    ]
