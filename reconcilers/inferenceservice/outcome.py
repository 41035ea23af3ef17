"""An InferenceService's status: what the plan decided and what the apply found.

Written through the status writer (reconcilers/writes/status.py), which sends an Event on
each condition transition. A reconcile that is blocked or refused leaves a running
workload as it is, and its status keeps describing that workload.
"""

from __future__ import annotations

from api import InferenceServiceSpec, ModelSpec
from api import conditions as c
from controller.cache import Cache
from controller.resources import INFERENCE_SERVICE, object_key
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.devices.lookup import allocation_status
from reconcilers.inferenceservice.device_taints import eviction_conditions
from reconcilers.inferenceservice.ensure import Applied
from reconcilers.inferenceservice.integrations import Integration
from reconcilers.inferenceservice.plan import Plan
from reconcilers.inferenceservice.pods import (
    has_workload,
    live_pods,
    runtime_restarts,
    service_pods,
)
from reconcilers.inferenceservice.workload import CONTAINER
from reconcilers.ownership import selector
from reconcilers.writes.conditions import Condition
from runtimes.gpu import attachment_kind

# Status keys of a running workload, kept while a reconcile is blocked (it leaves the
# workload as it is).
WORKLOAD_STATUS_KEYS = (
    "replicas",
    "readyReplicas",
    "admittedReplicas",
    "desiredReplicas",
    "allocation",
    "managedClaims",
    "gpusPerReplica",
    "gpuAttachment",
    "endpoint",
    "model",
    "runtime",
    "mode",
    "gateway",
)


def kept_status(cache: Cache, isvc: Obj) -> Obj:
    """What status says of a workload that a blocked reconcile leaves running.

    The status writer drops the keys it is not given; without these a GPUQuota
    would stop charging the running pods' devices and `kubectl scale` would lose
    its selector.
    """
    kept: Obj = {"selector": selector(isvc)}
    if has_workload(cache, isvc):
        status = isvc.get("status") or {}
        kept.update({k: status[k] for k in WORKLOAD_STATUS_KEYS if k in status})
    return kept


async def write_blocked(
    ctx: Context, isvc: Obj, reason: str, message: str, phase: str = "Pending"
) -> None:
    """The Model side is not ready: say so, and leave any running workload alone."""
    await ctx.status.write(
        INFERENCE_SERVICE,
        isvc,
        {**kept_status(ctx.cache, isvc), "phase": phase, "modelReady": False},
        [
            Condition(c.MODEL_RESOLVED, False, reason, message),
            Condition(c.READY, False, reason, message),
        ],
    )


async def write_refused(ctx: Context, isvc: Obj, plan: Plan) -> None:
    """The runtime could not serve: nothing was written, a running workload is left."""
    fields = {**kept_status(ctx.cache, isvc), "phase": "Failed"}
    await ctx.status.write(INFERENCE_SERVICE, isvc, fields, list(plan.conditions))


def outcome(
    service: InferenceServiceSpec, plan: Plan, applied: Applied, restarted: str = ""
) -> tuple[str, list[Condition]]:
    """The phase, and WorkloadReady / Ready, from the replicas the apply found;
    `restarted` says how the runtime's restarts ended, for a service not Ready."""
    if applied.conflict is not None:
        return "Failed", [
            Condition(c.WORKLOAD_READY, False, c.WORKLOAD_CONFLICT, applied.conflict),
            Condition(c.READY, False, c.WORKLOAD_CONFLICT, applied.conflict),
        ]
    ready, pending = applied.ready, applied.pending
    wanted = plan.admitted if service.multi_node is None else plan.admitted and 1
    if wanted == 0:
        if service.suspend:
            reason, phase = c.SUSPENDED, "Suspended"
        elif service.replicas == 0:
            reason, phase = c.SCALED_TO_ZERO, "Stopped"
        else:
            reason, phase = c.QUOTA_EXCEEDED, "Pending"
        return phase, [
            Condition(c.WORKLOAD_READY, False, reason, "no replicas admitted"),
            Condition(c.READY, False, reason, "no replicas are running"),
        ]
    if ready >= wanted:
        message = f"{ready}/{wanted} replicas ready"
        return "Ready", [
            Condition(c.WORKLOAD_READY, True, c.AVAILABLE, message),
            Condition(c.READY, True, c.SERVING, message),
        ]
    message = f"{ready}/{wanted} replicas ready" + (f"; {pending}" if pending else "")
    if pending and plan.shortfalls:  # the scheduler does not say which selector fails
        message += "; " + "; ".join(plan.shortfalls)
    if restarted:
        message += f"; {restarted}"
    reason = c.UNSCHEDULABLE if pending else c.PROGRESSING
    gpu = plan.per_replica or plan.demand is not None  # claims without count hold GPUs too
    return "WaitingForGPU" if pending and gpu else "Progressing", [
        Condition(c.WORKLOAD_READY, False, reason, message),
        Condition(c.READY, False, reason, message),
    ]


async def write_served(
    ctx: Context,
    isvc: Obj,
    service: InferenceServiceSpec,
    model: ModelSpec,
    plan: Plan,
    applied: Applied,
    integrations: tuple[Integration, ...] = (),
) -> None:
    """`integrations`: what spec.slo and spec.endpoint.gateway add (integrations.py)."""
    ns, name = object_key(isvc)
    pods = live_pods(service_pods(ctx.cache, isvc))
    restarts, ended = runtime_restarts(pods, CONTAINER)
    restarted = f"the runtime restarted {restarts} time(s), last: {ended}" if ended else ""
    phase, workload = outcome(service, plan, applied, restarted)
    extra: Obj = {}
    if plan.kueue is not None:
        extra["kueue"] = plan.kueue
    if plan.managed is not None:
        extra["managedClaims"] = {
            "template": plan.managed.name,
            "deviceClass": plan.managed.device_class,
            "count": plan.managed.count,
            "selectors": list(plan.managed.selectors),
            "sharing": plan.managed.sharing,
            **({"memory": plan.managed.memory} if plan.managed.memory else {}),
            **({"memoryFraction": plan.managed.fraction} if plan.managed.fraction else {}),
        }
    if plan.demand is not None and applied.conflict is None:
        # What DRA allocated to the live pods (finished and terminating ones hold none).
        extra["allocation"] = allocation_status(
            ctx.cache,
            pods,
            plan.demand.total,
            (isvc.get("status") or {}).get("allocation"),
        )
    running = 0 if applied.conflict is not None else applied.running
    fields = {
        "phase": phase,
        "mode": service.mode,
        "modelReady": True,
        "model": service.model_ref,
        "runtime": service.runtime,
        "desiredReplicas": service.wanted_replicas,
        "replicas": running,
        "selector": selector(isvc),
        "admittedReplicas": plan.admitted,
        "readyReplicas": applied.ready,
        "restarts": restarts,
        # The GPUQuota's charge when one accounts for the service, else the guide's.
        "gpusPerReplica": plan.per_replica,
        "gpuAttachment": attachment_kind(model, service),
        "endpoint": (
            f"http://{name}.{ns}.svc.cluster.local:{service.endpoint.port}{service.endpoint_path}"
        ),
        **extra,
    }
    added = [cond for i in integrations for cond in i.conditions]
    for i in integrations:
        fields.update(i.status)
    cleared = tuple(t for i in integrations for t in i.cleared)
    if plan.demand is not None:
        workload, untold = await eviction_conditions(ctx, isvc, model, workload, plan.rule_taints)
        cleared += untold
    rollout = [applied.rollout.condition] if applied.rollout.condition is not None else []
    conditions = [*plan.conditions, *workload, *rollout, *added]
    await ctx.status.write(INFERENCE_SERVICE, isvc, fields, conditions, cleared)
