"""The bench on the real control plane (`python -m bench --servers kube`): it runs, prints
each system's row and the ratios; its timings are not judged here."""

from __future__ import annotations

import re

import pytest

from bench import harness, kube
from bench.__main__ import main, parser
from tests.support.tables import table_titled

pytestmark = pytest.mark.timeout(600)  # a control plane of its own, 4 bench runs on it


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
    assert [row[:2] for row in pods] == [["10", "product"], ["10", "ceiling"]]
    assert re.search(
        r"^pod-services on kube-apiserver: product/ceiling \d+\.\d\d, reconciles/svc \d+\.\d$",
        out,
        re.MULTILINE,
    )
    assert "Real apiserver skipped" not in out
