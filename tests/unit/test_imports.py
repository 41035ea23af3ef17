"""Imports point down only (app -> webhook, reconcilers -> runtimes -> api, controller ->
metrics), and the folders show the architecture."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from tests.support.paths import REPO

# The checker is lint tooling (scripts/, run by `make lint`), loaded here from its file.
_spec = importlib.util.spec_from_file_location(
    "check_imports", REPO / "scripts" / "check_imports.py"
)
assert _spec is not None and _spec.loader is not None
checker = importlib.util.module_from_spec(_spec)
sys.modules["check_imports"] = checker
_spec.loader.exec_module(checker)
PRODUCT, ROOT, check = checker.PRODUCT, checker.ROOT, checker.check

CONTROLLERS = {"inferenceservice", "model", "gpuquota"}


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


def test_no_module_of_tests_imports_a_test_module_or_a_conftest() -> None:
    assert checker.misplaced_test_imports() == []


def test_the_check_finds_test_modules_and_conftests_imported(tmp_path: Path) -> None:
    for folder in ("tests/support", "tests/unit", "scripts", "bench"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "test_a.py").write_text("from .test_b import helper\n")
    (tmp_path / "tests" / "unit" / "test_c.py").write_text(
        "from tests.server import test_b\nfrom ..conftest import z\n"
    )
    (tmp_path / "tests" / "support" / "x.py").write_text("from ..unit.test_b import y\n")
    (tmp_path / "tests" / "unit" / "test_ok.py").write_text(
        "from tests.support.x import y\nfrom ..support import x\n"
    )
    (tmp_path / "scripts" / "tool.py").write_text("from tests.support import x\n")
    (tmp_path / "bench" / "run.py").write_text("import tests.support.x\n")
    assert checker.misplaced_test_imports(tmp_path) == [
        "bench/run.py:1: imports tests.support.x from outside tests/",
        "scripts/tool.py:1: imports tests.support from outside tests/",
        "scripts/tool.py:1: imports tests.support.x from outside tests/",
        "tests/support/x.py:1: imports the test module tests.unit.test_b",
        "tests/unit/test_a.py:1: imports the test module tests.unit.test_b",
        "tests/unit/test_c.py:1: imports the test module tests.server.test_b",
        "tests/unit/test_c.py:2: imports a conftest (helpers live in tests/support)",
    ]


def test_reconcilers_reads_as_the_controllers_and_what_they_share() -> None:
    """`ls reconcilers`: a package per controller and per shared subject, at most 8 plain
    modules at the top, and the three reconcilers exported by the package."""
    top = ROOT / "reconcilers"
    packages = {p.name for p in top.iterdir() if (p / "__init__.py").is_file()}
    modules = [p.name for p in top.glob("*.py")]
    assert packages >= CONTROLLERS
    assert len(modules) <= 8, modules
    exported = ast.literal_eval(
        next(
            n.value
            for n in ast.parse((top / "__init__.py").read_text()).body
            if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__"
        )
    )
    assert set(exported) == {"GPUQuotaReconciler", "InferenceServiceReconciler", "ModelReconciler"}


def test_every_package_says_what_it_is_and_api_holds_only_the_api() -> None:
    for package in sorted(set(PRODUCT) | {"testserver", "devcluster", "bench"}):
        for init in sorted((ROOT / package).rglob("__init__.py")):
            tree = ast.parse(init.read_text())
            assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} has no docstring"
    assert not list((ROOT / "api").glob("runtime*.py")), "runtime knowledge lives in runtimes/"
