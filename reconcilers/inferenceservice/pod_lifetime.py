"""spec.maxPodLifetimeSeconds: pods older than that are recycled, one at a time, as
LLMKube's pod_lifetime.go does.

Only a settled Deployment is touched: its rollout done and every one of its pods Ready
(a pod still starting, or a replacement on its way, holds recycling until it is Ready).
Then the pod whose lifetime ran out first (by `status.startTime`) is evicted through the
Eviction API, so PodDisruptionBudgets are respected and the Deployment replaces it; when
none has run out, the reconcile asks to be run again at the next expiry. A budget that
refuses the eviction (429), or missing RBAC (403, with a Warning Event), is retried
after RETRY seconds. With one replica a recycle is a restart: the model loads again.
`maxPodLifetimeIdleTimeoutSeconds` only applies with rolloutPolicy.waitForIdle, which
llmkube-py does not serve, so it is reported as not served.
"""

from __future__ import annotations

from datetime import datetime

import structlog

from api import InferenceServiceSpec
from controller.errors import ApiError
from controller.resources import DEPLOYMENT, POD
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.ownership import SERVICE_LABEL

RETRY = 30.0
RECYCLED = "PodRecycled"
FORBIDDEN = "PodRecycleForbidden"
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


def expiry(pods: list[Obj], lifetime: int, now: float) -> tuple[Obj | None, float]:
    """The pod to recycle now (the first to expire; ties by name) and, when there is
    none, the seconds until the next one expires (0: none will)."""
    expired: tuple[float, str, Obj] | None = None
    earliest = 0.0
    for pod in pods:
        deadline = _seconds(pod["status"]["startTime"]) + lifetime
        if deadline > now:
            left = deadline - now
            earliest = left if earliest == 0 else min(earliest, left)
        elif expired is None or (deadline, pod["metadata"]["name"]) < expired[:2]:
            expired = (deadline, pod["metadata"]["name"], pod)
    return (expired[2], 0.0) if expired else (None, earliest)


async def recycle_expired(
    ctx: Context, isvc: Obj, service: InferenceServiceSpec, now: float
) -> float:
    """Evict at most one expired pod; the seconds after which to look again (0: a watch
    event will bring us back)."""
    lifetime = service.fields.max_pod_lifetime_seconds
    if lifetime is None or service.multi_node is not None:
        return 0.0
    ns, name = isvc["metadata"]["namespace"], isvc["metadata"]["name"]
    dep = ctx.cache.get(DEPLOYMENT, ns, name)
    if dep is None or not rollout_settled(dep):
        return 0.0
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
        return 0.0
    pod, wait = expiry(pods, lifetime, now)
    if pod is None:
        return wait
    return await _evict(ctx, isvc, pod)


async def _evict(ctx: Context, isvc: Obj, pod: Obj) -> float:
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
        f"Evicted pod {name} after maxPodLifetimeSeconds; the Deployment replaces it",
    )
    return 0.0
