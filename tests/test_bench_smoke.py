"""The benchmark code runs, and counts what it should; its timings are not judged here."""

from __future__ import annotations

from bench import pipeline_bench, queue_bench
from bench.report import table


async def test_queue_bench_counts_dedup() -> None:
    results = await queue_bench.run(adds=2_000, keys=200)
    assert [r.processed for r in results] == [2_000, 200, 200]
    assert results[1].dedup == 10.0


async def test_pipeline_bench_sees_every_status() -> None:
    result = await pipeline_bench.run(60, workers=2)
    assert result.objects == 60
    assert result.reconciles >= 60
    assert result.events >= 60
    assert 0 < result.p50_ms <= result.p99_ms
    assert result.bytes_per_object > 500  # a cached Model with its status is not tiny


def test_table_aligns_columns() -> None:
    text = table("T", ["a", "bb"], [[1, 2.5], ["long", 12345.0]])
    lines = text.splitlines()
    assert lines[0] == "T"
    assert len({len(line) for line in lines[1:]}) == 1
    assert "12,345" in text and "2.500" in text
