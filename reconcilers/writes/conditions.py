"""Status conditions (metav1.Condition) that keep their transition time while unchanged."""

from __future__ import annotations

from dataclasses import dataclass

from controller.clock import now as _now
from objtypes import Obj


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str

    def as_status(self, generation: int, previous: Obj | None) -> Obj:
        status = "True" if self.status else "False"
        unchanged = previous is not None and previous.get("status") == status
        return {
            "type": self.type,
            "status": status,
            "reason": self.reason,
            "message": self.message,
            "observedGeneration": generation,
            "lastTransitionTime": (
                previous.get("lastTransitionTime") if unchanged and previous else _now()
            ),
        }


def merge_conditions(existing: list[Obj], new: list[Condition], generation: int) -> list[Obj]:
    """The new conditions, in the order given; others set by someone else are kept."""
    by_type = {c.get("type"): c for c in existing if isinstance(c, dict)}
    ours = [c.as_status(generation, by_type.get(c.type)) for c in new]
    owned = {c.type for c in new}
    return ours + [c for t, c in by_type.items() if t not in owned]


def find(conditions: list[Obj], type_: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def transitions(old: list[Obj], new: list[Obj]) -> list[Obj]:
    """Conditions whose status or reason changed: each is worth an Event."""
    changed = []
    for c in new:
        before = find(old, c["type"])
        if before is None or (before.get("status"), before.get("reason")) != (
            c["status"],
            c["reason"],
        ):
            changed.append(c)
    return changed
