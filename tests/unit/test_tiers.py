"""`make test` runs `pytest -m unit`, then `pytest -m server`, then `pytest -m cluster`, then
`pytest -m node`: together, every test once, each in its tier's folder (tests/<tier>/).

A tier that selects nothing exits with code 5, which the Makefile lets pass (a tier may
legitimately be empty while running a subset); these checks make sure none is empty by
mistake, and that a misfiled unit test cannot start the test API server.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO
from tests.support.tiers import misfiled
from testserver.process import ApiServerProcess


def collected(*args: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode in (0, 5), run.stdout[-2000:] + run.stderr[-2000:]
    return {line for line in run.stdout.splitlines() if "::" in line}


def test_the_four_tiers_hold_every_test_exactly_once() -> None:
    everything = collected()
    tiers = {name: collected("-m", name) for name in ("unit", "server", "cluster", "node")}
    unit, server, cluster, node = tiers.values()
    assert len(unit) > 100 and len(server) > 100, (len(unit), len(server))
    assert len(cluster) >= 5, sorted(cluster)
    assert len(node) >= 3, sorted(node)
    names = list(tiers)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert tiers[a].isdisjoint(tiers[b]), (a, b, sorted(tiers[a] & tiers[b]))
    assert unit | server | cluster | node == everything
    assert "tests/unit/test_tiers.py::test_the_four_tiers_hold_every_test_exactly_once" in unit
    assert any(t.startswith("tests/server/test_chaos.py::") for t in server)
    for name, selected in tiers.items():
        assert all(t.startswith(f"tests/{name}/") for t in selected), (name, sorted(selected))


class FakeItem:
    """What misfiled() reads of a collected test: its file, fixtures and marks."""

    def __init__(self, path: str, fixtures: tuple[str, ...] = (), marks: tuple[str, ...] = ()):
        self.path = REPO / "tests" / path
        self.nodeid = f"tests/{path}::test_x"
        self.fixturenames = fixtures
        self.marks = list(marks)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)


def test_a_test_whose_needs_differ_from_its_folder_is_named() -> None:
    items = [
        FakeItem("unit/test_a.py"),
        FakeItem("unit/test_b.py", fixtures=("kube", "apiserver")),
        FakeItem("server/test_c.py"),
        FakeItem("server/test_d.py", marks=("server",)),
        FakeItem("cluster/test_e.py", fixtures=("kube_cluster",)),
        FakeItem("node/test_f.py", fixtures=("node_cluster", "kube_cluster")),
        FakeItem("test_g.py"),
    ]
    wrong = misfiled(items, REPO / "tests")  # type: ignore[arg-type]
    assert wrong == [
        "tests/unit/test_b.py::test_x: needs the server tier, filed in unit",
        "tests/server/test_c.py::test_x: needs the unit tier, filed in server",
        "tests/test_g.py::test_x: needs the unit tier, filed in no tier",
    ]
    assert [item.marks[-1] for item in items] == [
        "unit",
        "unit",
        "server",
        "server",
        "cluster",
        "node",
        "unit",
    ]


async def test_a_unit_test_that_starts_the_server_is_told_to_mark_itself() -> None:
    with pytest.raises(AssertionError, match=r"mark it @pytest.mark.server"):
        await ApiServerProcess.start()
