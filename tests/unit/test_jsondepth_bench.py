"""bench/jsondepth_bench.py runs both ways on each document and restores the bound's
passes, whatever it measured."""

from __future__ import annotations

import pytest

from bench import jsondepth_bench
from controller import jsondepth


def test_it_prints_a_ratio_per_document_and_leaves_the_passes_as_they_were(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    small = [("deep", b"[" * 600 + b"]" * 600, 1), ("shallow", b"[[1,2],[3]]" * 1, 1)]
    monkeypatch.setattr(jsondepth_bench, "documents", lambda: small)
    before = jsondepth.PASSES
    jsondepth_bench.main()
    assert before == jsondepth.PASSES
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines[1:]] == ["deep", "shallow"]
    assert all(float(ln.split()[-1]) > 0 for ln in lines[1:])
