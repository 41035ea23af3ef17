"""Leader election: one of two replicas reconciles; the other takes over when it goes."""

from __future__ import annotations

import asyncio

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.leaderelection import LeaderElector
from controller.resources import LEASE, MODEL

from .conftest import eventually, manager_for, model_yaml, wait_condition


async def test_only_the_leader_reconciles_and_a_standby_takes_over(kube: KubeClient) -> None:
    common = {"leader_election": True, "lease_namespace": "default"}
    first = manager_for(kube, identity="first", **common)
    second = manager_for(kube, identity="second", **common)
    await first.start()
    await eventually(lambda: asyncio.sleep(0, first.elector and first.elector.leading.is_set()))
    await second.start()
    try:
        await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
        await wait_condition(kube, MODEL, "m", "AcceleratorReady", "True")
        assert second.elector is not None and not second.elector.leading.is_set()
        assert not second._workers, "a standby runs no workers"
        lease = await kube.get(LEASE, "default", "llmkube-controller")
        assert lease is not None and lease["spec"]["holderIdentity"] == "first"
        assert (
            first.metrics.registry.get_sample_value(
                "leader_election_master_status", {"name": "llmkube-controller"}
            )
            == 1
        )

        await first.stop()  # releases the lease on the way out
        await eventually(
            lambda: asyncio.sleep(0, second.elector.leading.is_set()),  # type: ignore[union-attr]
            timeout=10,
            what="standby to lead",
        )
        lease = await kube.get(LEASE, "default", "llmkube-controller")
        assert lease is not None and lease["spec"]["holderIdentity"] == "second"
        assert lease["spec"]["leaseTransitions"] == 1
        await apply_text(kube, model_yaml("n", "      enabled: true\n      count: 1"))
        await wait_condition(kube, MODEL, "n", "AcceleratorReady", "True")
    finally:
        await first.stop()
        await second.stop()


async def test_an_unexpired_lease_is_not_taken(kube: KubeClient) -> None:
    holder = LeaderElector(kube, "default", "l", "holder")
    other = LeaderElector(kube, "default", "l", "other")
    assert await holder.try_acquire_or_renew()
    assert not await other.try_acquire_or_renew()
    assert await holder.try_acquire_or_renew(), "the holder renews"
    lease = await kube.get(LEASE, "default", "l")
    assert lease is not None
    lease["spec"]["renewTime"] = "2020-01-01T00:00:00.000000Z"  # expired long ago
    await kube.replace(LEASE, lease)
    assert await other.try_acquire_or_renew()
    lease = await kube.get(LEASE, "default", "l")
    assert lease is not None and lease["spec"]["holderIdentity"] == "other"


async def test_run_returns_only_after_shutdown_released_the_lease(kube: KubeClient) -> None:
    """As on SIGTERM: stop() is scheduled from outside while run() is awaited."""
    manager = manager_for(kube, identity="solo", leader_election=True, lease_namespace="default")
    running = asyncio.create_task(manager.run())
    await eventually(lambda: asyncio.sleep(0, manager.elector and manager.elector.leading.is_set()))
    stopping = asyncio.ensure_future(manager.stop())
    await asyncio.wait_for(running, 10)
    await stopping
    lease = await kube.get(LEASE, "default", "llmkube-controller")
    assert lease is not None and lease["spec"]["holderIdentity"] == "", "lease not released"
    assert all(w.done() for w in manager._workers)
