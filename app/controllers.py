"""The reconcilers this controller runs, as the manager's setup."""

from __future__ import annotations

from controller.cache import Cache
from controller.events import EventRecorder
from controller.kube import KubeClient
from controller.manager import ReconcilerSetup
from controller.reconcile import Reconciler
from reconcilers import GPUQuotaReconciler, InferenceServiceReconciler, ModelReconciler
from reconcilers.context import Context
from reconcilers.settings import Settings


def reconcilers(settings: Settings | None = None) -> ReconcilerSetup:
    """Model, InferenceService and GPUQuota over one Context (one Event recorder, one
    status writer, the operator's settings), made once when the manager is built."""

    def setup(client: KubeClient, cache: Cache, recorder: EventRecorder) -> list[Reconciler]:
        ctx = Context.create(client, cache, recorder=recorder, settings=settings)
        return [ModelReconciler(ctx), InferenceServiceReconciler(ctx), GPUQuotaReconciler(ctx)]

    return setup
