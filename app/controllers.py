"""The reconcilers this controller runs, as the manager's factories."""

from __future__ import annotations

from controller.cache import Cache
from controller.events import EventRecorder
from controller.kube import KubeClient
from controller.manager import ReconcilerFactory
from controller.reconcile import Reconciler
from reconcilers.context import Context
from reconcilers.gpuquota import GPUQuotaReconciler
from reconcilers.inferenceservice import InferenceServiceReconciler
from reconcilers.kueue import KueueSettings
from reconcilers.model import ModelReconciler
from reconcilers.model_cache_settings import CacheSettings
from reconcilers.pod_security import DEFAULT_FS_GROUP


def reconcilers(
    kueue: KueueSettings | None = None,
    allowed_host_path_roots: tuple[str, ...] = (),
    model_cache: CacheSettings | None = None,
    allow_any_extra_volume_host_path: bool = False,
    default_fs_group: int = DEFAULT_FS_GROUP,
) -> list[ReconcilerFactory]:
    """Model, InferenceService and GPUQuota, sharing one Context (one Event recorder and
    status writer) per manager. kueue: the deviceClassMappings Kueue is configured with;
    allowed_host_path_roots: where host-path Model sources may come from; model_cache:
    the cache PVC settings; allow_any_extra_volume_host_path: hostPath volumes in
    extraVolumes outside those roots too; default_fs_group: the fsGroup of pods whose
    podSecurityContext sets none (0: none)."""
    shared: dict[int, Context] = {}

    def context(client: KubeClient, cache: Cache, recorder: EventRecorder) -> Context:
        if id(cache) not in shared:
            shared[id(cache)] = Context.create(
                client,
                cache,
                recorder=recorder,
                allowed_host_path_roots=allowed_host_path_roots,
                model_cache=model_cache,
                allow_any_extra_volume_host_path=allow_any_extra_volume_host_path,
                default_fs_group=default_fs_group,
            )
        return shared[id(cache)]

    def model(client: KubeClient, cache: Cache, recorder: EventRecorder) -> Reconciler:
        return ModelReconciler(context(client, cache, recorder))

    def service(client: KubeClient, cache: Cache, recorder: EventRecorder) -> Reconciler:
        return InferenceServiceReconciler(context(client, cache, recorder), kueue)

    def quota(client: KubeClient, cache: Cache, recorder: EventRecorder) -> Reconciler:
        return GPUQuotaReconciler(context(client, cache, recorder))

    return [model, service, quota]
