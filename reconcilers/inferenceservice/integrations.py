"""What a reconcile's optional objects (spec.slo, spec.endpoint.gateway) add to the status.

Each is another project's API (Pyrra, Envoy AI Gateway) that the cluster may not serve:
a missing CRD, a refused write or a bad field becomes a condition of its own (`SLOReady`,
`GatewayReady`), with a recheck where waiting may help, never a failed reconcile (only
the apiserver's weather does that: 5xx, 409, 429, a lost connection, retried as any
reconcile), while the workload is served as usual. Run after the workload is applied
(reconciler.py), so a blocked or refused reconcile leaves them, like the workload, as
they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from objtypes import Obj
from reconcilers.context import Context
from reconcilers.writes.conditions import Condition

# Look again this often while an optional object could not be written (its CRD missing,
# a write refused): installing Pyrra or the AI Gateway is then seen without an edit.
RECHECK = 60.0


@dataclass(frozen=True)
class Integration:
    """One optional object's word on the status."""

    conditions: tuple[Condition, ...] = ()
    # Condition types to take off the status: the field is unset and its objects gone.
    cleared: tuple[str, ...] = ()
    status: Obj = field(default_factory=dict)  # status fields, e.g. {"gateway": {...}}
    recheck: bool = False


def has_condition(ctx: Context, isvc: Obj, type_: str) -> bool:
    """Whether the status carries this condition (we wrote it: our objects may exist).
    Read through the status writer: the cache may not have our last write yet."""
    conditions = ctx.status.current(isvc).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == type_ for c in conditions)
