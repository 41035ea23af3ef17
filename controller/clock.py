"""Timestamps as Kubernetes writes them (RFC 3339, UTC, whole seconds)."""

from __future__ import annotations

import time

_last: tuple[int, str] = (-1, "")


def now() -> str:
    """The current second, e.g. 2026-12-03T16:20:01Z: formatted once per second, not per
    call (every condition that changes and every Event carries one)."""
    global _last
    second = int(time.time())
    if _last[0] != second:
        _last = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _last[1]
