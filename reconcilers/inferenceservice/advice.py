"""Advisory conditions: combinations that run, but not the way the user most likely wants.

They never block the workload; a False status comes with a Warning Event once.
"""

from __future__ import annotations

from typing import Any

from api import InferenceServiceSpec, ModelSpec
from api.conditions import CLAIMS_PER_POD, EXTENDED_RESOURCE_OVERLAP
from reconcilers.writes.conditions import Condition


def advisories(
    isvc: dict[str, Any],
    service: InferenceServiceSpec,
    model: ModelSpec,
    extended_class: str | None = None,
) -> list[Condition]:
    """extended_class: the DeviceClass serving the vendor's device-plugin resource
    through DRA (KEP-5004), if any. Kueue's verdict is reconcilers/devices/kueue.py's."""
    if not model.uses_claims:
        return []
    result = []
    shared = [c.claim_name for c in model.gpu.claims if c.claim_name]
    if shared and service.replicas > 1:
        result.append(
            Condition(
                CLAIMS_PER_POD,
                False,
                "SharedClaimAcrossReplicas",
                f"{service.replicas} replicas all share ResourceClaim {', '.join(shared)} and its "
                "devices; use resourceClaimTemplateName to give each pod a claim of its own",
            )
        )
    else:
        result.append(
            Condition(CLAIMS_PER_POD, True, "AsIntended", "claims match the number of pods")
        )
    if model.gpu.count > 0:
        result.append(_overlap(model.gpu.count, extended_class))
    return result


def _overlap(count: int, extended_class: str | None) -> Condition:
    """count next to claims where a DeviceClass serves nvidia.com/gpu (KEP-5004)."""
    if extended_class is None:
        return Condition(
            EXTENDED_RESOURCE_OVERLAP,
            True,
            "NoExtendedResourceClass",
            "no DeviceClass serves the vendor's device-plugin resource through DRA",
        )
    return Condition(
        EXTENDED_RESOURCE_OVERLAP,
        False,
        "CountServedTwice",
        f"DeviceClass {extended_class!r} serves the device-plugin resource through DRA "
        f"(extendedResourceName): a {count}-GPU limit next to these claims, as LLMKube "
        "v0.10.3 and earlier or the llmkube-kueue integration add, would allocate "
        f"{count} more device(s) besides the claims' own; llmkube-py adds none",
    )
