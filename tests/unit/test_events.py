"""The asynchronous Event recorder: queued off the reconcile path, folded, rate limited.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_events.py.
"""

from __future__ import annotations

from controller.events import NORMAL
from controller.kube import KubeClient
from tests.support.events import dropped, obj, recorder


async def test_write_failures_are_counted_not_raised() -> None:
    dead = await KubeClient.connect("http://127.0.0.1:9", timeout=2)  # nothing listens there
    try:
        rec, metrics = recorder(dead)
        await rec.record(obj("m"), NORMAL, "Ready", "ok")
        await rec.flush()
        assert dropped(metrics, "write_error") == 1
        await rec.stop()
    finally:
        await dead.close()
