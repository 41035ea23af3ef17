"""The bench on the real control plane (`python -m bench --servers kube`): it runs, prints
each system's row and the ratios; its timings are not judged here."""

from __future__ import annotations

import re

import pytest

from bench import harness, kube
from bench.__main__ import Figures, main, parser, servers_section


def tables(text: str) -> dict[str, list[list[str]]]:
    """The printed tables by title: their data rows, cells split where report.table puts
    two spaces or more."""
    found: dict[str, list[list[str]]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if i + 2 < len(lines) and re.fullmatch(r"[- ]*-", lines[i + 2]):
            rows = []
            for row in lines[i + 3 :]:
                if not row.strip():
                    break
                rows.append(re.split(r"\s{2,}", row.strip()))
            found[line] = rows
    return found


def table_titled(text: str, start: str) -> list[list[str]]:
    matches = [rows for title, rows in tables(text).items() if title.startswith(start)]
    assert len(matches) == 1, f"no single table titled {start!r} in:\n{text}"
    return matches[0]


@pytest.mark.cluster  # starts the real control plane itself (bench.kube)
@pytest.mark.skipif(kube.unavailable() is not None, reason=str(kube.unavailable()))
async def test_kube_section_prints_each_system_and_the_ratios(
    capsys: pytest.CaptureFixture[str],
) -> None:
    systems = ["product", "ceiling", *(["kopf"] if harness.kopf_installed() else [])]
    args = parser().parse_args(
        [
            "--servers=kube",
            "--queue-adds=0",
            f"--systems={','.join(systems)}",
            "--kube-sizes=20",
            "--kube-pod-services=10",
            "--workers=2",
        ]
    )
    await main(args)
    out = capsys.readouterr().out
    pipeline = table_titled(out, "Pipeline, Models, on the kube-apiserver v1.")
    assert [row[:2] for row in pipeline] == [["20", s] for s in systems]
    ratios = table_titled(out, "Ratios on the kube-apiserver")
    assert len(ratios) == 1
    n, product_ceiling, all_writes, quiet_ceiling, quiet_kopf, events_kopf = ratios[0]
    assert n == "20"
    assert re.fullmatch(r"\d+\.\d\dx", product_ceiling)
    assert re.fullmatch(r"\d+\.\d\dx", all_writes)
    assert (quiet_ceiling, quiet_kopf) == ("-", "-")  # no -quiet system ran
    assert re.fullmatch(r"\d+\.\d\dx" if "kopf" in systems else "-", events_kopf)
    # The product's own account, from the real apiserver's watch: one reconcile and
    # two Events per Model (and the warm-up Model), none dropped.
    memory = table_titled(out, "Product process after the burst on the kube-apiserver")
    assert len(memory) == 1
    assert memory[0][:2] == ["20", "product"]
    assert memory[0][5:8] == ["1.000", "42", "0"]
    pods = table_titled(out, "Pipeline, InferenceServices with one pod each in one namespace, on")
    assert [row[0] for row in pods] == ["10"]
    assert "Real apiserver skipped" not in out


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
