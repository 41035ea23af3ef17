"""The opening every reconcile shares, as controller-runtime's reconcile helpers do it:
the object from the cache (gone: nothing to do), its spec parsed into the typed spec, and
an invalid spec answered with the kind's own Failed status instead of a retry (the spec
does not change by retrying; its next edit is a new event)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from api import InvalidSpec
from controller.reconcile import Request
from controller.resources import ResourceType
from objtypes import Obj
from reconcilers.context import Context

T = TypeVar("T")
# Writes the kind's status for an invalid spec, given the object and the errors joined.
RefuseInvalid = Callable[[Obj, str], Awaitable[None]]


async def open_object(
    ctx: Context,
    rt: ResourceType,
    request: Request,
    parse: Callable[[Any], T],
    refuse: RefuseInvalid,
) -> tuple[Obj, T] | None:
    """(the cached object, its parsed spec), or None when there is nothing more to do:
    the object is gone, or its spec was invalid and `refuse` has said so."""
    obj = ctx.cache.get(rt, request.namespace, request.name)
    if obj is None:
        return None
    try:
        return obj, parse(obj.get("spec"))
    except InvalidSpec as e:
        await refuse(obj, "; ".join(e.errors))
        return None
