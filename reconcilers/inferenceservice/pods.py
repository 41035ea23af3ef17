"""An InferenceService's pods, found through the cache's index by the service label.

Every pod the controller makes (the Deployment's, multiNode members) carries
SERVICE_LABEL = the service's name; the cache files pods under it (controller/cache.py
`add_index`), so a reconcile reads its own pods instead of every pod of the namespace.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.cache import Cache
from controller.resources import DEPLOYMENT, POD, object_key
from objtypes import Obj
from reconcilers.ownership import SERVICE_LABEL

BY_SERVICE = "inferenceservice"


def service_of(pod: Obj) -> list[str]:
    """The index function: the service the pod belongs to, by our label."""
    value = (pod.get("metadata", {}).get("labels") or {}).get(SERVICE_LABEL)
    return [value] if isinstance(value, str) and value else []


def index_pods(cache: Cache) -> None:
    cache.add_index(POD, BY_SERVICE, service_of)


def service_pods(cache: Cache, isvc: Obj) -> list[Obj]:
    """Every cached pod carrying the service's label (the Deployment's included)."""
    ns, name = object_key(isvc)
    return cache.by_index(POD, BY_SERVICE, name, ns)


def owned_pods(cache: Cache, isvc: Obj) -> list[Obj]:
    """The service's pods that it owns directly (multiNode members)."""
    uid = isvc["metadata"]["uid"]
    return [
        p
        for p in service_pods(cache, isvc)
        if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
    ]


def live_pods(pods: Iterable[Obj]) -> list[Obj]:
    """Pods that are neither finished (Succeeded/Failed, e.g. evicted) nor terminating:
    the others hold no devices the service can use."""
    return [
        p
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def unschedulable(cache: Cache, isvc: Obj) -> str:
    """The scheduler's word on a pending pod, e.g. Insufficient nvidia.com/gpu."""
    for pod in service_pods(cache, isvc):
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return f"pod {pod['metadata']['name']} unschedulable: {cond.get('message', '')}"
    return ""


def pod_ready(pod: Obj) -> bool:
    return any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in (pod.get("status") or {}).get("conditions") or []
    )


def runtime_restarts(pods: Iterable[Obj], container: str) -> tuple[int, str]:
    """How often `container` (the runtime) restarted, summed over `pods`, and how its
    last run of the pod that restarted most ended ("" when none restarted): "Error, exit
    code 137", from the kubelet's lastState."""
    total, worst, ended = 0, 0, ""
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != container:
                continue
            count = int(status.get("restartCount") or 0)
            total += count
            last = (status.get("lastState") or {}).get("terminated") or {}
            if count > worst and last:
                worst = count
                ended = f"{last.get('reason') or 'terminated'}, exit code {last.get('exitCode')}"
    return total, ended


def has_workload(cache: Cache, isvc: Obj) -> bool:
    """Is a workload of ours already running? Then a vanished claim does not stop it."""
    ns, name = object_key(isvc)
    uid = isvc["metadata"]["uid"]
    live = cache.get(DEPLOYMENT, ns, name)
    owned = live is not None and any(
        r.get("uid") == uid for r in live["metadata"].get("ownerReferences") or []
    )
    return owned or bool(owned_pods(cache, isvc))
