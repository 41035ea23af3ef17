"""Rate limiters: per-item exponential backoff, the overall token bucket, and their max."""

from __future__ import annotations

import pytest

from controller.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from tests.support.clock import FakeClock


def test_exponential_doubles_from_5ms_to_the_1000s_cap() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(22)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s: still under the cap
    assert delays[18:] == [1000.0] * 4
    assert limiter.num_requeues("a") == 22
    # Items back off independently; forget starts over.
    assert limiter.when("b") == pytest.approx(0.005)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_exponential_survives_huge_failure_counts() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    for _ in range(500):
        delay = limiter.when("x")
    assert delay == 1000.0


def test_bucket_allows_the_burst_then_10_per_second() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    # Tokens are reserved: the next ones queue up 0.1 s apart.
    assert bucket.when(100) == pytest.approx(0.1)
    assert bucket.when(101) == pytest.approx(0.2)
    clock.advance(10.0)  # 100 tokens refill, less the two already reserved
    assert bucket.when(102) == 0.0
    assert [bucket.when(i) for i in range(97)] == [0.0] * 97
    assert bucket.when("over") > 0


def test_default_limiter_takes_the_larger_delay() -> None:
    clock = FakeClock()
    limiter = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000), BucketRateLimiter(10, 2, clock)
    )
    assert limiter.when("a") == pytest.approx(0.005)  # bucket has tokens: backoff rules
    assert limiter.when("a") == pytest.approx(0.01)
    assert limiter.when("b") == pytest.approx(0.1)  # bucket empty: its delay is larger
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert isinstance(default_controller_rate_limiter(), MaxOfRateLimiter)
