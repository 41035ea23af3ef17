"""spec.maxPodLifetimeSeconds: pods older than that are recycled, one at a time, as
LLMKube's pod_lifetime.go does.

Only a settled Deployment is touched: its rollout done and every one of its pods Ready
(a pod still starting, or a replacement on its way, holds recycling until it is Ready).
Then the pod whose lifetime ran out first (by `status.startTime`) is evicted through the
Eviction API, so PodDisruptionBudgets are respected and the Deployment replaces it; when
none has run out, the reconcile asks to be run again at the next expiry. A budget that
refuses the eviction (429), or missing RBAC (403, with a Warning Event), is retried
after RETRY seconds. With one replica a recycle is a restart: the model loads again.

With rolloutPolicy.waitForIdle (LLMKube's pod_lifetime.go; `force` is for pod-template
changes and does not apply here) an expired pod is evicted only while it is idle: the
expired pods are asked (idle.py) and the first idle one is evicted. Only the pod evicted
is asked: its requests are the ones an eviction drops (LLMKube asks every replica, so a
service with one busy replica would never recycle). A pod whose runtime has no idle signal
(UNSUPPORTED) is evicted as if idle; one whose answer cannot be read (UNKNOWN) waits as if
busy. `maxPodLifetimeIdleTimeoutSeconds` bounds the wait, counted from the pod's expiry:
past it the pod is evicted busy (0: no wait, though an idle expired pod still goes
first; unset: as long as it takes). While
they wait the reconcile looks again every CHECK_INTERVAL seconds, and the first wait for
a pod sends one Normal Event `PodRecycleDeferred` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog

from api import InferenceServiceSpec
from controller.errors import ApiError
from controller.resources import DEPLOYMENT, POD, object_key
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.inferenceservice import idle
from reconcilers.inferenceservice.rollout import CHECK_INTERVAL, runtime_of
from reconcilers.ownership import SERVICE_LABEL
from runtimes.idle import IDLE, UNSUPPORTED, Reading, signal_for

RETRY = 30.0
RECYCLED = "PodRecycled"
FORBIDDEN = "PodRecycleForbidden"
DEFERRED = "PodRecycleDeferred"
log = structlog.get_logger("pod_lifetime")


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def rollout_settled(dep: Obj) -> bool:
    """The rollout is done and every replica is up to date, ready and available."""
    meta, status = dep["metadata"], dep.get("status") or {}
    want = int((dep.get("spec") or {}).get("replicas", 1))
    return (
        bool(meta.get("generation"))
        and status.get("observedGeneration") == meta.get("generation")
        and all(
            int(status.get(k) or 0) == want
            for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
        )
    )


@dataclass(frozen=True)
class Expired:
    deadline: float  # when its lifetime ran out
    name: str
    pod: Obj


def expired_pods(pods: list[Obj], lifetime: int, now: float) -> tuple[list[Expired], float]:
    """The pods past their lifetime, the first to expire first (ties by name), and, when
    there are none, the seconds until the next one expires (0: none will)."""
    expired: list[Expired] = []
    earliest = 0.0
    for pod in pods:
        deadline = _seconds(pod["status"]["startTime"]) + lifetime
        if deadline > now:
            left = deadline - now
            earliest = left if earliest == 0 else min(earliest, left)
        else:
            expired.append(Expired(deadline, pod["metadata"]["name"], pod))
    expired.sort(key=lambda e: (e.deadline, e.name))
    return expired, (0.0 if expired else earliest)


class Recycler:
    """Recycles pods past spec.maxPodLifetimeSeconds; remembers, per service, the pods it
    has said it waits on (one PodRecycleDeferred Event each)."""

    def __init__(self) -> None:
        self._noted: dict[str, set[str]] = {}  # service uid -> pod uids

    async def recycle_expired(
        self, ctx: Context, isvc: Obj, service: InferenceServiceSpec, now: float
    ) -> float:
        """Evict at most one expired pod; the seconds after which to look again (0: a watch
        event will bring us back)."""
        uid = isvc["metadata"]["uid"]
        pods = _settled_pods(ctx, isvc, service)
        lifetime = service.fields.max_pod_lifetime_seconds
        if pods is None or lifetime is None:
            self._noted.pop(uid, None)
            return 0.0
        expired, wait = expired_pods(pods, lifetime, now)
        if not expired:
            self._noted.pop(uid, None)
            return wait
        if not service.fields.rollout.wait_for_idle:
            return await _evict(ctx, isvc, expired[0].pod, "")
        return await self._when_idle(ctx, isvc, service, expired, now)

    async def _when_idle(
        self,
        ctx: Context,
        isvc: Obj,
        service: InferenceServiceSpec,
        expired: list[Expired],
        now: float,
    ) -> float:
        uid = isvc["metadata"]["uid"]
        budget = service.fields.max_pod_lifetime_idle_timeout_seconds
        ns, name = object_key(isvc)
        dep = ctx.cache.get(DEPLOYMENT, ns, name)
        signal = signal_for(runtime_of(dep, service) if dep is not None else service.runtime)
        # A pod whose runtime is not serving (not running, or still loading) drops nothing.
        asked = [idle.replica_of(e.pod) for e in expired if idle.serving(e.pod)]
        readings: dict[str, Reading] = {}
        if signal is not None:
            readings = await idle.probe(asked, signal)
        for e in expired:
            if not idle.serving(e.pod):
                reading = Reading(IDLE)
            else:
                reading = readings.get(e.name, Reading(UNSUPPORTED, "its runtime has none"))
            if reading.state == IDLE:
                self._noted.pop(uid, None)
                return await _evict(ctx, isvc, e.pod, " (it was idle)")
            if reading.state == UNSUPPORTED:
                self._noted.pop(uid, None)
                return await _evict(ctx, isvc, e.pod, f" (no idle signal: {reading.detail})")
        for e in expired:
            if budget is not None and now >= e.deadline + budget:
                self._noted.pop(uid, None)
                why = readings[e.name].detail
                return await _evict(
                    ctx,
                    isvc,
                    e.pod,
                    f" and {budget}s of maxPodLifetimeIdleTimeoutSeconds, still not idle ({why})",
                )
        noted = self._noted.setdefault(uid, set())
        for e in expired:
            pod_uid = e.pod["metadata"]["uid"]
            if pod_uid not in noted:
                noted.add(pod_uid)
                limit = (
                    f"at most {budget}s past its lifetime (maxPodLifetimeIdleTimeoutSeconds)"
                    if budget is not None
                    else "as long as it takes (maxPodLifetimeIdleTimeoutSeconds is not set)"
                )
                await ctx.recorder.record(
                    isvc,
                    "Normal",
                    DEFERRED,
                    f"Pod {e.name} is past maxPodLifetimeSeconds and not idle "
                    f"({readings[e.name].detail}); rolloutPolicy.waitForIdle: its eviction "
                    f"waits {limit}",
                )
        log.info("pod recycle waits for an idle pod", service=name, namespace=ns)
        left = [e.deadline + budget - now for e in expired] if budget is not None else []
        return min([CHECK_INTERVAL, *left])


def _settled_pods(ctx: Context, isvc: Obj, service: InferenceServiceSpec) -> list[Obj] | None:
    """The Deployment's pods when recycling may touch them: the Deployment settled and
    every pod accounted for, started and Ready; None otherwise."""
    if service.fields.max_pod_lifetime_seconds is None or service.multi_node is not None:
        return None
    ns, name = isvc["metadata"]["namespace"], isvc["metadata"]["name"]
    dep = ctx.cache.get(DEPLOYMENT, ns, name)
    if dep is None or not rollout_settled(dep):
        return None
    pods = [
        p
        for p in ctx.cache.list(POD, ns)
        if (p["metadata"].get("labels") or {}).get(SERVICE_LABEL) == name
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    # A pod we cannot account for (terminating, not ready, not started) holds recycling.
    if len(pods) != int(dep["status"]["replicas"]) or not all(
        not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("startTime")
        and _ready(p)
        for p in pods
    ):
        return None
    return pods


async def _evict(ctx: Context, isvc: Obj, pod: Obj, why: str) -> float:
    """Evict pod; `why` adds to the PodRecycled Event's reason for it."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns},
        "deleteOptions": {"preconditions": {"uid": pod["metadata"]["uid"]}},
    }
    try:
        await ctx.client.request("POST", POD.object_path(ns, name, "eviction"), body=body)
    except ApiError as e:
        if e.status in (404, 409):  # gone, or replaced under the same name
            return 0.0
        if e.status == 429:  # a PodDisruptionBudget said no; nothing watches that
            log.info("pod recycle held by a disruption budget", pod=name, namespace=ns)
            return RETRY
        if e.status == 403:
            await ctx.recorder.record(
                isvc,
                "Warning",
                FORBIDDEN,
                f"Cannot recycle pod {name}: {e.message}; the controller needs create on "
                "pods/eviction",
            )
            return RETRY
        raise
    await ctx.recorder.record(
        isvc,
        "Normal",
        RECYCLED,
        f"Evicted pod {name} after maxPodLifetimeSeconds{why}; the Deployment replaces it",
    )
    return 0.0
