"""The differential check: one table of request sequences, each run against our test API
server (testserver/) and the real kube-apiserver 1.34 (devcluster/), their answers
compared as normalised views (tests/support/differential.py).

A row either agrees (the views are equal) or is a known difference: its reason is in
docs/testserver.md ("Differences from kube-apiserver") and each server's exact views are
asserted, so the row fails when either server changes. Each row runs in a namespace of
its own on both servers, the two side by side.

Here the tests that need no API server; those that run on the real control plane are in
tests/cluster/test_cluster_differential.py.
"""

from __future__ import annotations

import pytest

from tests.support.differential_rows import (
    ROWS,
)
from tests.support.paths import REPO

pytestmark = pytest.mark.timeout(600)


def test_every_known_difference_is_written_down() -> None:
    """docs/testserver.md's table names each row that differs, with the row's reason."""
    doc = (REPO / "docs/testserver.md").read_text()
    table = doc.split("## Differences from kube-apiserver", 1)[1]
    for row in ROWS:
        if row.difference is not None:
            assert f"| `{row.name}` | {row.difference.reason} |" in table, row.name
