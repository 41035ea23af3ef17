"""Rate limiters for requeues, the ones client-go's DefaultControllerRateLimiter combines.

Per item, exponential backoff on consecutive failures (5 ms doubling to 1000 s); across
all items, a token bucket (10 qps, burst 100) so that a flood of failures cannot
hammer the apiserver. The delay is the larger of the two.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from .clock import REAL, Clock


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds to wait before the item may be processed again (reserves the slot)."""
        ...

    def forget(self, item: Hashable) -> None:
        """The item succeeded: its failure history is dropped."""
        ...

    def num_requeues(self, item: Hashable) -> int: ...


class ItemExponentialFailureRateLimiter:
    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        if exponent > 62:  # 2**exponent would overflow what the cap allows anyway
            return self.max_delay
        return float(min(self.base_delay * 2**exponent, self.max_delay))

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket shared by all items; each `when` reserves one token."""

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock = REAL) -> None:
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    def when(self, item: Hashable) -> float:
        now = self.clock.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(
    base_delay: float = 0.005,
    max_delay: float = 1000.0,
    qps: float = 10.0,
    burst: int = 100,
    clock: Clock = REAL,
) -> MaxOfRateLimiter:
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base_delay, max_delay),
        BucketRateLimiter(qps, burst, clock),
    )
