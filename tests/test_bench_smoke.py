"""The benchmark code runs, and counts what it should; its timings are not judged here."""

from __future__ import annotations

import re

import pytest

from bench import harness, kube, queue_bench
from bench.__main__ import Figures, main, parser, pods_line, servers_section
from bench.report import table
from bench.workload import MODELS, SERVICES_WITH_PODS

from .support.tables import table_titled


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
async def test_services_ceiling_handles_every_service_with_the_products_writes() -> None:
    result = await harness.run("ceiling", SERVICES_WITH_PODS, objects=20, workers=2)
    assert len(result.latencies_ms) == 20
    assert result.stats["busy_until"] >= result.started_at  # its Events were written


def test_pods_line_is_in_the_form_a_script_reads() -> None:
    pattern = re.compile(
        r"^pod-services on (kube-apiserver|the test server): "
        r"product/ceiling (\d+\.\d\d), reconciles/svc (\d+\.\d)$"
    )
    kube_line = pods_line("kube-apiserver v1.34.4", 0.934, 1.64)
    assert kube_line == "pod-services on kube-apiserver: product/ceiling 0.93, reconciles/svc 1.6"
    test_line = pods_line("test server", 1.0, 1.05)
    assert test_line == "pod-services on the test server: product/ceiling 1.00, reconciles/svc 1.1"
    for line in (kube_line, test_line):
        assert pattern.match(line)


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


async def test_kube_section_is_skipped_saying_why_without_binaries(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("K8S_VERSION", "1.0.0")  # a version never built here
    reason = kube.unavailable()
    assert reason is not None
    assert "kube-apiserver" in reason and "make kube-binaries" in reason
    await main(parser().parse_args(["--servers=kube", "--queue-adds=0"]))
    out = capsys.readouterr().out
    assert f"Real apiserver skipped: {reason}" in out
    assert "Load average at the end" in out


def test_unknown_server_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--servers=testserver,minikube"])
    assert "unknown server 'minikube'" in capsys.readouterr().err


def test_both_servers_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    test, real = Figures("test server"), Figures("kube-apiserver v1.34.4")
    for figures, product, ceiling in ((test, 1000.0, 1250.0), (real, 300.0, 200.0)):
        cpu = {"CPU sut": 0.5, "CPU server": 1.0, "CPU bench": 0.25}
        figures.models[500, "product"] = {"status": product, "drained": product, **cpu}
        figures.models[500, "ceiling"] = {"status": ceiling, "drained": ceiling, **cpu}
        figures.pods[100] = {
            "services/s": product / 10,
            "reconciles/svc": 3.0,
            "CPU sut": 2.0,
            "CPU server": 4.0,
        }
    test.models[10_000, "product"] = test.models[500, "product"]  # only on the test server
    servers_section(test, real)
    out = capsys.readouterr().out
    models = table_titled(out, "Models on both servers")
    assert [row[:5] for row in models] == [
        ["500", "product", "1,000", "300", "0.30x"],
        ["500", "ceiling", "1,250", "200", "0.16x"],
    ]
    ratios = table_titled(out, "Ratios on both servers")
    assert ratios == [
        ["500", "product/ceiling", "0.80x", "1.50x"],
        ["500", "same, all writes", "0.80x", "1.50x"],
    ]
    pods = table_titled(out, "InferenceServices with one pod each on both servers")
    assert [row[:4] for row in pods] == [["100", "100", "30", "0.30x"]]
