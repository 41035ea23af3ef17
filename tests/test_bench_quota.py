"""The GPUQuota pipeline of the bench runs and counts what it should (no timing judged)."""

from __future__ import annotations

import pytest

from bench import harness
from bench.workload import SERVICES, SERVICES_UNDER_QUOTA, inference_service, quota_decided


def test_quota_workload_admits_three_in_four() -> None:
    setup = SERVICES_UNDER_QUOTA.setup(40)
    quota = [obj for rt, obj in setup if rt.kind == "GPUQuota"]
    assert [q["spec"]["gpuCount"] for q in quota] == [31]  # 30 of 40, and the warm-up
    assert not [obj for rt, obj in SERVICES.setup(40) if rt.kind == "GPUQuota"]
    assert not quota_decided(inference_service(1))


@pytest.mark.server  # the test API server, through the bench harness
async def test_services_under_a_quota_are_each_decided_once() -> None:
    result = await harness.run("product", SERVICES_UNDER_QUOTA, objects=40, workers=2)
    assert len(result.latencies_ms) == 40
    stats = result.stats
    assert stats["objects"] == 41  # and the warm-up service
    # Each service: its create, then its own Deployment's creation; a new service
    # admitted at the end of the line moves nobody else's admission.
    assert stats["reconciles"] / stats["objects"] < 2.5
