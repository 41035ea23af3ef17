"""The reconcilers this controller runs, as the manager's factories."""

from __future__ import annotations

from controller.cache import Cache
from controller.kube import KubeClient
from controller.manager import ReconcilerFactory
from controller.reconcile import Reconciler
from reconcilers.context import Context
from reconcilers.gpuquota import GPUQuotaReconciler
from reconcilers.inferenceservice import InferenceServiceReconciler
from reconcilers.model import ModelReconciler


def reconcilers() -> list[ReconcilerFactory]:
    """Model, InferenceService and GPUQuota, sharing one Context (one Event recorder and
    status writer) per manager."""
    shared: dict[int, Context] = {}

    def context(client: KubeClient, cache: Cache) -> Context:
        if id(cache) not in shared:
            shared[id(cache)] = Context.create(client, cache)
        return shared[id(cache)]

    def model(client: KubeClient, cache: Cache) -> Reconciler:
        return ModelReconciler(context(client, cache))

    def service(client: KubeClient, cache: Cache) -> Reconciler:
        return InferenceServiceReconciler(context(client, cache))

    def quota(client: KubeClient, cache: Cache) -> Reconciler:
        return GPUQuotaReconciler(context(client, cache))

    return [model, service, quota]
