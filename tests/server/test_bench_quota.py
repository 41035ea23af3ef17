"""The GPUQuota pipeline of the bench runs and counts what it should (no timing judged).

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_bench_quota.py.
"""

from __future__ import annotations

import pytest

from bench import harness
from bench.workload import SERVICES_UNDER_QUOTA


@pytest.mark.server  # the test API server, through the bench harness
async def test_services_under_a_quota_are_each_decided_once() -> None:
    result = await harness.run("product", SERVICES_UNDER_QUOTA, objects=40, workers=2)
    assert len(result.latencies_ms) == 40
    stats = result.stats
    assert stats["objects"] == 41  # and the warm-up service
    # Each service: its create, then its own Deployment's creation; a new service
    # admitted at the end of the line moves nobody else's admission.
    assert stats["reconciles"] / stats["objects"] < 2.5
