"""Leader election: one of two replicas reconciles; the other takes over when it goes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.manifests import apply_text
from controller.errors import Fenced
from controller.kube import KubeClient
from controller.leaderelection import LeaderElector
from controller.resources import LEASE, MODEL, SERVICE
from tests.support.clock import FakeClock
from tests.support.manager import manager_for
from tests.support.manifests import model_yaml
from tests.support.waiting import eventually, wait_condition
from testserver.process import ApiServerProcess


async def test_only_the_leader_reconciles_and_a_standby_takes_over(kube: KubeClient) -> None:
    common: dict[str, Any] = {"leader_election": True, "lease_namespace": "default"}
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
        lease = {"name": "llmkube-controller"}
        assert first.metrics.registry.get_sample_value("leader_election_master_status", lease) == 1
        # The standby reports too (controller-runtime's has no series until it leads).
        assert second.metrics.registry.get_sample_value("leader_election_master_status", lease) == 0

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
    """Expiry is judged by the candidate's own clock since it last saw the record change."""
    clock = FakeClock()
    holder = LeaderElector(kube, "default", "l", "holder", clock=clock)
    other = LeaderElector(kube, "default", "l", "other", clock=clock)
    assert await holder.try_acquire_or_renew()
    assert not await other.try_acquire_or_renew()
    assert await holder.try_acquire_or_renew(), "the holder renews"
    clock.advance(14)
    assert not await other.try_acquire_or_renew(), "renewed 14 s ago: still valid"
    lease = await kube.get(LEASE, "default", "l")
    assert lease is not None
    # A renewTime far in the past (another machine's clock) does not expire it early...
    lease["spec"]["renewTime"] = "2020-01-01T00:00:00.000000Z"
    await kube.replace(LEASE, lease)
    assert not await other.try_acquire_or_renew()
    # ...the record not changing for a whole lease duration does.
    clock.advance(15.1)
    assert await other.try_acquire_or_renew()
    lease = await kube.get(LEASE, "default", "l")
    assert lease is not None and lease["spec"]["holderIdentity"] == "other"
    assert lease["spec"]["leaseTransitions"] == 1


async def test_a_leader_whose_renewals_hang_stops_before_the_standby_leads(
    apiserver: ApiServerProcess, kube: KubeClient
) -> None:
    """Split brain: the leader's lease requests hang (not fail) for longer than the lease.

    client-go bounds each renewal by renewDeadline: the old leader must stop leading,
    and its writes must be fenced, before the standby can acquire the lease.
    """
    timing: dict[str, Any] = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.3}
    first_client = await KubeClient.connect(apiserver.url, user_agent="llmkube/first")
    second_client = await KubeClient.connect(apiserver.url, user_agent="llmkube/second")
    events: list[str] = []
    first = LeaderElector(
        first_client,
        "default",
        "split",
        "first",
        on_change=lambda leading: events.append(f"first {leading}"),
        **timing,
    )
    second = LeaderElector(
        second_client,
        "default",
        "split",
        "second",
        on_change=lambda leading: events.append(f"second {leading}"),
        **timing,
    )
    first_client.fence = first.may_write
    tasks = [asyncio.create_task(first.run())]
    try:
        await asyncio.wait_for(first.leading.wait(), 10)
        tasks.append(asyncio.create_task(second.run()))
        # Every lease request of the first replica now hangs far past its deadlines.
        await apiserver.fault(path="/leases/split$", agent="llmkube/first", delay=25, times=-1)
        await asyncio.wait_for(second.leading.wait(), 15)
        assert events == ["first True", "first False", "second True"], events
        assert first.lost.is_set() and not first.leading.is_set()
        with pytest.raises(Fenced):
            await first_client.create(SERVICE, service_obj("after-loss"))
        assert await kube.get(SERVICE, "default", "after-loss") is None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await first_client.close()
        await second_client.close()


async def test_a_candidate_retries_on_the_jittered_period_until_the_lease_expires(
    kube: KubeClient,
) -> None:
    """retry_period * (1 + jitter * 1.2) between tries; it leads on the first try at which
    the record has not changed for a lease duration (15 s) by its own clock."""
    clock = FakeClock()
    holder = LeaderElector(kube, "default", "sched", "holder", clock=clock)
    assert await holder.try_acquire_or_renew()  # at 1000, and never renewed
    candidate = LeaderElector(
        kube, "default", "sched", "candidate", clock=clock, jitter=lambda: 0.5
    )
    task = asyncio.create_task(candidate.run())
    try:
        delays = [await clock.next() for _ in range(4)]  # tries at 1003.2 ... 1012.8
        assert delays == pytest.approx([3.2] * 4)  # 2 s * (1 + 0.5 * 1.2)
        assert not candidate.leading.is_set()
        assert await clock.next() == pytest.approx(3.2)  # 1016: expired
        await asyncio.wait_for(candidate.leading.wait(), 10)
        assert clock.pending() == [2.0], "leading: the next renewal is one retry_period away"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_renewals_every_retry_period_and_leadership_ends_at_the_deadline(
    apiserver: ApiServerProcess,
) -> None:
    """Renewals every 2 s; once they fail, retries every 2 s (bounded by what is left) and
    leadership ends exactly renew_deadline (10 s) after the last good renewal."""
    clock = FakeClock()
    client = await KubeClient.connect(apiserver.url, user_agent="llmkube/leader")
    events: list[tuple[float, bool]] = []
    elector = LeaderElector(
        client,
        "default",
        "deadline",
        "leader",
        clock=clock,
        on_change=lambda leading: events.append((clock.t, leading)),
    )
    client.fence = elector.may_write
    task = asyncio.create_task(elector.run())
    try:
        await asyncio.wait_for(elector.leading.wait(), 10)
        assert events == [(1000.0, True)]
        assert await clock.next() == 2.0
        await clock.waiting()  # renewed at 1002, asleep until the next
        await apiserver.fault(
            path="/leases/deadline$", agent="llmkube/leader", status=500, times=-1
        )
        delays = [await clock.next() for _ in range(4)]  # 1004 (fails), 1006, 1008, 1010
        assert delays == [2.0] * 4
        assert elector.may_write("/api/v1/namespaces/default/services/x"), "8 s since the renewal"
        assert events == [(1000.0, True)]
        assert await clock.next() == 2.0  # 1012: 10 s after the renewal at 1002
        await asyncio.wait_for(elector.lost.wait(), 10)
        assert events == [(1000.0, True), (1012.0, False)]
        assert not elector.may_write("/api/v1/namespaces/default/services/x")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


def service_obj(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80}]},
    }


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


async def test_lease_requests_cut_without_an_answer_are_retried(
    apiserver: ApiServerProcess, kube: KubeClient
) -> None:
    """A dropped connection is the weather, as a 500 is: the candidate tries again."""
    await apiserver.fault(path="/leases", disconnect=True, times=3)
    elector = LeaderElector(kube, "default", "cut", "me", retry_period=0.1, renew_deadline=1)
    task = asyncio.create_task(elector.run())
    try:
        await asyncio.wait_for(elector.leading.wait(), 10)
    finally:
        task.cancel()
    counts = await apiserver.requests()
    assert sum(n for k, n in counts.items() if "/leases" in k) > 3  # the cut ones and more
