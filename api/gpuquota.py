"""GPUQuota v1alpha1: LLMKube's shape (gpuCount, selector xor namespaceRef) and typed spec.

Scope, as LLMKube's gpuquota_controller: `namespaceRef` covers the InferenceServices of
that namespace; `selector` (a metav1.LabelSelector) covers those of every namespace
whose Namespace labels match, wherever the quota itself lives (`{}` matches every
namespace). Only one may be set (the CEL rule); LLMKube reads namespaceRef first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .common import CONDITIONS
from .errors import InvalidSpec
from .inferenceservice import PRIORITIES
from .schema import Array, Int, Object, Rule, Str, StrMap, validate

LABEL_SELECTOR = Object(
    fields={
        "matchLabels": StrMap(),
        "matchExpressions": Array(
            items=Object(
                fields={
                    "key": Str(min_length=1),
                    "operator": Str(enum=("In", "NotIn", "Exists", "DoesNotExist")),
                    "values": Array(items=Str()),
                },
                required=("key", "operator"),
            )
        ),
    },
    description="metav1.LabelSelector",
)


def _one_scope(spec: dict[str, Any]) -> bool:
    return ("selector" in spec) != ("namespaceRef" in spec)


SPEC = Object(
    fields={
        "selector": LABEL_SELECTOR,
        "namespaceRef": Str(min_length=1),
        "gpuCount": Int(minimum=0),
        "vramBytes": Int(minimum=0, fmt="int64"),
        "minPriority": Str(enum=PRIORITIES),
        "costBudgetRef": Str(),
    },
    required=("gpuCount",),
    rules=(
        Rule(
            "has(self.selector) != has(self.namespaceRef)",
            "exactly one of selector or namespaceRef must be set",
            _one_scope,
        ),
    ),
)

STATUS = Object(
    fields={
        "usedGPUCount": Int(),
        "usedVRAMBytes": Int(fmt="int64"),
        "admissionDenials": Int(fmt="int64"),
        "lastDenial": Str(),
        "observedGeneration": Int(fmt="int64"),
        # llmkube-py extensions (docs/api.md names them): what is asked, and a row per service.
        "requestedGPUCount": Int(),
        "allocatedGPUCount": Int(description="Devices DRA allocated to the covered services."),
        "omittedServices": Int(
            description="Covered services left out of `services` (at most 1000 rows are "
            "listed: those held back first, then those charged)."
        ),
        "services": Array(
            items=Object(
                fields={
                    "namespace": Str(),
                    "name": Str(),
                    "requestedReplicas": Int(),
                    "admittedReplicas": Int(),
                    "gpusPerReplica": Int(),
                    "gpus": Int(),
                    "allocatedGPUs": Int(),
                    "vramBytes": Int(
                        fmt="int64", description="GPU memory its admitted replicas use."
                    ),
                    "heldBy": Str(
                        description="What kept replicas back: gpuCount, vramBytes or minPriority."
                    ),
                }
            )
        ),
        "conditions": CONDITIONS,
    }
)


@dataclass(frozen=True)
class LabelSelector:
    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: tuple[dict[str, Any], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for e in self.match_expressions:
            key, op, values = e["key"], e["operator"], e.get("values") or []
            present = key in labels
            if op == "In" and not (present and labels[key] in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True)
class GPUQuotaSpec:
    gpu_count: int
    namespace_ref: str | None = None
    selector: LabelSelector | None = None
    min_priority: str | None = None
    vram_bytes: int = 0  # 0: no VRAM cap (LLMKube)

    def covers(self, namespace: str, namespace_labels: Mapping[str, str] | None) -> bool:
        """Does the quota cover the services of this namespace? namespace_labels: the
        Namespace object's labels, None when there is no such Namespace (then only
        namespaceRef can name it)."""
        if self.namespace_ref is not None:
            return namespace == self.namespace_ref
        if self.selector is None or namespace_labels is None:
            return False
        return self.selector.matches(namespace_labels)


def _expression_errors(selector: Mapping[str, Any]) -> list[str]:
    """What metav1.LabelSelectorAsSelector refuses: In/NotIn without values,
    Exists/DoesNotExist with some (LLMKube's controller then fails every reconcile)."""
    errors = []
    for i, e in enumerate(selector.get("matchExpressions") or ()):
        path = f"spec.selector.matchExpressions[{i}].values"
        op, values = e["operator"], e.get("values") or []
        if op in ("In", "NotIn") and not values:
            errors.append(f"{path}: must be non-empty when operator is {op}")
        if op in ("Exists", "DoesNotExist") and values:
            errors.append(f"{path}: must be empty when operator is {op}")
    return errors


def parse_gpu_quota(spec: Any) -> GPUQuotaSpec:
    data, errors = validate(SPEC, spec, "spec")
    if not errors and data.get("selector") is not None:
        errors = _expression_errors(data["selector"])
    if errors:
        raise InvalidSpec(errors)
    sel = data.get("selector")
    return GPUQuotaSpec(
        gpu_count=data["gpuCount"],
        namespace_ref=data.get("namespaceRef"),
        selector=(
            LabelSelector(
                dict(sel.get("matchLabels") or {}), tuple(sel.get("matchExpressions") or ())
            )
            if sel is not None
            else None
        ),
        min_priority=data.get("minPriority"),
        vram_bytes=data.get("vramBytes") or 0,
    )
