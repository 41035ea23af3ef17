"""GPUQuota v1alpha1: LLMKube's shape (gpuCount, selector xor namespaceRef) and typed spec."""

from __future__ import annotations

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

    def matches(self, labels: dict[str, str]) -> bool:
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

    def covers(self, quota_namespace: str, namespace: str, pod_labels: dict[str, str]) -> bool:
        """namespaceRef: every service in that namespace. selector: services in the quota's
        own namespace whose pods carry matching labels."""
        if self.namespace_ref is not None:
            return namespace == self.namespace_ref
        assert self.selector is not None
        return namespace == quota_namespace and self.selector.matches(pod_labels)


def parse_gpu_quota(spec: Any) -> GPUQuotaSpec:
    data, errors = validate(SPEC, spec, "spec")
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
    )
