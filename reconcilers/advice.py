"""Advisory conditions: combinations that run, but not the way the user most likely wants.

They never block the workload; a False status comes with a Warning Event once.
"""

from __future__ import annotations

from typing import Any

from api import InferenceServiceSpec, ModelSpec
from api.conditions import CLAIMS_PER_POD, KUEUE_COMPATIBLE

from .conditions import Condition

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def advisories(
    isvc: dict[str, Any], service: InferenceServiceSpec, model: ModelSpec
) -> list[Condition]:
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
    labels = (isvc.get("metadata") or {}).get("labels") or {}
    if KUEUE_QUEUE_LABEL in labels:
        if model.gpu.count > 0:
            result.append(
                Condition(
                    KUEUE_COMPATIBLE,
                    False,
                    "CountWithClaims",
                    f"the llmkube-kueue integration asks Kueue for nvidia.com/gpu: "
                    f"{model.gpu.count}, which a DRA-only cluster never has: leave count out of "
                    "the Model for Kueue-managed services",
                )
            )
        else:
            result.append(
                Condition(
                    KUEUE_COMPATIBLE,
                    True,
                    "NoDevicePluginRequest",
                    "no nvidia.com/gpu quota is requested from Kueue",
                )
            )
    return result
