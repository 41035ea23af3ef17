"""A clock that moves only when the test says so (controller.clock.Clock's fake).

Sleeps and timers wait for `advance`; every sleep asked for is recorded, so a backoff
test asserts the exact schedule (0.05, 0.1, 0.2...) rather than counting what fits in a
wall-clock window.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class FakeTimer:
    due: float
    seq: int
    delay: float = field(compare=False)
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start
        self.sleeps: list[float] = []  # every sleep asked for, in order
        self._timers: list[FakeTimer] = []
        self._seq = itertools.count()

    def __call__(self) -> float:  # also usable where a plain () -> float clock is taken
        return self.t

    def monotonic(self) -> float:
        return self.t

    def call_later(self, delay: float, callback: Callable[[], object]) -> FakeTimer:
        timer = FakeTimer(self.t + delay, next(self._seq), delay, callback)
        self._timers.append(timer)
        return timer

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await woken
        finally:
            timer.cancel()

    def pending(self) -> list[float]:
        """The delays of the timers and sleeps not yet due, earliest first."""
        return [t.delay for t in sorted(self._live())]

    def _live(self) -> list[FakeTimer]:
        self._timers = [t for t in self._timers if not t.cancelled]
        return self._timers

    def advance(self, seconds: float) -> None:
        """Move time on, firing every timer that falls due on the way, in order."""
        self._advance_to(self.t + seconds)

    def _advance_to(self, until: float) -> None:
        while True:
            due = [t for t in self._live() if t.due <= until]
            if not due:
                break
            timer = min(due)
            self._timers.remove(timer)
            self.t = max(self.t, timer.due)
            timer.callback()
        self.t = until

    async def waiting(self, timeout: float = 10.0) -> None:
        """Until something waits on this clock (real time, a hang guard only): the task
        woken last has done its work and is asleep again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self._live():
            if loop.time() > deadline:
                raise AssertionError(f"nothing waits on the clock; sleeps so far {self.sleeps}")
            await asyncio.sleep(0.01)

    async def next(self, timeout: float = 10.0) -> float:
        """Once something waits on this clock, move time to the earliest, fire it, let the
        woken task run to its next await; return that delay."""
        await self.waiting(timeout)
        timer = min(self._live())
        self._advance_to(timer.due)
        for _ in range(3):
            await asyncio.sleep(0)
        return timer.delay
