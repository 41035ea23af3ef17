"""spec.disruption: a PodDisruptionBudget that keeps the service's pods from voluntary
eviction (kubectl drain, cluster-autoscaler and Karpenter consolidation, which all evict
through the API and respect budgets) while they need protecting.

LLMKube protects the startup window by default (`protectStartup`, true unless turned
off): model download and load take minutes and an eviction then starts them over. With
`protectAlways` the protection stays. LLMKube expresses it as the karpenter.sh/
do-not-disrupt annotation on the pod template; a template annotation that comes and goes
with readiness would restart the pods each time it changes, so the same protection is a
budget here (`maxUnavailable: 0`, selecting the service's pods), created while protected
and removed otherwise. Deployment rollouts delete pods directly and are not held up.
"""

from __future__ import annotations

from api import InferenceServiceSpec
from controller.cache import Cache
from controller.kube import KubeClient
from controller.resources import POD_DISRUPTION_BUDGET
from objtypes import Obj
from reconcilers.ownership import SERVICE_LABEL, owned_metadata
from reconcilers.writes.apply import ensure_or_remove


def protected(service: InferenceServiceSpec, ready: int, wanted: int) -> bool:
    """Should the pods be kept from eviction now? ready/wanted: the replicas."""
    d = service.fields.disruption
    return d.protect_always or (d.protect_startup and wanted > 0 and ready < wanted)


def build_budget(isvc: Obj, service: InferenceServiceSpec) -> Obj:
    name = isvc["metadata"]["name"]
    return {
        "apiVersion": POD_DISRUPTION_BUDGET.api_version,
        "kind": POD_DISRUPTION_BUDGET.kind,
        "metadata": owned_metadata(isvc, name, service.model_ref),
        "spec": {"selector": {"matchLabels": {SERVICE_LABEL: name}}, "maxUnavailable": 0},
    }


async def ensure_budget(
    client: KubeClient, cache: Cache, isvc: Obj, service: InferenceServiceSpec, protect: bool
) -> None:
    """The budget while protect, else none. Raises NotOwned for a budget of that name
    that is not ours (it is left alone)."""
    desired = build_budget(isvc, service) if protect else None
    await ensure_or_remove(client, cache, POD_DISRUPTION_BUDGET, isvc, desired)
