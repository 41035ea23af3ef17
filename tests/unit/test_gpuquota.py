"""GPUQuota: count per replica, claims without count, admission and scaling under the limit.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_gpuquota.py.
"""

from __future__ import annotations

from reconcilers.gpuquota.reconciler import MAX_ROWS, shown_rows
from reconcilers.quota.rule import Allocation


def test_status_rows_are_capped_held_back_services_first() -> None:
    """10k services under one quota would make a status over etcd's request limit."""
    held = [Allocation(f"held-{i}", 2, 1, 1) for i in range(5)]
    charged = [Allocation(f"svc-{i:05d}", 1, 1, 1) for i in range(MAX_ROWS)]
    free = [Allocation(f"free-{i}", 1, 1, 0) for i in range(10)]
    everything = sorted(held + charged + free, key=lambda a: a.name)
    shown = shown_rows(everything)
    names = [a.name for a in shown]
    assert len(shown) == MAX_ROWS and names == sorted(names)
    assert {a.name for a in held} <= set(names)  # those held back are always listed
    assert not any(n.startswith("free-") for n in names)  # uncharged ones go first
    assert shown_rows(everything[:10]) == everything[:10]
