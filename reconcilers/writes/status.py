"""Writing an object's status, with an Event for each condition that changes.

Status is written through the status subresource as a merge patch, only when it
differs from what is stored. Because the informer cache can lag behind our own last
write, the last status written per object is remembered: a reconcile that runs before
the cache caught up neither writes again nor repeats the Events.
"""

from __future__ import annotations

import json
from typing import Any

from api.conditions import NORMAL_EVENT_REASONS, WARNING_EVENT_REASONS
from controller.events import NORMAL, WARNING, EventRecorder
from controller.kube import KubeClient
from controller.resources import ResourceType
from objtypes import Obj
from reconcilers.writes.conditions import Condition, merge_conditions, transitions
from reconcilers.writes.unserved import fields_condition


def _rv(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _prune(value: Any) -> Any:
    """Drop None values: a merge patch would delete them, and the next compare would differ."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _same(a: Obj, b: Obj) -> bool:
    # Unequal dicts are never the same JSON (the common case: a status to write), so only
    # equal ones pay for the exact comparison (== takes True for 1 and 1 for 1.0).
    return a == b and json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class StatusWriter:
    def __init__(self, client: KubeClient, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder
        # uid -> (resourceVersion our write produced, status we wrote)
        self._written: dict[str, tuple[int, Obj]] = {}

    def forget(self, uid: str) -> None:
        self._written.pop(uid, None)

    def current(self, obj: Obj) -> Obj:
        """obj's status as it stands: what we last wrote while the cache lags behind it."""
        meta = obj.get("metadata") or {}
        memo = self._written.get(meta.get("uid", ""))
        if memo is not None and memo[0] > _rv(obj):
            return memo[1]
        status: Obj = obj.get("status") or {}
        return status

    async def write(
        self,
        rt: ResourceType,
        obj: Obj,
        fields: Obj,
        conditions: list[Condition],
        cleared: tuple[str, ...] = (),
    ) -> bool:
        """Set status to fields + conditions; True if anything was written. `cleared`:
        condition types to take off (kept otherwise, as others' conditions are)."""
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 0)
        current = self.current(obj)
        old_conditions = current.get("conditions") or []
        kept = [c for c in old_conditions if not (isinstance(c, dict) and c.get("type") in cleared)]
        unserved = fields_condition(rt.kind, obj, old_conditions)
        if unserved is not None:
            conditions = [*conditions, unserved]
        status = {
            **_prune(fields),
            "observedGeneration": generation,
            "conditions": merge_conditions(kept, conditions, generation),
        }
        if _same(status, current):
            return False
        # A merge patch removes the keys we no longer set by naming them null.
        patch = {**{k: None for k in current if k not in status}, **status}
        written = await self.client.patch(
            rt, meta.get("namespace"), meta["name"], {"status": patch}, subresource="status"
        )
        if len(self._written) > 50_000:
            self._written.clear()
        self._written[meta.get("uid", "")] = (_rv(written), status)
        for c in transitions(old_conditions, status["conditions"]):
            # queued, never awaited (record() without its coroutine)
            self.recorder.emit(obj, event_type(c), c["reason"], c["message"])
        return True


def event_type(condition: Obj) -> str:
    """The type of the Event a condition's transition sends."""
    if condition["reason"] in NORMAL_EVENT_REASONS:
        return NORMAL
    if condition["reason"] in WARNING_EVENT_REASONS:
        return WARNING
    return NORMAL if condition["status"] == "True" else WARNING
