"""Issue 13 (1, 3): the runtime is sized from the claims when `count` is absent, and
status.allocation shows what DRA allocated, on a simulated DRA-only cluster.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_dra_sizing.py.
"""

from __future__ import annotations

from objtypes import Obj
from reconcilers.inferenceservice.pods import live_pods


def test_finished_and_terminating_pods_are_not_counted() -> None:
    """An evicted (Failed) or terminating pod holds no devices the service can use."""

    def pod(name: str, phase: str, deleting: bool = False) -> Obj:
        meta: Obj = {"name": name}
        if deleting:
            meta["deletionTimestamp"] = "2026-12-03T00:00:00Z"
        return {"metadata": meta, "status": {"phase": phase}}

    pods = [
        pod("running", "Running"),
        pod("pending", "Pending"),
        pod("evicted", "Failed"),
        pod("done", "Succeeded"),
        pod("going", "Running", deleting=True),
    ]
    assert [p["metadata"]["name"] for p in live_pods(pods)] == ["running", "pending"]
