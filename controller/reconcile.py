"""What a reconciler is to the manager: a named unit that maps watch events to requests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .informer import Event
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


@dataclass(frozen=True)
class Watch:
    """Events of this resource type become these requests."""

    resource: ResourceType
    map: Callable[[Event], Iterable[Request]]
    label_selector: str | None = field(default=None)


class Reconciler(Protocol):
    name: str

    @property
    def primary(self) -> ResourceType: ...

    def watches(self) -> list[Watch]:
        """Secondary resources whose events should wake this reconciler."""
        ...

    async def reconcile(self, request: Request) -> Result: ...
