"""Max concurrent reconciles are per controller: one controller's limit is its own.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_max_concurrent.py.
"""

from __future__ import annotations

import asyncio
import gc

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import GC_GEN0_THRESHOLD, GC_GEN2_THRESHOLD, Manager, ManagerConfig
from controller.reconcile import Request, Result, Watch
from controller.resources import MODEL, ResourceType
from tests.support.manifests import model_yaml
from tests.support.waiting import eventually

CPU = "      enabled: false"


class Blocking:
    """A reconciler that holds every reconcile until released, counting how many run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.running = 0
        self.peak = 0
        self.release = asyncio.Event()

    @property
    def primary(self) -> ResourceType:
        return MODEL

    def watches(self) -> list[Watch]:
        return [Watch(MODEL, lambda e: [Request(self.name, "default", e.obj["metadata"]["name"])])]

    async def reconcile(self, request: Request) -> Result:
        self.running += 1
        self.peak = max(self.peak, self.running)
        await self.release.wait()
        self.running -= 1
        return Result()


async def test_each_controller_runs_at_most_its_own_limit(kube: KubeClient) -> None:
    slow, fast = Blocking("slow"), Blocking("fast")
    config = ManagerConfig(http_port=None, workers=5, max_concurrent_reconciles={"slow": 2})
    manager = Manager(kube, config, reconcilers=lambda *_: [slow, fast])
    await manager.start()
    try:
        for i in range(8):
            await apply_text(kube, model_yaml(f"m{i}", CPU))

        async def saturated() -> bool:
            return slow.running == 2 and fast.running == 5

        await eventually(saturated, what="both controllers at their limits")
        await asyncio.sleep(0.2)  # give an extra worker, if there were one, time to start
        assert (slow.peak, fast.peak) == (2, 5)
        gauge = manager.metrics.registry.get_sample_value
        assert gauge("controller_runtime_max_concurrent_reconciles", {"controller": "slow"}) == 2
        assert gauge("controller_runtime_max_concurrent_reconciles", {"controller": "fast"}) == 5
        # The workers in use, as scraped now: those reconciling, then none.
        assert gauge("controller_runtime_active_workers", {"controller": "slow"}) == 2
        assert gauge("controller_runtime_active_workers", {"controller": "fast"}) == 5
        slow.release.set()
        fast.release.set()
        await manager.wait_idle()
        assert gauge("controller_runtime_active_workers", {"controller": "slow"}) == 0
        assert gauge("controller_runtime_active_workers", {"controller": "fast"}) == 0
    finally:
        await manager.stop()


async def test_collector_thresholds_are_raised_while_running_and_restored(
    kube: KubeClient,
) -> None:
    """Full collections scan the whole cache: rarer while the manager runs, as before after."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    manager = Manager(kube, ManagerConfig(http_port=None), reconcilers=lambda *_: [])
    try:
        await manager.start()
        await manager.wait_synced()

        async def raised() -> bool:  # set when the workers start, after the caches sync
            return gc.get_threshold()[2] != 10

        await eventually(raised, 10, what="the workers' start")
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, 10, GC_GEN2_THRESHOLD)
        assert GC_GEN2_THRESHOLD > 10
    finally:
        await manager.stop()
        restored = gc.get_threshold()
        gc.set_threshold(*before)
    assert restored == (700, 10, 10)
