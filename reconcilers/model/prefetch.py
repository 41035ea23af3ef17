"""spec.prefetch: a Job owned by the Model that runs the loader into the shared cache.

The Job (`<model>-prefetch-<cacheKey>`, one per cacheKey: a Job's pod template cannot
change, so one that exists is never applied again) runs the same loader as a serving
pod, with spec.prefetchTolerations, so the first replica finds the files cached. Its
pod's termination message feeds the Model's status like any loader's. Prefetch needs
the operator's shared cache; without it the Model says so (condition Prefetch=False,
PrefetchNeedsSharedCache) and nothing runs.
"""

from __future__ import annotations

from api import ModelSpec
from api import conditions as c
from api.source import HF_ENDPOINT
from controller.resources import JOB, MODEL
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.model.delivery import Delivery
from reconcilers.ownership import MANAGED_BY, MANAGER, MODEL_LABEL
from reconcilers.pod_security import DEFAULT_FS_GROUP, harden, restricted_namespace
from reconcilers.sources.cache_claim import SHARED_CLAIM, ClaimMaker, shared_claim
from reconcilers.sources.loader import WeightsVolume, loader_for
from reconcilers.writes.apply import NotOwned, ensure, owned_by
from reconcilers.writes.conditions import Condition

BACKOFF_LIMIT = 3
_claims = ClaimMaker()


def job_name(name: str, model: ModelSpec) -> str:
    return f"{name[:40]}-prefetch-{model.cache_key[:8]}"


def build_job(
    obj: Obj,
    model: ModelSpec,
    fs_group: int = DEFAULT_FS_GROUP,
    restricted: bool = False,
    hub: str = HF_ENDPOINT,
) -> Obj:
    """fs_group: the operator's --default-fsgroup; restricted: the namespace enforces Pod
    Security `restricted`; hub: the operator's --hf-endpoint. The pod is hardened as a
    serving pod (pod_security.py), with the cache prep before the loader where it may
    run as root."""
    meta = obj["metadata"]
    loading = loader_for(model, WeightsVolume(SHARED_CLAIM), hub=hub)
    assert loading is not None, "only a Model a loader stages is prefetched"
    labels = {MANAGED_BY: MANAGER, MODEL_LABEL: meta["name"]}
    pod: Obj = {
        "restartPolicy": "Never",
        "containers": [loading.container],
        "volumes": [WeightsVolume(SHARED_CLAIM).volume()],
    }
    if model.prefetch_tolerations:
        pod["tolerations"] = [dict(t) for t in model.prefetch_tolerations]
    harden(
        pod, fs_group, cache_volume=WeightsVolume(SHARED_CLAIM).volume_name, restricted=restricted
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(meta["name"], model),
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": MODEL.api_version,
                    "kind": MODEL.kind,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


async def ensure_prefetch(
    ctx: Context, obj: Obj, model: ModelSpec, got: Delivery
) -> Condition | None:
    """The Prefetch condition, or None when spec.prefetch is not set."""
    if not model.prefetch:
        return None
    settings = ctx.settings.model_cache
    if not settings.enabled or settings.mode != "shared":
        return Condition(
            c.PREFETCH,
            False,
            c.PREFETCH_NEEDS_CACHE,
            "spec.prefetch fills the operator's shared model cache, which is not enabled "
            "(--model-cache=enabled --model-cache-mode=shared; chart modelCache): nothing "
            "is prefetched, each pod's loader downloads",
        )
    await _claims.create(ctx, shared_claim(obj["metadata"]["namespace"], settings))
    restricted = restricted_namespace(ctx.cache, obj["metadata"]["namespace"])
    desired = build_job(
        obj, model, ctx.settings.default_fs_group, restricted, ctx.settings.hf_endpoint
    )
    uid = obj["metadata"]["uid"]
    ns, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    live = ctx.cache.get(JOB, ns, name) or await ctx.client.get(JOB, ns, name)
    if live is not None and owned_by(live, uid):
        # Ours already: a Job's pod template cannot change (the API server refuses it),
        # so one made by an earlier controller (another template) runs as it was made.
        job = live
    else:
        try:
            job = await ensure(ctx.client, ctx.cache, JOB, desired, uid)
        except NotOwned as e:
            return Condition(c.PREFETCH, False, c.PREFETCH_FAILED, str(e))
    status = job.get("status") or {}
    name = job["metadata"]["name"]
    if int(status.get("succeeded") or 0) > 0:
        return Condition(c.PREFETCH, True, c.PREFETCH_COMPLETE, f"Job {name} staged the files")
    failed = any(
        x.get("type") == "Failed" and x.get("status") == "True"
        for x in status.get("conditions") or []
    )
    if failed:
        return Condition(c.PREFETCH, False, c.PREFETCH_FAILED, f"Job {name} failed: {got.message}")
    return Condition(c.PREFETCH, False, c.PREFETCH_RUNNING, f"Job {name} is staging the files")
