"""The timestamp conditions and Events carry: formatted once per second, never stale."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from controller import clock


def _formatted(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_now_follows_the_clock_second_by_second(monkeypatch: pytest.MonkeyPatch) -> None:
    t = 1_796_316_001.2  # 2026-12-03T16:40:01.2Z
    monkeypatch.setattr(time, "time", lambda: t)
    first = clock.now()
    assert first == _formatted(t) == "2026-12-03T16:40:01Z"
    t += 0.7  # same second: the same text
    assert clock.now() == first
    t += 0.1  # the next second: a new one, never the cached one
    assert clock.now() == "2026-12-03T16:40:02Z"
    t += 86_400 * 365
    assert clock.now() == _formatted(t)
