"""Which ResourceClaims and ResourceClaimTemplates a Model names, and which are missing."""

from __future__ import annotations

from api import ModelSpec
from controller.cache import Cache
from controller.resources import RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE
from objtypes import Obj


def missing_claims(cache: Cache, namespace: str, model: ModelSpec) -> list[str]:
    """Human-readable names of the claims and templates not found in the namespace."""
    missing = []
    for claim in model.gpu.claims:
        if claim.claim_name and cache.get(RESOURCE_CLAIM, namespace, claim.claim_name) is None:
            missing.append(f"ResourceClaim {claim.claim_name!r}")
        if (
            claim.template_name
            and cache.get(RESOURCE_CLAIM_TEMPLATE, namespace, claim.template_name) is None
        ):
            missing.append(f"ResourceClaimTemplate {claim.template_name!r}")
    return missing


def names_claim(model_obj: Obj, field: str, name: str) -> bool:
    """Does this raw Model name the claim (field resourceClaimName) or template?

    Read from the raw object so that event mapping stays cheap and also works for
    Models whose spec is otherwise invalid.
    """
    gpu = ((model_obj.get("spec") or {}).get("hardware") or {}).get("gpu") or {}
    entries = gpu.get("resourceClaims") if isinstance(gpu, dict) else None
    if not isinstance(entries, list):
        return False
    return any(isinstance(e, dict) and e.get(field) == name for e in entries)
