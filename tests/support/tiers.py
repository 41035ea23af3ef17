"""The four tiers: a test's folder under tests/ names its tier, and what the test needs
(its fixtures, or an explicit mark) must agree with the folder.

`make test` runs `pytest -m unit`, then (if it passed) `-m server`, `-m cluster`, `-m node`;
tests/conftest.py marks each test with its folder's tier and refuses a misfiled one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TIERS = ("unit", "server", "cluster", "node")

# The fixtures that start the test API server process (kube and controller build on
# apiserver; the others start their own: a simulated cluster, TLS, a long history).
SERVER_FIXTURES = frozenset(
    {
        "apiserver",
        "cluster",
        "dra_cluster",
        "tls_apiserver",
        "chaos_server",
        "secured",
        "tls_server",
    }
)

# The fixtures that start the real control plane (etcd, kube-apiserver, ...): the third tier.
CLUSTER_FIXTURES = frozenset(
    {"kube_cluster", "own_kube_cluster", "taints_cluster", "sharing_cluster"}
)

# The fixture that starts the control plane with a real node (kubelet, containerd, runc,
# the DRA example plugin) inside a network namespace of its own: the fourth tier.
NODE_FIXTURES = frozenset({"node_cluster"})


def needed_tier(item: pytest.Item) -> str:
    """The tier a test's needs put it in: `node` when it uses NODE_FIXTURES (or is marked
    so: the node demo), `cluster` for CLUSTER_FIXTURES, `server` for SERVER_FIXTURES or a
    `server` mark (it starts the server another way: a bench run, the demo, inline),
    `unit` for all the others."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if NODE_FIXTURES & fixtures or item.get_closest_marker("node") is not None:
        return "node"
    if CLUSTER_FIXTURES & fixtures or item.get_closest_marker("cluster") is not None:
        return "cluster"
    if SERVER_FIXTURES & fixtures or item.get_closest_marker("server") is not None:
        return "server"
    return "unit"


def folder_tier(item: pytest.Item, tests: Path) -> str | None:
    """The tier folder (tests/<tier>/) the test's file is in; None outside them."""
    try:
        parts = Path(str(item.path)).relative_to(tests).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def misfiled(items: list[pytest.Item], tests: Path) -> list[str]:
    """Mark each test with its folder's tier; name each one whose needs say otherwise."""
    wrong: list[str] = []
    for item in items:
        folder, needs = folder_tier(item, tests), needed_tier(item)
        if folder != needs:
            wrong.append(f"{item.nodeid}: needs the {needs} tier, filed in {folder or 'no tier'}")
        item.add_marker(getattr(pytest.mark, folder or needs))
    return wrong
