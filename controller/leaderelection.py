"""Lease-based leader election (coordination.k8s.io/v1) with client-go's semantics.

Only the leader runs reconcile workers; every replica keeps its caches warm so a new
leader starts at once. The rules are client-go's leaderelection package:

- A candidate tries to acquire every retry_period, with jitter (up to 1.2 times more) so
  replicas do not stampede.
- A lease held by someone else counts as expired only when its record has not changed
  for lease_duration by the candidate's own clock (observed time, not the renewTime
  written by another machine's clock).
- The leader renews every retry_period; if no renewal succeeds within renew_deadline of
  the last good one (a hanging request included), leadership ends at that instant:
  `leading` is cleared, `lost` is set and may_write() turns False, which fences every
  write of the client, before the lease can expire for the standby (renew_deadline <
  lease_duration).
- Leases are written with their resourceVersion, so two candidates racing for an
  expired lease cannot both win.

Clocks are injected (`clock` for deadlines and the sleeps between tries, `jitter` for the
acquire loop's spread, `now` for the timestamps written) so tests can assert exact
schedules. Each request's own timeout stays on the event loop's time.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from objtypes import Obj

from .clock import REAL, Clock
from .errors import TRANSIENT
from .kube import KubeClient
from .resources import LEASE

log = structlog.get_logger("leaderelection")
JITTER = 1.2  # client-go's JitterFactor for the acquire loop


def _micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utcnow() -> datetime:
    return datetime.now(UTC)


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
        clock: Clock = REAL,
        jitter: Callable[[], float] = random.random,
        now: Callable[[], datetime] = _utcnow,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self.clock = clock
        self.jitter = jitter
        self.now = now
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._last_renew: float | None = None  # clock.monotonic() of the last good renewal
        self._observed: tuple[str, str, str] | None = None  # holder, renewTime, acquireTime
        self._observed_at = 0.0
        self._lease_paths = {LEASE.object_path(namespace, name), LEASE.collection_path(namespace)}

    # -- fencing -------------------------------------------------------------------

    def may_write(self, path: str) -> bool:
        """False once our lease may have passed to someone else; lease writes always pass."""
        if path in self._lease_paths:
            return True
        return (
            self.leading.is_set()
            and self._last_renew is not None
            and self.clock.monotonic() - self._last_renew < self.renew_deadline
        )

    # -- one attempt -----------------------------------------------------------------

    def _spec(self, transitions: int, acquired: str | None) -> Obj:
        stamp = _micro(self.now())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquired or stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: Obj) -> None:
        record = (
            str(spec.get("holderIdentity") or ""),
            str(spec.get("renewTime") or ""),
            str(spec.get("acquireTime") or ""),
        )
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock.monotonic()

    async def try_acquire_or_renew(self) -> bool:
        lease = await self.client.get(LEASE, self.namespace, self.name)
        if lease is None:
            await self.client.create(
                LEASE,
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(0, None),
                },
            )
            self._observed_at = self.clock.monotonic()
            return True
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        valid = self._observed_at + duration > self.clock.monotonic()
        if holder and holder != self.identity and valid:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
        acquired = spec.get("acquireTime") if holder == self.identity else None
        lease["spec"] = self._spec(transitions, acquired)
        await self.client.replace(LEASE, lease)
        self._observe(lease["spec"])
        return True

    async def _attempt(self, timeout: float) -> bool:
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout)
        except TRANSIENT as e:
            log.warning("lease update failed", error=str(e) or repr(e))
            return False

    # -- loops -------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire (retrying with jitter), then renew until a renewal misses its deadline."""
        while True:
            started = self.clock.monotonic()
            if await self._attempt(self.renew_deadline):
                break
            await self.clock.sleep(self.retry_period * (1 + self.jitter() * JITTER))
        # Count the lease from when the winning request was sent: conservative.
        self._last_renew = started
        log.info("became leader", lease=self.name, identity=self.identity)
        self.leading.set()
        self.on_change(True)
        while True:
            await self.clock.sleep(self.retry_period)
            # Each try is bounded by what is left of the deadline: a hanging request
            # cannot keep us leading past it.
            while True:
                left = self._last_renew + self.renew_deadline - self.clock.monotonic()
                if left <= 0:
                    self._lose()
                    return
                if await self._attempt(min(left, self.retry_period * 2)):
                    self._last_renew = self.clock.monotonic()
                    break
                left = self._last_renew + self.renew_deadline - self.clock.monotonic()
                if left <= 0:
                    self._lose()
                    return
                await self.clock.sleep(min(self.retry_period, left))

    def _lose(self) -> None:
        log.error("lost leadership: no renewal within the renew deadline", lease=self.name)
        self.leading.clear()
        self.on_change(False)
        self.lost.set()

    async def release(self) -> None:
        """Give the lease up on shutdown so that a standby takes over without waiting."""
        if not self.leading.is_set():
            return
        try:
            lease = await asyncio.wait_for(
                self.client.get(LEASE, self.namespace, self.name), self.retry_period
            )
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                await asyncio.wait_for(self.client.replace(LEASE, lease), self.retry_period)
        except TRANSIENT as e:
            log.warning("could not release lease", error=str(e) or repr(e))
