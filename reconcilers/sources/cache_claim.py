"""The model cache PVC the loaders fill once per cacheKey and every replica reuses.

LLMKube's modes: `shared` (default) is one claim `llmkube-model-cache` per namespace,
owned by nobody (it outlives every InferenceService; on several nodes it needs an RWX
class); `perService` is `<isvc>-model-cache`, ReadWriteOnce, owned by the service (it is
garbage-collected with it, and binds WaitForFirstConsumer next to the GPU pod). An
InferenceService's spec.modelCache.claimName names a user-owned claim instead (never
created or changed by us); spec.modelCache.persistence Ephemeral keeps an emptyDir.

The controller only creates the claim (RBAC: persistentvolumeclaims create): it never
reads or changes one, so a claim that exists already is left as it is.
"""

from __future__ import annotations

from api import InferenceServiceSpec, ModelSpec
from controller.errors import ApiError
from controller.resources import PERSISTENT_VOLUME_CLAIM
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.ownership import owner_reference
from reconcilers.settings import CacheSettings
from reconcilers.sources.loader import EPHEMERAL, WeightsVolume, needs_loader

SHARED_CLAIM = "llmkube-model-cache"


def claim_name(isvc: Obj, settings: CacheSettings) -> str:
    if settings.mode == "perService":
        return f"{isvc['metadata']['name']}-model-cache"
    return SHARED_CLAIM


def store_for(
    isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, settings: CacheSettings
) -> WeightsVolume:
    """Where this service's loader writes (EPHEMERAL when no loader runs): an emptyDir
    is sized by spec.resources.ephemeralStorage, as LLMKube sizes its Ephemeral cache."""
    if not needs_loader(model):
        return EPHEMERAL
    pod_disk = WeightsVolume(size_limit=service.ephemeral_storage)
    if service.cache_persistence == "Ephemeral":
        return pod_disk
    if service.cache_claim:
        return WeightsVolume(service.cache_claim)
    if not settings.enabled:
        return pod_disk
    return WeightsVolume(claim_name(isvc, settings))


def build_claim(isvc: Obj, settings: CacheSettings) -> Obj:
    per_service = settings.mode == "perService"
    # Only the shared cache may be RWX (LLMKube): a per-service cache binds on its node.
    access = settings.access_mode if not per_service else "ReadWriteOnce"
    meta: Obj = {
        "name": claim_name(isvc, settings),
        "namespace": isvc["metadata"]["namespace"],
        "labels": {
            "app.kubernetes.io/name": "llmkube",
            "app.kubernetes.io/component": "model-cache",
            "app.kubernetes.io/managed-by": "llmkube",
        },
    }
    if per_service:
        meta["ownerReferences"] = [owner_reference(isvc)]
    spec: Obj = {
        "accessModes": [access],
        "resources": {"requests": {"storage": settings.size}},
    }
    if settings.storage_class:
        spec["storageClassName"] = settings.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def shared_claim(namespace: str, settings: CacheSettings) -> Obj:
    """The namespace's shared cache claim (prefetch Jobs fill it before any service)."""
    isvc = {"metadata": {"name": "", "namespace": namespace, "uid": ""}}
    return build_claim(isvc, CacheSettings(**{**settings.__dict__, "mode": "shared"}))


class ClaimMaker:
    """Creates each operator cache claim once per controller run (409: it exists)."""

    def __init__(self) -> None:
        self.made: set[tuple[str, str, str]] = set()

    async def ensure(self, ctx: Context, isvc: Obj, store: WeightsVolume) -> None:
        settings = ctx.settings.model_cache
        if not store.claim or store.claim != claim_name(isvc, settings) or not settings.enabled:
            return  # no claim, or the user's own
        await self.create(ctx, build_claim(isvc, settings), isvc["metadata"]["uid"])

    async def create(self, ctx: Context, claim: Obj, owner_uid: str = "") -> None:
        key = (claim["metadata"]["namespace"], claim["metadata"]["name"], owner_uid)
        if key in self.made:
            return
        try:
            await ctx.client.create(PERSISTENT_VOLUME_CLAIM, claim)
        except ApiError as e:
            if not e.conflict:
                raise
        self.made.add(key)
