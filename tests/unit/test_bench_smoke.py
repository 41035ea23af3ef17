"""The benchmark code runs, and counts what it should; its timings are not judged here.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_bench_smoke.py.
"""

from __future__ import annotations

import re

import pytest

from bench import kube, queue_bench
from bench.__main__ import Figures, main, parser, pods_line, servers_section
from bench.report import table
from tests.support.tables import table_titled


async def test_queue_bench_counts_dedup() -> None:
    results = await queue_bench.run(adds=2_000, keys=200)
    assert [r.processed for r in results] == [2_000, 200, 200]
    assert results[1].dedup == 10.0


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


def test_model_writes_share_a_prototype_only_where_the_status_is_the_same() -> None:
    from bench.model_writes import spec_key
    from bench.workload import model

    assert spec_key(model(1)) == spec_key(model(5))  # other file, same GPU count
    assert spec_key(model(1)) != spec_key(model(2))  # another GPU count
    hidden = model(1)
    hidden["spec"]["source"] = "https://models.example/.hidden.gguf"  # refused by name
    assert spec_key(hidden) != spec_key(model(1))
    paths = [model(1), model(1)]
    paths[0]["spec"]["source"], paths[1]["spec"]["source"] = "/models/a.gguf", "/etc/a.gguf"
    assert spec_key(paths[0]) != spec_key(paths[1])  # a refusal names the path
    claims = model(1)
    claims["spec"]["hardware"]["gpu"]["resourceClaims"] = [{"name": "gpu"}]
    with pytest.raises(ValueError, match="resourceClaims"):
        spec_key(claims)
