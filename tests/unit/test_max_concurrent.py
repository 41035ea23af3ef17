"""Max concurrent reconciles are per controller: one controller's limit is its own.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_max_concurrent.py.
"""

from __future__ import annotations

from controller.manager import ManagerConfig


def test_defaults_are_sized_for_throughput() -> None:
    config = ManagerConfig()
    assert config.workers >= 8
    assert config.max_concurrent_reconciles == {"gpuquota": 2}
