"""InferenceService reconciler: builds and keeps the serving workload.

Model resolved and valid, its claims present, GPUQuota admitting replicas: then a
Deployment (or, for multiNode, one pinned Pod per node) and a Service, owned by the
InferenceService so that deleting it cleans them up. When any step fails, the
existing workload is left as it is and a condition says why; nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog

from controller.informer import Event
from controller.reconcile import Request, Result, Watch
from controller.resources import (
    DEPLOYMENT,
    GPU_QUOTA,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    SERVICE,
    ResourceType,
    object_key,
)

from .advice import advisories
from .apply import NotOwned, ensure, replace_pod_if_changed
from .claims import missing_claims, names_claim
from .conditions import Condition
from .context import Context
from .gpu import attachment_kind, replica_charge
from .quota import namespace_allocations
from .runtimes import PORTS
from .spec import InferenceServiceSpec, InvalidSpec, ModelSpec, parse_inference_service, parse_model
from .workload import (
    MANAGED_BY,
    MANAGER,
    SERVICE_LABEL,
    build_deployment,
    build_member_pods,
    build_service,
)

Obj = dict[str, Any]
MODEL_RESOLVED = "ModelResolved"
QUOTA_ADMITTED = "QuotaAdmitted"
WORKLOAD_READY = "WorkloadReady"
READY = "Ready"
OWNED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
NOT_OWNED_RECHECK = 60.0
log = structlog.get_logger("inferenceservice")


def _model_ref(isvc: Obj) -> Any:
    return (isvc.get("spec") or {}).get("modelRef")


class InferenceServiceReconciler:
    name = "inferenceservice"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def primary(self) -> ResourceType:
        return INFERENCE_SERVICE

    def watches(self) -> list[Watch]:
        return [
            Watch(INFERENCE_SERVICE, self._itself_and_quota_peers),
            Watch(MODEL, self._using_model),
            Watch(GPU_QUOTA, self._all_in_namespace),
            Watch(RESOURCE_CLAIM, lambda e: self._using_claim(e, "resourceClaimName")),
            Watch(
                RESOURCE_CLAIM_TEMPLATE, lambda e: self._using_claim(e, "resourceClaimTemplateName")
            ),
            Watch(DEPLOYMENT, self._owner, OWNED_SELECTOR),
            Watch(SERVICE, self._owner, OWNED_SELECTOR),
            Watch(POD, self._pod_owner, OWNED_SELECTOR),
        ]

    # -- event mapping ------------------------------------------------------------

    def _request(self, ns: str, name: str) -> Request:
        return Request(self.name, ns, name)

    def _itself_and_quota_peers(self, event: Event) -> Iterable[Request]:
        ns, name = object_key(event.obj)
        yield self._request(ns, name)
        # Under a quota, one service's change moves what the others are admitted.
        if self.ctx.cache.list(GPU_QUOTA, ns):
            for other in self.ctx.cache.list(INFERENCE_SERVICE, ns):
                if other["metadata"]["name"] != name:
                    yield self._request(ns, other["metadata"]["name"])

    def _all_in_namespace(self, event: Event) -> Iterable[Request]:
        ns, _ = object_key(event.obj)
        for isvc in self.ctx.cache.list(INFERENCE_SERVICE, ns):
            yield self._request(ns, isvc["metadata"]["name"])

    def _using_model(self, event: Event) -> Iterable[Request]:
        ns, model_name = object_key(event.obj)
        for isvc in self.ctx.cache.list(INFERENCE_SERVICE, ns):
            if _model_ref(isvc) == model_name:
                yield self._request(ns, isvc["metadata"]["name"])

    def _using_claim(self, event: Event, field: str) -> Iterable[Request]:
        ns, claim = object_key(event.obj)
        models = {
            m["metadata"]["name"]
            for m in self.ctx.cache.list(MODEL, ns)
            if names_claim(m, field, claim)
        }
        for isvc in self.ctx.cache.list(INFERENCE_SERVICE, ns):
            if _model_ref(isvc) in models:
                yield self._request(ns, isvc["metadata"]["name"])

    def _owner(self, event: Event) -> Iterable[Request]:
        ns, _ = object_key(event.obj)
        for ref in event.obj.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("kind") == INFERENCE_SERVICE.kind and ref.get("controller"):
                yield self._request(ns, ref["name"])

    def _pod_owner(self, event: Event) -> Iterable[Request]:
        ns, _ = object_key(event.obj)
        name = (event.obj.get("metadata", {}).get("labels") or {}).get(SERVICE_LABEL)
        if name:
            yield self._request(ns, name)

    # -- reconcile ------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        isvc = self.ctx.cache.get(INFERENCE_SERVICE, request.namespace, request.name)
        if isvc is None:
            return Result()
        try:
            service = parse_inference_service(isvc.get("spec"))
        except InvalidSpec as e:
            await self._blocked(isvc, "InvalidSpec", "; ".join(e.errors), phase="Failed")
            return Result()
        model_obj = self.ctx.cache.get(MODEL, request.namespace, service.model_ref)
        if model_obj is None:
            await self._blocked(
                isvc,
                "ModelNotFound",
                f"Model {service.model_ref!r} not found in namespace {request.namespace}",
            )
            return Result()
        try:
            model = parse_model(model_obj.get("spec"))
        except InvalidSpec as e:
            await self._blocked(
                isvc,
                "ModelInvalid",
                f"Model {service.model_ref!r} is invalid: {'; '.join(e.errors)}",
                phase="Failed",
            )
            return Result()
        missing = missing_claims(self.ctx.cache, request.namespace, model)
        if missing:
            await self._blocked(
                isvc,
                "AcceleratorNotReady",
                f"Model {service.model_ref!r} names claims not found in "
                f"namespace {request.namespace}: {', '.join(missing)}",
            )
            return Result()
        return await self._serve(isvc, service, model)

    async def _blocked(self, isvc: Obj, reason: str, message: str, phase: str = "Pending") -> None:
        """The Model side is not ready: say so, and leave any running workload alone."""
        await self.ctx.status.write(
            INFERENCE_SERVICE,
            isvc,
            {"phase": phase},
            [
                Condition(MODEL_RESOLVED, False, reason, message),
                Condition(READY, False, reason, message),
            ],
        )

    async def _serve(self, isvc: Obj, service: InferenceServiceSpec, model: ModelSpec) -> Result:
        ns, name = object_key(isvc)
        limit, allocations = namespace_allocations(self.ctx.cache, ns)
        allocation = allocations.get(name)
        admitted = allocation.admitted_replicas if allocation else service.replicas
        per_replica = replica_charge(model, service)
        conditions = [
            Condition(
                MODEL_RESOLVED,
                True,
                "Resolved",
                f"Model {service.model_ref!r} is valid and its accelerator is ready",
            )
        ]
        if limit is None:
            conditions.append(
                Condition(QUOTA_ADMITTED, True, "NoQuota", "no GPUQuota in this namespace")
            )
        elif admitted < service.replicas:
            conditions.append(
                Condition(
                    QUOTA_ADMITTED,
                    False,
                    "QuotaExceeded",
                    f"GPUQuota limit {limit} GPUs: {admitted} of {service.replicas} replicas "
                    f"admitted at {per_replica} GPU(s) each",
                )
            )
        else:
            conditions.append(
                Condition(
                    QUOTA_ADMITTED,
                    True,
                    "WithinQuota",
                    f"{service.replicas} replica(s) at {per_replica} GPU(s) each within the "
                    f"GPUQuota limit of {limit}",
                )
            )
        conditions += advisories(isvc, service, model)
        uid = isvc["metadata"]["uid"]
        model_name = service.model_ref
        try:
            if model.multi_node:
                ready, pending = await self._ensure_members(isvc, service, model, admitted)
            else:
                ready, pending = await self._ensure_deployment(isvc, service, model, admitted)
            await ensure(
                self.ctx.client,
                self.ctx.cache,
                SERVICE,
                build_service(isvc, model_name, PORTS[service.runtime]),
                uid,
                keep=("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"),
            )
        except NotOwned as e:
            conditions += [
                Condition(WORKLOAD_READY, False, "WorkloadConflict", str(e)),
                Condition(READY, False, "WorkloadConflict", str(e)),
            ]
            await self._write(isvc, service, model, admitted, 0, conditions, "Failed")
            return Result(requeue_after=NOT_OWNED_RECHECK)
        wanted = admitted if not model.multi_node else admitted and 1
        if wanted == 0:
            reason = "ScaledToZero" if service.replicas == 0 else "QuotaExceeded"
            conditions += [
                Condition(WORKLOAD_READY, False, reason, "no replicas admitted"),
                Condition(READY, False, reason, "no replicas are running"),
            ]
            phase = "Idle" if service.replicas == 0 else "Pending"
        elif ready >= wanted:
            message = f"{ready}/{wanted} replicas ready"
            conditions += [
                Condition(WORKLOAD_READY, True, "Available", message),
                Condition(READY, True, "Serving", message),
            ]
            phase = "Ready"
        else:
            message = f"{ready}/{wanted} replicas ready" + (f"; {pending}" if pending else "")
            reason = "Unschedulable" if pending else "Progressing"
            conditions += [
                Condition(WORKLOAD_READY, False, reason, message),
                Condition(READY, False, reason, message),
            ]
            phase = "Progressing"
        await self._write(isvc, service, model, admitted, ready, conditions, phase)
        return Result()

    async def _ensure_deployment(
        self, isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, replicas: int
    ) -> tuple[int, str]:
        desired = build_deployment(isvc, service, model, service.model_ref, replicas)
        live = await ensure(
            self.ctx.client, self.ctx.cache, DEPLOYMENT, desired, isvc["metadata"]["uid"]
        )
        ready = int((live.get("status") or {}).get("readyReplicas") or 0)
        return ready, self._unschedulable(isvc)

    async def _ensure_members(
        self, isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, admitted: int
    ) -> tuple[int, str]:
        ns, _ = object_key(isvc)
        uid = isvc["metadata"]["uid"]
        pods = build_member_pods(isvc, service, model, service.model_ref, min(admitted, 1))
        wanted = {p["metadata"]["name"] for p in pods}
        ready = 0
        for pod in pods:
            live = await replace_pod_if_changed(self.ctx.client, self.ctx.cache, POD, pod, uid)
            ready += live is not None and _pod_ready(live)
        # Members past the node list (nodes removed, or scaled to zero) are ours to remove.
        for live in self._owned_pods(isvc):
            if live["metadata"]["name"] not in wanted:
                await self.ctx.client.delete(POD, ns, live["metadata"]["name"])
        return (1 if pods and ready == len(pods) else 0), self._unschedulable(isvc)

    def _owned_pods(self, isvc: Obj) -> list[Obj]:
        ns, name = object_key(isvc)
        uid = isvc["metadata"]["uid"]
        return [
            p
            for p in self.ctx.cache.list(POD, ns)
            if (p["metadata"].get("labels") or {}).get(SERVICE_LABEL) == name
            and any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
        ]

    def _unschedulable(self, isvc: Obj) -> str:
        """The scheduler's word on a pending pod, e.g. Insufficient nvidia.com/gpu."""
        ns, name = object_key(isvc)
        for pod in self.ctx.cache.list(POD, ns):
            if (pod["metadata"].get("labels") or {}).get(SERVICE_LABEL) != name:
                continue
            for c in (pod.get("status") or {}).get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("status") == "False":
                    return f"pod {pod['metadata']['name']} unschedulable: {c.get('message', '')}"
        return ""

    async def _write(
        self,
        isvc: Obj,
        service: InferenceServiceSpec,
        model: ModelSpec,
        admitted: int,
        ready: int,
        conditions: list[Condition],
        phase: str,
    ) -> None:
        ns, name = object_key(isvc)
        port = PORTS[service.runtime]
        fields = {
            "phase": phase,
            "model": service.model_ref,
            "runtime": service.runtime,
            "replicas": service.replicas,
            "admittedReplicas": admitted,
            "readyReplicas": ready,
            "gpusPerReplica": replica_charge(model, service),
            "gpuAttachment": attachment_kind(model),
            "endpoint": f"http://{name}.{ns}.svc.cluster.local:{port}/v1",
        }
        await self.ctx.status.write(INFERENCE_SERVICE, isvc, fields, conditions)


def _pod_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )
