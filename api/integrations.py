"""spec.slo and spec.endpoint.gateway: LLMKube's shapes, and the typed values we read.

Both ask the controller for objects of other projects' APIs: a Pyrra
ServiceLevelObjective (`slo`) and the Envoy AI Gateway route to the service
(`endpoint.gateway`). The schema is LLMKube's (its kubebuilder markers, as CEL where
they are rules); what only the object we build can tell (a name the apiserver would
refuse, a zero window) is checked by the reconciler that builds it and reported on its
condition, so a bad SLO never stops the workload.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .schema import Bool, Object, Rule, Str

# LLMKube's patterns (api/v1alpha1/inferenceservice_types.go, SLOSpec).
DECIMAL = r"^[0-9]+(\.[0-9]+)?$"
WINDOW = r"^[0-9]+[mhdw]$"
INDICATORS = ("availability", "latency")
OBJECTIVE_MIN, OBJECTIVE_MAX = 50.0, 99.999


def _objective_in_range(slo: dict[str, Any]) -> bool:
    value = slo.get("objective")
    if value is None:
        return True
    try:
        return OBJECTIVE_MIN <= float(value) <= OBJECTIVE_MAX
    except (TypeError, ValueError):
        return False  # CEL's double() fails on it too: the rule does not hold


def _latency_has_threshold(slo: dict[str, Any]) -> bool:
    return slo.get("indicator") != "latency" or slo.get("latencyThreshold") is not None


SLO = Object(
    fields={
        "name": Str(description="Defaults to <inferenceservice-name>-<indicator>."),
        "objective": Str(
            pattern=DECIMAL,
            explain=lambda v: 'must be a percentage written as a decimal string, e.g. "99.5"',
            description="The target, a percentage between 50 and 99.999 (a string, as "
            "Pyrra's target).",
        ),
        "window": Str(
            pattern=WINDOW,
            default="28d",
            explain=lambda v: 'must be a whole number of minutes, hours, days or weeks, e.g. "28d"',
        ),
        "indicator": Str(enum=INDICATORS, default="availability"),
        "latencyThreshold": Str(
            pattern=DECIMAL,
            explain=lambda v: 'must be a number of seconds written as a decimal string, e.g. "2"',
            description="Seconds a request must beat to count as good (indicator latency).",
        ),
    },
    required=("objective",),
    rules=(
        Rule(
            "!has(self.objective) || "
            f"(double(self.objective) >= {OBJECTIVE_MIN} && "
            f"double(self.objective) <= {OBJECTIVE_MAX})",
            f"objective must be a number between {OBJECTIVE_MIN:g} and {OBJECTIVE_MAX:g}",
            _objective_in_range,
            field_path=".objective",
        ),
        Rule(
            "!has(self.indicator) || self.indicator != 'latency' || has(self.latencyThreshold)",
            "latencyThreshold is required when indicator is latency",
            _latency_has_threshold,
            field_path=".latencyThreshold",
        ),
    ),
)

GATEWAY = Object(
    fields={
        "enabled": Bool(),
        "gatewayRef": Object(
            fields={
                "name": Str(),
                "namespace": Str(description="Empty: the InferenceService's namespace."),
            },
            required=("name",),
        ),
        "modelName": Str(description="The OpenAI model name clients send; defaults to modelRef."),
    },
    required=("gatewayRef",),
)


@dataclass(frozen=True)
class ServiceLevelObjective:
    """spec.slo, defaults applied."""

    objective: str
    window: str = "28d"
    indicator: str = "availability"
    name: str | None = None  # None: <inferenceservice>-<indicator>
    latency_threshold: str | None = None


@dataclass(frozen=True)
class GatewayExposure:
    """spec.endpoint.gateway."""

    enabled: bool
    gateway_name: str
    gateway_namespace: str | None = None  # None: the InferenceService's namespace
    model_name: str | None = None  # None: modelRef


def parse_slo(data: dict[str, Any]) -> ServiceLevelObjective | None:
    """The typed spec.slo of a validated spec (None when unset)."""
    slo = data.get("slo")
    if not slo:
        return None
    return ServiceLevelObjective(
        objective=slo["objective"],
        window=slo.get("window", "28d"),
        indicator=slo.get("indicator", "availability"),
        name=slo.get("name") or None,
        latency_threshold=slo.get("latencyThreshold"),
    )


def parse_gateway(data: dict[str, Any]) -> GatewayExposure | None:
    """The typed spec.endpoint.gateway of a validated spec (None when unset)."""
    gateway = (data.get("endpoint") or {}).get("gateway")
    if not gateway:
        return None
    ref = gateway["gatewayRef"]
    return GatewayExposure(
        enabled=bool(gateway.get("enabled")),
        gateway_name=ref["name"],
        gateway_namespace=ref.get("namespace") or None,
        model_name=gateway.get("modelName") or None,
    )


# What the objects we build must be: the apiserver's own rules for their names, and
# RFC 7230's for a header value (Gateway API's HTTPHeaderMatch pattern).
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_HEADER_VALUE = re.compile(r"[!-~]+([\t ]?[!-~]+)*")


def subdomain_error(value: str) -> str | None:
    """Why value is not a DNS-1123 subdomain (an object name), if it is not."""
    if len(value) > 253 or not _SUBDOMAIN.fullmatch(value):
        return (
            f"{value!r} is not a valid object name (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters)"
        )
    return None


def label_error(value: str) -> str | None:
    """Why value is not a DNS-1123 label (a namespace name), if it is not."""
    if len(value) > 63 or not _LABEL.fullmatch(value):
        return (
            f"{value!r} is not a valid namespace name (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return None


def header_value_error(value: str) -> str | None:
    """Why value cannot be matched as an HTTP header value, if it cannot."""
    if len(value) > 4096 or not _HEADER_VALUE.fullmatch(value):
        return (
            f"{value!r} is not a header value (visible ASCII characters, single spaces or "
            "tabs between them, at most 4096 characters)"
        )
    return None
