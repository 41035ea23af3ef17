"""The benchmark code runs, and counts what it should; its timings are not judged here.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_bench_smoke.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from bench import harness
from bench import workload as bench_workload
from bench.workload import MODELS, SERVICES_WITH_PODS, has_conditions
from objtypes import Obj


@pytest.mark.server  # the test API server, through the bench harness
async def test_product_burst_sees_every_status_and_reports_memory() -> None:
    result = await harness.run("product", MODELS, objects=60, workers=2)
    assert result.objects == 60
    assert len(result.latencies_ms) == 60
    assert 0 < result.p50_ms <= result.p99_ms
    stats = result.stats
    assert stats["objects"] == 61  # and the warm-up object
    # One reconcile per Model: its own status echo is filtered.
    assert stats["reconciles"] == 61
    # Two condition transitions per Model, each one Event, none dropped.
    assert (stats["events_written"], stats["events_dropped"]) == (122, 0)
    assert stats["cache_bytes_per_object"] > 500  # a cached Model with its status is not tiny


@pytest.mark.server  # the test API server, through the bench harness
async def test_services_with_pods_are_each_handled() -> None:
    result = await harness.run("product", SERVICES_WITH_PODS, objects=30, workers=2)
    assert len(result.latencies_ms) == 30
    assert result.stats["objects"] == 31  # and the warm-up service


@pytest.mark.server  # the test API server, through the bench harness
async def test_services_ceiling_handles_every_service_with_the_products_writes() -> None:
    result = await harness.run("ceiling", SERVICES_WITH_PODS, objects=20, workers=2)
    assert len(result.latencies_ms) == 20
    assert result.stats["busy_until"] >= result.started_at  # its Events were written


@pytest.mark.server  # the test API server, through the bench harness
async def test_ceiling_handles_every_object() -> None:
    result = await harness.run("ceiling", MODELS, objects=60, workers=2)
    assert len(result.latencies_ms) == 60


@pytest.mark.server  # the test API server, through the bench harness
async def test_steady_load_creates_at_the_rate_asked() -> None:
    result = await harness.run("product", MODELS, rate=40, seconds=0.5, workers=2)
    assert result.objects == 20
    assert len(result.latencies_ms) == 20


@pytest.mark.server  # the test API server, through the bench harness
@pytest.mark.skipif(not harness.kopf_installed(), reason="kopf (the bench extra) not installed")
async def test_kopf_does_the_same_job() -> None:
    result = await harness.run("kopf", MODELS, objects=20)
    assert len(result.latencies_ms) == 20


def _written_statuses(sut: str) -> tuple[bench_workload.Workload, dict[str, Obj]]:
    """MODELS, keeping each Model's status as the harness's watch sees it handled."""
    seen: dict[str, Obj] = {}

    def handled(obj: Obj) -> bool:
        if not has_conditions(obj):
            return False
        status = dict(obj["status"])
        status["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status["conditions"]
        ]
        seen[obj["metadata"]["name"]] = status
        return True

    return dataclasses.replace(MODELS, name=f"Models by {sut}", handled=handled), seen


@pytest.mark.server  # the test API server, through the bench harness
@pytest.mark.skipif(not harness.kopf_installed(), reason="kopf (the bench extra) not installed")
async def test_the_ceiling_and_kopf_write_the_products_status() -> None:
    """The comparisons are of the same writes: every Model (one per GPU count the
    workload makes) gets the same status from each system, but its time."""
    written = {}
    for sut in ("product-quiet", "ceiling-quiet", "kopf"):
        workload, seen = _written_statuses(sut)
        await harness.run(sut, workload, objects=4, workers=2)
        assert len(seen) == 5, sut  # and the warm-up Model
        written[sut] = seen
    product = written.pop("product-quiet")
    # Each writes the cacheKey of the first Model of the spec it saw (the same length).
    for sut, seen in written.items():
        for name, status in seen.items():
            assert len(status["cacheKey"]) == len(product[name]["cacheKey"]), (sut, name)
            assert {**status, "cacheKey": product[name]["cacheKey"]} == product[name], (sut, name)
