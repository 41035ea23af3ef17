"""GPUQuota in linear time: the incremental index agrees with the rule, and only the
services whose admission moved are reconciled again.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_quota_index.py.
"""

from __future__ import annotations

import random

import pytest

from api import GPUQuotaSpec
from reconcilers.quota.index import (
    Quotas,
    _Scope,
)
from reconcilers.quota.rule import Allocation, Demand, allocate, floors_of, limits_of

GROUP = "/apis/inference.llmkube.dev/v1alpha1"


# -- the index's core against the rule, without a server -------------------------------


def _random_demand(rng: random.Random, key: tuple[str, str], keys: list[str]) -> Demand:
    covering = tuple(sorted(k for k in keys if rng.random() < 0.7))
    return Demand(
        key[1],
        f"2026-12-03T10:00:0{rng.randrange(4)}Z",  # second resolution: many ties
        rng.randrange(0, 5),
        rng.choice([0, 0, 1, 2, 3]),
        covering,
        rng.randrange(0, 3),
        key[0],
        vram_per_replica=rng.choice([0, 0, 8, 16, 24]),
        priority=rng.choice(["normal", "normal", "batch", "high", "critical"]),
    )


@pytest.mark.parametrize("seed", range(8))
def test_incremental_allocation_matches_the_rule(seed: int) -> None:
    rng = random.Random(seed)
    keys = [f"ns/q{i}" for i in range(rng.randrange(1, 4))]
    quotas: Quotas = {
        k: (
            {},
            GPUQuotaSpec(
                gpu_count=rng.randrange(0, 12),
                namespace_ref="ns",
                # Some quotas cap VRAM or refuse low priorities: more budgets per turn.
                vram_bytes=rng.choice([0, 0, 40, 100]),
                min_priority=rng.choice([None, None, "normal", "high"]),
            ),
        )
        for k in keys
    }
    scope = _Scope(quotas, {"ns": tuple(keys), "other": tuple(keys)})
    specs = {k: spec for k, (_, spec) in quotas.items()}
    limits, floors = limits_of(specs), floors_of(specs)
    demands: dict[tuple[str, str], Demand] = {}
    before: dict[tuple[str, str], Allocation] = {}
    for _ in range(400):
        updates: dict[tuple[str, str], Demand | None] = {}
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            # Two namespaces of one group (a selector quota spans them): one line.
            key = (rng.choice(["ns", "other"]), f"svc-{rng.randrange(25)}")
            updates[key] = None if rng.random() < 0.2 else _random_demand(rng, key, keys)
        for key, d in updates.items():
            if d is None:
                demands.pop(key, None)
            else:
                demands[key] = d
        changed = scope.update(updates)
        want = allocate(limits, list(demands.values()), floors)
        assert scope.allocations == want
        for ns in ("ns", "other"):  # the per-namespace views the reconcilers read
            assert scope.view(ns).allocations == {n: a for (s, n), a in want.items() if s == ns}
        # What it reports as changed is exactly what the rule's answer changed.
        assert changed == {n for n in want.keys() | before.keys() if want.get(n) != before.get(n)}
        before = want
