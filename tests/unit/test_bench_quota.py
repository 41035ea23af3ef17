"""The GPUQuota pipeline of the bench runs and counts what it should (no timing judged).

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_bench_quota.py.
"""

from __future__ import annotations

from bench.workload import SERVICES, SERVICES_UNDER_QUOTA, inference_service, quota_decided


def test_quota_workload_admits_three_in_four() -> None:
    setup = SERVICES_UNDER_QUOTA.setup(40)
    quota = [obj for rt, obj in setup if rt.kind == "GPUQuota"]
    assert [q["spec"]["gpuCount"] for q in quota] == [31]  # 30 of 40, and the warm-up
    assert not [obj for rt, obj in SERVICES.setup(40) if rt.kind == "GPUQuota"]
    assert not quota_decided(inference_service(1))
