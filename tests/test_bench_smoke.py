"""The benchmark code runs, and counts what it should; its timings are not judged here."""

from __future__ import annotations

import pytest

from bench import harness, queue_bench
from bench.report import table
from bench.workload import MODELS, SERVICES_WITH_PODS


async def test_queue_bench_counts_dedup() -> None:
    results = await queue_bench.run(adds=2_000, keys=200)
    assert [r.processed for r in results] == [2_000, 200, 200]
    assert results[1].dedup == 10.0


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


def test_table_aligns_columns() -> None:
    text = table("T", ["a", "bb"], [[1, 2.5], ["long", 12345.0]])
    lines = text.splitlines()
    assert lines[0] == "T"
    assert len({len(line) for line in lines[1:]}) == 1
    assert "12,345" in text and "2.500" in text
