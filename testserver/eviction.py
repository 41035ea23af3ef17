"""POST pods/<name>/eviction (policy/v1 Eviction), as kube-apiserver's eviction REST:
the pod is deleted unless a PodDisruptionBudget selecting it has no disruption left
(429 TooManyRequests). Reduced to what the controller relies on: the budget is worked
out on the spot from the pods' Ready conditions (no disruption controller), a pod that
is not Ready may always go, and `deleteOptions.preconditions.uid` is honoured.
"""

from __future__ import annotations

import math
from typing import Any

from objtypes import Obj

from .kinds import POD, POD_DISRUPTION_BUDGET
from .storage import Storage, StorageError


def _ready(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _selects(pdb: Obj, pod: Obj) -> bool:
    selector = (pdb.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    wanted = selector.get("matchLabels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def _count(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(total * int(value[:-1]) / 100)
    return int(value)


def _disruptions_allowed(pdb: Obj, pods: list[Obj]) -> int:
    spec = pdb.get("spec") or {}
    expected = len(pods)
    healthy = sum(_ready(p) for p in pods)
    if spec.get("maxUnavailable") is not None:
        return _count(spec["maxUnavailable"], expected) - (expected - healthy)
    return healthy - _count(spec.get("minAvailable", 1), expected)


def evict(storage: Storage, namespace: str, name: str, body: Any) -> Obj:
    """Delete the pod if its budgets allow; the deleted pod. Raises StorageError."""
    pod = storage.view(POD, namespace, name)
    uid = (((body or {}).get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
    if uid and uid != pod["metadata"]["uid"]:
        raise StorageError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
    if _ready(pod):
        live = storage.select_view(POD, namespace, _running)
        for pdb in storage.select_view(POD_DISRUPTION_BUDGET, namespace, lambda o: True):
            if not _selects(pdb, pod):
                continue
            selected = [p for p in live if _selects(pdb, p)]
            if _disruptions_allowed(pdb, selected) < 1:
                raise StorageError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                )
    return storage.delete(POD, namespace, name)
