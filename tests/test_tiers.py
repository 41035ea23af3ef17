"""`make test` runs `pytest -m unit`, then `pytest -m server`, then `pytest -m cluster`, then
`pytest -m node`: together, every test once.

A tier that selects nothing exits with code 5, which the Makefile lets pass (a tier may
legitimately be empty while running a subset); these checks make sure none is empty by
mistake, and that a misfiled unit test cannot start the test API server.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testserver.process import ApiServerProcess

ROOT = Path(__file__).resolve().parent.parent


def collected(*args: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
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
    assert "tests/test_tiers.py::test_the_four_tiers_hold_every_test_exactly_once" in unit
    assert any(t.startswith("tests/test_chaos.py::") for t in server)
    assert all(t.startswith("tests/test_cluster_") for t in cluster), sorted(cluster)
    assert all(t.startswith("tests/test_node_") for t in node), sorted(node)


async def test_a_unit_test_that_starts_the_server_is_told_to_mark_itself() -> None:
    with pytest.raises(AssertionError, match=r"mark it @pytest.mark.server"):
        await ApiServerProcess.start()
