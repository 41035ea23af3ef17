"""Defaulting and validation of built-in kinds, where the controller depends on them.

kube-apiserver defaults a Deployment's `spec.strategy` to RollingUpdate with 25%
maxSurge / maxUnavailable, and refuses `rollingUpdate` next to `type: Recreate`. With
server-side apply the defaulted `rollingUpdate` belongs to no manager, so an apply that
switches the type to Recreate without having owned it is refused
(kubernetes/kubernetes#24198): the test server must do the same for a test to see it.
"""

from __future__ import annotations

from objtypes import Obj

from .schema import Cause

ROLLING_DEFAULT = {"maxSurge": "25%", "maxUnavailable": "25%"}


def default_and_validate(kind: str, group: str, obj: Obj) -> list[Cause]:
    if (group, kind) != ("apps", "Deployment"):
        return []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    strategy = spec.setdefault("strategy", {})
    if not isinstance(strategy, dict):
        return []
    kind_ = strategy.setdefault("type", "RollingUpdate")
    if kind_ == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            for key, value in ROLLING_DEFAULT.items():
                rolling.setdefault(key, value)
        return []
    if kind_ == "Recreate" and strategy.get("rollingUpdate") is not None:
        return [
            Cause(
                "FieldValueForbidden",
                "spec.strategy.rollingUpdate",
                "Forbidden: may not be specified when strategy `type` is 'Recreate'",
            )
        ]
    return []
