"""The benchmark code runs, and counts what it should; its timings are not judged here.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_bench_smoke.py.
"""

from __future__ import annotations

import pytest

from bench import harness
from bench.workload import MODELS, SERVICES_WITH_PODS


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
