"""Timestamps as Kubernetes writes them (RFC 3339, UTC, whole seconds), and the clock
the rate limiter, work queue, informer backoff and leader election run on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

_last: tuple[int, str] = (-1, "")


def wall() -> float:
    """Wall-clock seconds (time.time) as reconciles read them: the time conditions carry
    and the deadlines they compute from it (a pod's lifetime, a held rollout's timeout).
    One function, so a test moves both at once (monkeypatch controller.clock.wall)."""
    return time.time()


def now() -> str:
    """The current second, e.g. 2026-12-03T16:20:01Z: formatted once per second, not per
    call (every condition that changes and every Event carries one)."""
    global _last
    second = int(wall())
    if _last[0] != second:
        _last = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _last[1]


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time as the backoff loops see it: injected so tests can assert exact schedules
    (tests/support/clock.py) instead of counting what fits in a wall-clock window."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    def call_later(self, delay: float, callback: Callable[[], object]) -> Timer: ...


class RealClock:
    """time.monotonic and the running event loop (whose time() is time.monotonic)."""

    monotonic = staticmethod(time.monotonic)  # itself: no extra call on the queue's hot path

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def call_later(self, delay: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_later(delay, callback)


REAL = RealClock()
