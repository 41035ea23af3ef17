"""spec.autoscaling of an InferenceService: the HorizontalPodAutoscaler it asks for.

LLMKube's CRD types the fields but requires none of them, and its controller builds the
HPA whatever they hold (a Pods metric without a target, or a target that is no
quantity, fails only when the HPA is written). The checks here refuse those specs up
front, naming the field, so a user sees the mistake on the InferenceService.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .schema import QUANTITY_PATTERN

_QUANTITY = re.compile(QUANTITY_PATTERN)
PATH = "spec.autoscaling"


@dataclass(frozen=True)
class Metric:
    type: str  # Pods | Resource
    name: str
    target_average_value: str | None = None  # Pods
    target_average_utilization: int | None = None  # Resource


@dataclass(frozen=True)
class Autoscaling:
    min_replicas: int
    max_replicas: int
    metrics: tuple[Metric, ...] = ()  # none: the runtime's default request metric


def parse_autoscaling(data: dict[str, Any]) -> tuple[Autoscaling | None, list[str]]:
    """The typed section (None when absent) and the errors, by field path.

    data is the spec after schema validation (types and bounds already checked).
    """
    raw = data.get("autoscaling")
    if raw is None:
        return None, []
    errors: list[str] = []
    if data.get("multiNode") is not None:
        errors.append(f"{PATH}: cannot be combined with spec.multiNode (one replica at most)")
    max_replicas = raw.get("maxReplicas")
    min_replicas = raw.get("minReplicas", 1)
    if max_replicas is None:
        errors.append(f"{PATH}.maxReplicas: required when autoscaling is set")
    elif min_replicas > max_replicas:
        errors.append(f"{PATH}.minReplicas: {min_replicas} is above maxReplicas {max_replicas}")
    metrics = []
    for i, m in enumerate(raw.get("metrics") or []):
        path = f"{PATH}.metrics[{i}]"
        kind, name = m.get("type"), m.get("name")
        if not kind:
            errors.append(f"{path}.type: required (Pods or Resource)")
            continue
        if not name:
            errors.append(f"{path}.name: required")
        value, utilization = m.get("targetAverageValue"), m.get("targetAverageUtilization")
        if kind == "Pods":
            if value is None:
                errors.append(f"{path}.targetAverageValue: required for a Pods metric")
            elif not _QUANTITY.match(value):
                errors.append(f"{path}.targetAverageValue: {value!r} is not a quantity")
        elif utilization is None:
            errors.append(f"{path}.targetAverageUtilization: required for a Resource metric")
        metrics.append(Metric(kind, name or "", value, utilization))
    if errors:
        return None, errors
    assert max_replicas is not None
    return Autoscaling(min_replicas, max_replicas, tuple(metrics)), []
