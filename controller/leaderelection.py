"""Lease-based leader election (coordination.k8s.io/v1), as client-go's leaderelection.

Only the leader runs reconcile workers; every replica keeps its caches warm so a new
leader starts at once. Leases are updated with their resourceVersion, so two
candidates racing for an expired lease cannot both win.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from .kube import ApiError, KubeClient
from .resources import LEASE

Obj = dict[str, Any]
log = structlog.get_logger("leaderelection")


def _micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(value, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] = lambda leading: None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._last_renew: datetime | None = None

    def _spec(self, now: datetime, transitions: int, acquired: str | None) -> Obj:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquired or _micro(now),
            "renewTime": _micro(now),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        now = datetime.now(UTC)
        lease = await self.client.get(LEASE, self.namespace, self.name)
        if lease is None:
            await self.client.create(
                LEASE,
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(now, 0, None),
                },
            )
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        renewed = _parse(spec.get("renewTime"))
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        expired = renewed is None or renewed + timedelta(seconds=duration) < now
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
        acquired = spec.get("acquireTime") if holder == self.identity else None
        lease["spec"] = self._spec(now, transitions, acquired)
        await self.client.replace(LEASE, lease)
        return True

    async def run(self) -> None:
        """Acquire, then renew until renewals fail for renew_deadline; then set `lost`."""
        while True:
            try:
                ok = await self.try_acquire_or_renew()
            except (ApiError, OSError, TimeoutError) as e:
                log.warning("lease update failed", error=str(e))
                ok = False
            now = datetime.now(UTC)
            if ok:
                self._last_renew = now
                if not self.leading.is_set():
                    log.info("became leader", lease=self.name, identity=self.identity)
                    self.leading.set()
                    self.on_change(True)
            elif self.leading.is_set():
                assert self._last_renew is not None
                if (now - self._last_renew).total_seconds() > self.renew_deadline:
                    log.error("lost leadership", lease=self.name)
                    self.leading.clear()
                    self.on_change(False)
                    self.lost.set()
                    return
            await asyncio.sleep(self.retry_period)

    async def release(self) -> None:
        """Give the lease up on shutdown so that a standby takes over without waiting."""
        if not self.leading.is_set():
            return
        try:
            lease = await self.client.get(LEASE, self.namespace, self.name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                await self.client.replace(LEASE, lease)
        except (ApiError, OSError) as e:
            log.warning("could not release lease", error=str(e))
