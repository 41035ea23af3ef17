"""Shared by the tests of pod_hardening in more than one tier."""

from __future__ import annotations

from typing import Any

from objtypes import Obj


def nested(depth: int, leaf: Any = 1) -> Obj:
    """An object `depth` levels deep: {"a": {"a": ... {"leaf": leaf}}}."""
    obj: Obj = {"leaf": leaf}
    for _ in range(depth - 1):
        obj = {"a": obj}
    return obj


def host_volume(path: str, name: str = "host") -> Obj:
    return {"name": name, "hostPath": {"path": path}}
