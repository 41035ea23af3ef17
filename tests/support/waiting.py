"""Waiting for what a controller does: poll until true, status conditions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from controller.kube import KubeClient

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], timeout: float = 10.0, what: str = "condition"
) -> T:
    """Poll probe until it returns something truthy; fail with what it last saw."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await probe()
        except AssertionError as e:
            last = e
        else:
            if last:
                result: T = last
                return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The status condition of this type, if the object has it."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


async def wait_condition(
    client: KubeClient,
    rt: Any,
    name: str,
    type_: str,
    status: str,
    reason: str | None = None,
    namespace: str = "default",
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Wait until the object's condition has this status (and reason); return the object."""

    async def probe() -> dict[str, Any] | None:
        obj = await client.get(rt, namespace, name)
        c = condition(obj, type_)
        if c and c["status"] == status and (reason is None or c["reason"] == reason):
            return obj
        return None

    return await eventually(probe, timeout, what=f"{name} {type_}={status} {reason or ''}")
