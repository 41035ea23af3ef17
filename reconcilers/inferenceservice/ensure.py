"""A plan's workload, written with server-side apply (reconcilers/writes/apply.py).

A Deployment (or, for multiNode, one pinned Pod per member and their headless Service),
a Service, the HorizontalPodAutoscaler and the PodDisruptionBudget, owned by the
InferenceService so that deleting it cleans them up; first the model cache claim the
pods mount (created once, never applied) and the ResourceClaimTemplate made for the user
(reconcilers/devices/managed.py), whose older versions are deleted once no pod of the
service uses them. An object of the same name that the service does not own is never
taken over: `Applied.conflict` says so. A change of the Deployment's pod template
passes spec.rolloutPolicy first (rollout.py), which may hold it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from api import InferenceServiceSpec, ModelSpec
from api import conditions as c
from controller.resources import DEPLOYMENT, POD, RESOURCE_CLAIM_TEMPLATE, SERVICE, object_key
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.devices.kueue import label_workload
from reconcilers.devices.lookup import managed_templates
from reconcilers.inferenceservice.autoscaling import ensure_autoscaler
from reconcilers.inferenceservice.disruption import ensure_budget, protected
from reconcilers.inferenceservice.plan import CLAIMED_ANNOTATION, Plan
from reconcilers.inferenceservice.pods import owned_pods, pod_ready, service_pods, unschedulable
from reconcilers.inferenceservice.rollout import (
    RUNTIME_ANNOTATION,
    Gate,
    gate,
    note_runtime,
    previous_condition,
    record_template,
    unheld,
)
from reconcilers.inferenceservice.scope import Scope
from reconcilers.inferenceservice.workload import (
    build_deployment,
    build_member_pods,
    build_members_service,
    build_service,
)
from reconcilers.pod_security import restricted_namespace
from reconcilers.sources.cache_claim import ClaimMaker
from reconcilers.writes.apply import NotOwned, ensure, owned_by, replace_pod_if_changed
from reconcilers.writes.conditions import Condition

# Annotations that describe the pod template: kept as the live Deployment has them while
# a template change is held.
DESCRIBING = (CLAIMED_ANNOTATION, RUNTIME_ANNOTATION)


@dataclass(frozen=True)
class Applied:
    ready: int = 0  # replicas ready (multiNode: the group, 0 or 1)
    running: int = 0
    pending: str = ""  # the scheduler's word on a pending pod
    conflict: str | None = None  # an object in the way that the service does not own
    rollout: Gate = field(default_factory=Gate)  # what spec.rolloutPolicy decided


async def apply(
    ctx: Context,
    isvc: Obj,
    service: InferenceServiceSpec,
    model: ModelSpec,
    plan: Plan,
    claims: ClaimMaker,
    now: float,
) -> Applied:
    """now: wall-clock seconds (a held rollout's timeout runs on them)."""
    uid = isvc["metadata"]["uid"]
    try:
        # The cache claim first: the pods mount it (create only; never changed).
        await claims.ensure(ctx, isvc, plan.store)
        if plan.managed is not None:  # the pods' claims are made from it
            await ensure(ctx.client, ctx.cache, RESOURCE_CLAIM_TEMPLATE, plan.managed.template, uid)
        if service.multi_node is not None:
            applied = await _members(ctx, isvc, service, model, plan)
        else:
            applied = await _deployment(ctx, isvc, service, model, plan, now)
        await ensure(
            ctx.client,
            ctx.cache,
            SERVICE,
            build_service(isvc, service),
            uid,
            keep=("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"),
        )
        if service.multi_node is not None:
            await ensure(
                ctx.client,
                ctx.cache,
                SERVICE,
                build_members_service(isvc, service),
                uid,
                keep=("clusterIPs", "ipFamilies", "ipFamilyPolicy"),
            )
        await ensure_autoscaler(ctx.client, ctx.cache, isvc, service)
        group = plan.admitted if service.multi_node is None else min(plan.admitted, 1)
        await ensure_budget(
            ctx.client, ctx.cache, isvc, service, protected(service, applied.ready, group)
        )
    except NotOwned as e:
        return Applied(conflict=str(e))
    await remove_unused_templates(ctx, isvc, plan)
    return applied


async def remove_unused_templates(ctx: Context, isvc: Obj, plan: Plan) -> None:
    """Delete the service's managed templates other than the plan's that no pod of the
    service names any more (a changed Model's old template, once its pods are gone)."""
    ns, _ = object_key(isvc)
    current = plan.managed.name if plan.managed is not None else None
    stale = [
        t["metadata"]["name"]
        for t in managed_templates(ctx.cache, ns, isvc["metadata"]["uid"])
        if t["metadata"]["name"] != current
    ]
    if not stale:
        return
    named = {
        ref.get("resourceClaimTemplateName")
        for pod in service_pods(ctx.cache, isvc)
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []
    }
    for name in stale:
        if name not in named:
            await ctx.client.delete(RESOURCE_CLAIM_TEMPLATE, ns, name)


def scope_of(
    ctx: Context, isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, plan: Plan
) -> Scope:
    """What the builders get: the plan's decisions and the operator's pod settings."""
    return Scope(
        isvc,
        service,
        model,
        plan.placement,
        plan.command,
        plan.claimed,
        fs_group=ctx.settings.default_fs_group,
        restricted=restricted_namespace(ctx.cache, isvc["metadata"]["namespace"]),
        hub=ctx.settings.hf_endpoint,
        images=ctx.settings.runtime_images,
    )


async def _deployment(
    ctx: Context,
    isvc: Obj,
    service: InferenceServiceSpec,
    model: ModelSpec,
    plan: Plan,
    now: float,
) -> Applied:
    desired = build_deployment(scope_of(ctx, isvc, service, model, plan), plan.admitted)
    if plan.claimed is not None:
        annotations = desired["metadata"].setdefault("annotations", {})
        annotations[CLAIMED_ANNOTATION] = str(plan.claimed)
    if plan.queue is not None:
        label_workload(desired, plan.queue)
    note_runtime(desired, service.runtime)
    if service.fields.rollout.wait_for_idle:
        # Only a policy that holds changes reads the record: without one, its encoding
        # (zlib over the whole template) and its kilobytes on every write are saved.
        record_template(desired, service.runtime)
    ns, name = object_key(isvc)
    uid = isvc["metadata"]["uid"]
    current = ctx.cache.get(DEPLOYMENT, ns, name)
    if current is not None and not owned_by(current, uid):
        raise NotOwned(DEPLOYMENT, name)
    status = ctx.status.current(isvc)
    decided, wanted = await gate(
        ctx.cache, isvc, service, desired, current, now, status, DESCRIBING
    )
    if wanted is None and current is not None:
        live = current  # held, and the template it runs is not known: left as it is
    else:
        live = await ensure(ctx.client, ctx.cache, DEPLOYMENT, wanted or desired, uid)
    status = live.get("status") or {}
    ready = int(status.get("readyReplicas") or 0)
    running = int(status.get("replicas") or 0)
    return Applied(ready, running, unschedulable(ctx.cache, isvc), rollout=decided)


async def _members(
    ctx: Context, isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, plan: Plan
) -> Applied:
    admitted = plan.admitted
    ns, _ = object_key(isvc)
    uid = isvc["metadata"]["uid"]
    pods = build_member_pods(scope_of(ctx, isvc, service, model, plan), min(admitted, 1))
    wanted = {p["metadata"]["name"] for p in pods}
    ready = 0
    for pod in pods:
        live = await replace_pod_if_changed(ctx.client, ctx.cache, POD, pod, uid)
        ready += live is not None and pod_ready(live)
    # Members past the member list (members removed, or scaled to zero) are ours to remove.
    for live in owned_pods(ctx.cache, isvc):
        if live["metadata"]["name"] not in wanted:
            await ctx.client.delete(POD, ns, live["metadata"]["name"])
    group = 1 if pods else 0
    return Applied(
        group if ready == len(pods) else 0,
        group,
        unschedulable(ctx.cache, isvc),
        rollout=_members_rollout(ctx.status.current(isvc), service),
    )


def _members_rollout(status: Obj, service: InferenceServiceSpec) -> Gate:
    """multiNode member pods are replaced without an idle check: the condition says so."""
    policy = service.fields.rollout
    if not policy.holds:
        return Gate(False, unheld(previous_condition(status), policy))
    message = (
        "spec.multiNode: member pods are replaced without an idle check (rolloutPolicy "
        "holds a Deployment's pod template)"
    )
    return Gate(False, Condition(c.ROLLOUT_DEFERRED, False, c.IDLE_CHECK_UNSUPPORTED, message))
