"""What a reconciler is to the manager: a named unit that maps watch events to requests.

A Watch may carry predicates, as controller-runtime's: an update event whose predicates
do not all pass is dropped before it is mapped, so an object's own status echo (a write
that bumps resourceVersion but not metadata.generation) costs no reconcile. Adds and
deletes always pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .informer import ADDED, DELETED, Event
from .resources import ResourceType


@dataclass(frozen=True, order=True)
class Request:
    """A queue key: which controller should look at which object."""

    controller: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.controller}:{self.namespace}/{self.name}"


class TerminalError(Exception):
    """A reconcile error that retrying cannot fix (controller-runtime's TerminalError):
    counted in controller_runtime_terminal_reconcile_errors_total, not requeued."""


@dataclass(frozen=True)
class Result:
    """requeue_after > 0 asks to look again later even if nothing changes."""

    requeue_after: float = 0.0


Predicate = Callable[[Event], bool]


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def _is_update(event: Event) -> bool:
    return event.type not in (ADDED, DELETED) and event.old is not None


def generation_changed(event: Event) -> bool:
    """metadata.generation moved: the spec changed (status writes leave it alone).

    Another uid is another object, whatever its generation: one deleted and created
    again while the watch was down comes back from the relist as an update."""
    if not _is_update(event):
        return True
    old, new = _meta(event.old), _meta(event.obj)
    before, after = old.get("generation"), new.get("generation")
    # Without a generation on either side (resources without one), nothing can be told.
    return before is None or after is None or before != after or old.get("uid") != new.get("uid")


def labels_changed(event: Event) -> bool:
    return not _is_update(event) or _meta(event.old).get("labels") != _meta(event.obj).get("labels")


def annotations_changed(event: Event) -> bool:
    return not _is_update(event) or _meta(event.old).get("annotations") != _meta(event.obj).get(
        "annotations"
    )


def deletion_started(event: Event) -> bool:
    """deletionTimestamp appeared (or finalizers changed while deleting)."""
    if not _is_update(event):
        return True
    old, new = _meta(event.old), _meta(event.obj)
    if new.get("deletionTimestamp") is None:
        return False
    return old.get("deletionTimestamp") is None or old.get("finalizers") != new.get("finalizers")


def any_of(*predicates: Predicate) -> Predicate:
    def passes(event: Event) -> bool:
        return any(p(event) for p in predicates)

    return passes


def primary_default(event: Event) -> bool:
    """any_of(generation_changed, labels_changed, annotations_changed, deletion_started),
    reading each metadata once: it runs on every update of every primary object."""
    if not _is_update(event):
        return True
    old, new = _meta(event.old), _meta(event.obj)
    before, after = old.get("generation"), new.get("generation")
    if before is None or after is None or before != after or old.get("uid") != new.get("uid"):
        return True
    if old.get("labels") != new.get("labels") or old.get("annotations") != new.get("annotations"):
        return True
    if new.get("deletionTimestamp") is None:
        return False
    return old.get("deletionTimestamp") is None or old.get("finalizers") != new.get("finalizers")


# What the manager applies to each reconciler's own resource unless its Watch says otherwise.
PRIMARY_DEFAULT: Predicate = primary_default


@dataclass(frozen=True)
class Watch:
    """Events of this resource type become these requests.

    predicates: all must pass for an update to be mapped. None lets the manager choose
    (PRIMARY_DEFAULT on the reconciler's primary resource, nothing on the others);
    an empty tuple asks for every event.
    """

    resource: ResourceType
    map: Callable[[Event], Iterable[Request]]
    label_selector: str | None = field(default=None)
    predicates: tuple[Predicate, ...] | None = field(default=None)


class Reconciler(Protocol):
    name: str

    @property
    def primary(self) -> ResourceType: ...

    def watches(self) -> list[Watch]:
        """Secondary resources whose events should wake this reconciler."""
        ...

    async def reconcile(self, request: Request) -> Result: ...
