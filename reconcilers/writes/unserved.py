"""The `FieldsServed` condition: LLMKube fields a spec sets that llmkube-py does not act on.

Added by the status writer to every Model, InferenceService and GPUQuota status it
writes, so no reconcile path can forget it. It appears once a spec sets such a field
(False, `FieldsNotServed`, the field paths in the message; its transition is the one
Warning Event) and then stays, turning True when the fields are gone, so the user sees
the change. An object that never set one carries no such condition. `Ready` does not
depend on it: the fields are stored, the rest of the spec is served.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api import conditions as c
from api.unserved import gpu_quota_fields, inference_service_fields, model_fields
from objtypes import Obj
from reconcilers.writes.conditions import Condition, find

_BY_KIND: dict[str, Callable[[Any], list[str]]] = {
    "Model": model_fields,
    "InferenceService": inference_service_fields,
    "GPUQuota": gpu_quota_fields,
}


def fields_condition(kind: str, obj: Obj, current_conditions: list[Obj]) -> Condition | None:
    """The condition for obj's spec, or None when there is nothing to say."""
    fields_of = _BY_KIND.get(kind)
    if fields_of is None:
        return None
    paths = fields_of(obj.get("spec"))
    if paths:
        return Condition(
            c.FIELDS_SERVED,
            False,
            c.FIELDS_NOT_SERVED,
            "stored but not acted on by llmkube-py (see docs/api.md): " + ", ".join(paths),
        )
    if find(current_conditions, c.FIELDS_SERVED) is None:
        return None
    return Condition(c.FIELDS_SERVED, True, c.ALL_FIELDS_SERVED, "every field set is served")
