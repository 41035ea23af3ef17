"""Imports point down only (app -> webhook, reconcilers -> api, controller -> metrics)."""

from __future__ import annotations

from pathlib import Path

from .imports import check


def test_no_upward_imports_and_no_cycles() -> None:
    upward, cycles = check()
    assert upward == []
    assert cycles == []


def test_the_check_finds_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    for package in ("controller", "metrics", "reconcilers"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "controller" / "manager.py").write_text("from reconcilers import model\n")
    (tmp_path / "metrics" / "a.py").write_text("from . import b\n")
    (tmp_path / "metrics" / "b.py").write_text("from .a import x\n")
    upward, cycles = check(tmp_path)
    assert upward == ["controller/manager.py:1: controller imports reconcilers"]
    assert cycles == [["metrics.a", "metrics.b"]]
