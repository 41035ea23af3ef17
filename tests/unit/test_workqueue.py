"""The shared work queue: dedup, one worker per key, delays, rate-limited retries, metrics."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from controller.ratelimiter import ItemExponentialFailureRateLimiter
from controller.workqueue import QueueShutDown, RateLimitingQueue
from metrics.workqueue import WorkqueueMetrics
from tests.support.clock import FakeClock


def sample(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    value = registry.get_sample_value(metric, labels)
    return 0.0 if value is None else value


async def test_duplicate_adds_are_processed_once() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue("t")
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_item_added_while_processing_waits_for_done() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue("t")
    q.add("a")
    item = await q.get()
    q.add("a")  # changed again while a worker holds it
    assert len(q) == 0, "a second worker must not get the same key"
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    q.done(item)
    assert await asyncio.wait_for(getter, 1) == "a"


async def test_one_worker_per_key_under_concurrency() -> None:
    q: RateLimitingQueue[int] = RateLimitingQueue("t")
    active: set[int] = set()
    overlaps = 0
    processed = 0

    async def worker() -> None:
        nonlocal overlaps, processed
        while True:
            try:
                key = await q.get()
            except QueueShutDown:
                return
            if key in active:
                overlaps += 1
            active.add(key)
            await asyncio.sleep(0.001)
            active.discard(key)
            processed += 1
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    for round_ in range(50):
        for key in range(5):
            q.add(key)
        await asyncio.sleep(0.0005 * (round_ % 3))
    while not q.is_idle():  # noqa: ASYNC110 - polling the queue under test is the point
        await asyncio.sleep(0.005)
    q.shutdown()
    await asyncio.gather(*workers)
    assert overlaps == 0
    assert 5 <= processed < 250, "dedup folds adds made while a key waits"


async def test_add_after_keeps_the_earliest_delay() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue("t", clock=clock)
    q.add_after("a", 10)
    q.add_after("a", 0.02)
    q.add_after("a", 5)
    assert q.waiting == 1
    assert clock.pending() == [0.02], "the later ones are dropped, the 10 s one cancelled"
    clock.advance(0.01)
    assert len(q) == 0
    assert await clock.next() == 0.02
    assert len(q) == 1 and q.waiting == 0
    assert await asyncio.wait_for(q.get(), 1) == "a"
    assert clock.pending() == []


async def test_rate_limited_retries_back_off_and_forget_resets() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(
        "t", rate_limiter=ItemExponentialFailureRateLimiter(0.02, 1), clock=clock
    )
    delays = []
    for _ in range(7):
        q.add_rate_limited("a")
        assert q.waiting == 1 and len(q) == 0
        delays.append(await clock.next())
        item = await asyncio.wait_for(q.get(), 1)
        q.done(item)
    assert delays == [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0]  # doubling to the cap
    assert q.num_requeues("a") == 7
    q.forget("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    assert clock.pending() == [0.02], "forget starts the backoff over"


async def test_the_default_limiter_runs_on_the_queue_clock() -> None:
    """Past the bucket's burst of 100, retries of different items queue up 0.1 s apart."""
    clock = FakeClock()
    q: RateLimitingQueue[int] = RateLimitingQueue("t", clock=clock)
    for i in range(102):
        q.add_rate_limited(i)
    assert clock.pending() == [0.005] * 100 + [0.1, 0.2]


async def test_shutdown_wakes_waiting_workers() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue("t")
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    q.add_after("late", 60)
    q.shutdown()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(getter, 1)
    q.add("ignored")
    assert len(q) == 0 and q.waiting == 0


async def test_metrics_follow_depth_adds_retries_and_durations() -> None:
    registry = CollectorRegistry()
    q: RateLimitingQueue[tuple[str, str]] = RateLimitingQueue(
        "llmkube",
        metrics=WorkqueueMetrics(registry),
        controller_of=lambda k: k[0],
        rate_limiter=ItemExponentialFailureRateLimiter(0.001, 0.01),
        clock=FakeClock(),
    )
    q.add(("model", "a"))
    q.add(("model", "a"))
    q.add(("gpuquota", "b"))
    # name = controller, as controller-runtime's one queue per controller labels it.
    labels = {"name": "model", "controller": "model"}
    assert sample(registry, "workqueue_depth", **labels) == 1
    assert sample(registry, "workqueue_adds_total", **labels) == 1  # the duplicate is not an add
    clock = q.clock
    assert isinstance(clock, FakeClock)
    clock.advance(0.25)  # waited in the queue
    item = await q.get()
    assert sample(registry, "workqueue_depth", **labels) == 0
    clock.advance(1.5)  # worked on
    assert sample(registry, "workqueue_unfinished_work_seconds", **labels) == pytest.approx(1.5)
    assert sample(registry, "workqueue_longest_running_processor_seconds", **labels) == (
        pytest.approx(1.5)
    )
    q.done(item)
    assert sample(registry, "workqueue_work_duration_seconds_count", **labels) == 1
    assert sample(registry, "workqueue_work_duration_seconds_sum", **labels) == pytest.approx(1.5)
    assert sample(registry, "workqueue_queue_duration_seconds_count", **labels) == 1
    assert sample(registry, "workqueue_queue_duration_seconds_sum", **labels) == (
        pytest.approx(0.25)
    )
    q.add_rate_limited(("model", "a"))
    assert sample(registry, "workqueue_retries_total", **labels) == 1
    assert sample(registry, "workqueue_depth", name="gpuquota", controller="gpuquota") == 1
