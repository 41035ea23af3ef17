"""InferenceService reconciler: builds and keeps the serving workload.

Model resolved and valid, its claims present, GPUQuota admitting replicas: then a
Deployment (or, for multiNode, one pinned Pod per node) and a Service, owned by the
InferenceService so that deleting it cleans them up. When any step fails, the
existing workload is left as it is and a condition says why; nothing is deleted.

DRA: without a GPU count the runtime is sized from the devices the Model's claims ask
for (DeviceCount says so, or says both numbers when count disagrees); what DRA
allocated to the pods' claims is `status.allocation`; a Kueue-labelled service gets
the Kueue path (reconcilers/kueue.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import structlog

from api import (
    InferenceServiceSpec,
    InvalidSpec,
    ModelSpec,
    gpu_count,
    parse_inference_service,
    parse_model,
    rule_errors,
)
from api import conditions as c
from api.source import host_path_error
from controller.informer import Event
from controller.reconcile import Request, Result, Watch
from controller.resources import (
    DEPLOYMENT,
    DEVICE_CLASS,
    GPU_QUOTA,
    HORIZONTAL_POD_AUTOSCALER,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    POD_DISRUPTION_BUDGET,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    SERVICE,
    ResourceType,
    object_key,
)

from . import dra
from .advice import advisories
from .apply import NotOwned, ensure, replace_pod_if_changed
from .autoscaling import ensure_autoscaler
from .claims import missing_claims, names_claim
from .conditions import Condition
from .context import Context
from .devices import allocation_status, device_classes, model_demand, templates
from .disruption import ensure_budget, protected
from .gpu import DEFAULT_RESOURCE_NAMES, attachment_kind, replica_charge
from .kueue import KueueSettings, kueue_status, label_workload, queue_name
from .loader import Store
from .model_cache import ClaimMaker, store_for
from .pod_lifetime import recycle_expired
from .quota import admission_changes, namespace_allocations
from .runtime_checks import Problem, runtime_problems
from .runtimes import RuntimeCommand, runtime_command
from .workload import (
    MANAGED_BY,
    MANAGER,
    SERVICE_LABEL,
    build_deployment,
    build_member_pods,
    build_members_service,
    build_service,
    model_location,
    selector,
)

Obj = dict[str, Any]
MODEL_RESOLVED = c.MODEL_RESOLVED
QUOTA_ADMITTED = c.QUOTA_ADMITTED
WORKLOAD_READY = c.WORKLOAD_READY
READY = c.READY
OWNED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
# Status keys of a running workload, kept while a reconcile is blocked (it leaves the
# workload as it is).
WORKLOAD_STATUS_KEYS = (
    "replicas",
    "readyReplicas",
    "admittedReplicas",
    "desiredReplicas",
    "allocation",
    "gpusPerReplica",
    "gpuAttachment",
    "endpoint",
    "model",
    "runtime",
    "mode",
)
NOT_OWNED_RECHECK = 60.0
# The devices per pod a Deployment's runtime was sized for from the claims (count absent).
CLAIMED_ANNOTATION = "inference.llmkube.dev/claimed-devices"
log = structlog.get_logger("inferenceservice")


def _model_ref(isvc: Obj) -> Any:
    return (isvc.get("spec") or {}).get("modelRef")


class InferenceServiceReconciler:
    name = "inferenceservice"

    def __init__(self, ctx: Context, kueue: KueueSettings | None = None) -> None:
        self.ctx = ctx
        self.kueue = kueue or KueueSettings()
        self.claims = ClaimMaker()

    @property
    def primary(self) -> ResourceType:
        return INFERENCE_SERVICE

    def watches(self) -> list[Watch]:
        return [
            Watch(INFERENCE_SERVICE, self._itself),
            # Every event, status too (DRA allocation moves the charge): the services whose
            # quota admission it changed.
            Watch(INFERENCE_SERVICE, self._quota_peers, predicates=()),
            Watch(MODEL, self._using_model),
            Watch(MODEL, self._quota_peers),
            Watch(GPU_QUOTA, self._quota_peers),
            Watch(RESOURCE_CLAIM, lambda e: self._using_claim(e, "resourceClaimName")),
            Watch(
                RESOURCE_CLAIM_TEMPLATE, lambda e: self._using_claim(e, "resourceClaimTemplateName")
            ),
            Watch(DEPLOYMENT, self._owner, OWNED_SELECTOR),
            Watch(SERVICE, self._owner, OWNED_SELECTOR),
            Watch(HORIZONTAL_POD_AUTOSCALER, self._owner, OWNED_SELECTOR),
            Watch(POD_DISRUPTION_BUDGET, self._owner, OWNED_SELECTOR),
            Watch(POD, self._pod_owner, OWNED_SELECTOR),
            # KEP-5004 and Kueue's verdict read DeviceClasses (cluster-wide, rarely changed).
            Watch(DEVICE_CLASS, self._all_services),
        ]

    # -- event mapping ------------------------------------------------------------

    def _request(self, ns: str, name: str) -> Request:
        return Request(self.name, ns, name)

    def _itself(self, event: Event) -> Iterable[Request]:
        yield self._request(*object_key(event.obj))

    def _quota_peers(self, event: Event) -> Iterable[Request]:
        """Under a GPUQuota, the services whose admitted replicas (or charge) moved."""
        for ns, name in admission_changes(self.ctx.cache, event):
            yield self._request(ns, name)

    def _using_model(self, event: Event) -> Iterable[Request]:
        ns, model_name = object_key(event.obj)
        for isvc in self.ctx.cache.list(INFERENCE_SERVICE, ns):
            if _model_ref(isvc) == model_name:
                yield self._request(ns, isvc["metadata"]["name"])

    def _all_services(self, event: Event) -> Iterable[Request]:
        for isvc in self.ctx.cache.list(INFERENCE_SERVICE):
            ns, name = object_key(isvc)
            yield self._request(ns, name)

    def _using_claim(self, event: Event, field: str) -> Iterable[Request]:
        ns, claim = object_key(event.obj)
        # A claim made from a template for one of our pods: its allocation is our status.
        for ref in event.obj.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("kind") == "Pod":
                pod = self.ctx.cache.get(POD, ns, str(ref.get("name")))
                owner = ((pod or {}).get("metadata", {}).get("labels") or {}).get(SERVICE_LABEL)
                if owner:
                    yield self._request(ns, owner)
                return
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
            await self._blocked(isvc, c.INVALID_SPEC, "; ".join(e.errors), phase="Failed")
            return Result()
        if not service.served:
            await self._blocked(
                isvc,
                c.RUNTIME_NOT_SUPPORTED,
                f"spec.runtime: {service.runtime!r} is valid in LLMKube's API but llmkube-py "
                "serves only vllm, sglang, tgi and llamacpp",
                phase="Failed",
            )
            return Result()
        model_obj = self.ctx.cache.get(MODEL, request.namespace, service.model_ref)
        if model_obj is None:
            await self._blocked(
                isvc,
                c.MODEL_NOT_FOUND,
                f"Model {service.model_ref!r} not found in namespace {request.namespace}",
            )
            return Result()
        try:
            model = parse_model(model_obj.get("spec"))
        except InvalidSpec as e:
            await self._blocked(
                isvc,
                c.MODEL_INVALID,
                f"Model {service.model_ref!r} is invalid: {'; '.join(e.errors)}",
                phase="Failed",
            )
            return Result()
        errors = rule_errors(service, model)
        if errors:
            await self._blocked(isvc, c.INVALID_SPEC, "; ".join(errors), phase="Failed")
            return Result()
        refusal = host_path_error(model.location, self.ctx.allowed_host_path_roots)
        if refusal:
            await self._blocked(
                isvc, c.SOURCE_NOT_ALLOWED, f"Model {service.model_ref!r} {refusal}", phase="Failed"
            )
            return Result()
        missing = missing_claims(self.ctx.cache, request.namespace, model)
        if missing and not self._has_workload(isvc):
            await self._blocked(
                isvc,
                c.ACCELERATOR_NOT_READY,
                f"Model {service.model_ref!r} names claims not found in "
                f"namespace {request.namespace}: {', '.join(missing)}",
            )
            return Result()
        return await self._serve(isvc, service, model, missing)

    def _has_workload(self, isvc: Obj) -> bool:
        """Is a workload of ours already running? Then a vanished claim does not stop it."""
        ns, name = object_key(isvc)
        uid = isvc["metadata"]["uid"]
        live = self.ctx.cache.get(DEPLOYMENT, ns, name)
        owned = live is not None and any(
            r.get("uid") == uid for r in live["metadata"].get("ownerReferences") or []
        )
        return owned or bool(self._owned_pods(isvc))

    def _kept_status(self, isvc: Obj) -> Obj:
        """What status says of a workload that a blocked reconcile leaves running.

        The status writer drops the keys it is not given; without these a GPUQuota
        would stop charging the running pods' devices and `kubectl scale` would lose
        its selector.
        """
        kept: Obj = {"selector": selector(isvc)}
        if self._has_workload(isvc):
            status = isvc.get("status") or {}
            kept.update({k: status[k] for k in WORKLOAD_STATUS_KEYS if k in status})
        return kept

    async def _blocked(self, isvc: Obj, reason: str, message: str, phase: str = "Pending") -> None:
        """The Model side is not ready: say so, and leave any running workload alone."""
        await self.ctx.status.write(
            INFERENCE_SERVICE,
            isvc,
            {**self._kept_status(isvc), "phase": phase, "modelReady": False},
            [
                Condition(MODEL_RESOLVED, False, reason, message),
                Condition(READY, False, reason, message),
            ],
        )

    def _quota_condition(
        self, service: InferenceServiceSpec, limit: int | None, admitted: int, per_replica: int
    ) -> Condition:
        wanted = service.wanted_replicas
        if limit is None:
            return Condition(QUOTA_ADMITTED, True, c.NO_QUOTA, "no GPUQuota covers this service")
        if admitted < wanted:
            return Condition(
                QUOTA_ADMITTED,
                False,
                c.QUOTA_EXCEEDED,
                f"GPUQuota limit {limit} GPUs: {admitted} of {wanted} replicas "
                f"admitted at {per_replica} GPU(s) each",
            )
        return Condition(
            QUOTA_ADMITTED,
            True,
            c.WITHIN_QUOTA,
            f"{wanted} replica(s) at {per_replica} GPU(s) each within the "
            f"GPUQuota limit of {limit}",
        )

    async def _serve(
        self, isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, missing: list[str]
    ) -> Result:
        ns, name = object_key(isvc)
        nq = namespace_allocations(self.ctx.cache, ns)
        allocation = nq.allocations.get(name)
        admitted = allocation.admitted_replicas if allocation else service.wanted_replicas
        # Under a quota, what it charges (DRA's allocation may differ from the count).
        per_replica = allocation.gpus_per_replica if allocation else replica_charge(model, service)
        demand = model_demand(self.ctx.cache, ns, model) if model.uses_claims else None
        classes = device_classes(self.ctx.cache)
        extended_class = dra.extended_resource_class(
            classes, DEFAULT_RESOURCE_NAMES.get(model.gpu.vendor, "nvidia.com/gpu")
        )
        # Count wins (the guide); without it the claims size the runtime.
        claimed = demand.total if demand is not None and demand.total else None
        if demand is not None and missing:
            # A claim or template vanished under running pods: keep the size they run
            # with, or the Deployment would restart them into pods that cannot start.
            demand = _kept_demand(self.ctx.cache.get(DEPLOYMENT, ns, name), demand)
            claimed = demand.total or None
        resolved = Condition(
            MODEL_RESOLVED,
            True,
            c.RESOLVED,
            f"Model {service.model_ref!r} is valid and its accelerator is ready",
        )
        # What the runtime's parser cannot see (parallelism vs the GPUs a pod gets, model
        # form, image): refused before any workload is written; a running one is left.
        # Built once: checked here, and the Deployment's pods run this same command.
        store = store_for(isvc, service, model, self.ctx.model_cache)
        placement = model_location(
            model, service.runtime, self.ctx.allowed_host_path_roots, store, service.hf_token
        )
        model_arg = placement.arg
        command = runtime_command(
            service, model, model_arg, service.model_ref, claimed, mmproj=placement.mmproj
        )
        problems = runtime_problems(service, model, model_arg, claimed, command)
        if service.multi_node is not None and extended_class and not model.uses_claims:
            problems.insert(0, _multi_node_via_dra(model, extended_class))
        if problems:
            message = "; ".join(p.message for p in problems)
            reason = problems[0].reason
            await self.ctx.status.write(
                INFERENCE_SERVICE,
                isvc,
                {**self._kept_status(isvc), "phase": "Failed"},
                [
                    resolved,
                    Condition(c.RUNTIME_CONFIGURED, False, reason, message),
                    Condition(READY, False, reason, message),
                ],
            )
            return Result()
        conditions = [
            resolved,
            Condition(
                c.RUNTIME_CONFIGURED,
                True,
                c.ARGV_VALID,
                f"{service.runtime} argv, image and model form fit the GPUs a pod gets",
            ),
            self._quota_condition(service, nq.limit_for(allocation), admitted, per_replica),
        ]
        if service.suspend:
            conditions.append(
                Condition(c.SUSPENDED, True, c.SUSPENDED, "spec.suspend: scaled to zero")
            )
        else:
            conditions.append(
                Condition(c.SUSPENDED, False, c.NOT_SUSPENDED, "spec.suspend is not set")
            )
        extra: Obj = {}
        if demand is not None:
            conditions.append(_claims_condition(service.model_ref, missing))
            conditions.append(
                _device_count_condition(gpu_count(model, service.gpu), demand, missing)
            )
        conditions += advisories(isvc, service, model, extended_class)
        queue = queue_name(isvc)
        if queue is not None:
            kueue_condition, extra["kueue"] = kueue_status(
                queue,
                model,
                [c.pod_entry() for c in model.gpu.claims],
                templates(self.ctx.cache, ns, model),
                demand or dra.DeviceDemand(),
                admitted,
                self.kueue,
                extended_class,
                multi_node=service.multi_node is not None,
            )
            conditions.append(kueue_condition)
        uid = isvc["metadata"]["uid"]
        try:
            # The cache claim first: the pods mount it (create only; never changed).
            await self.claims.ensure(self.ctx, isvc, store)
            if service.multi_node is not None:
                ready, running, pending = await self._ensure_members(
                    isvc, service, model, admitted, store
                )
            else:
                ready, running, pending = await self._ensure_deployment(
                    isvc, service, model, admitted, claimed, queue, command, store
                )
            await ensure(
                self.ctx.client,
                self.ctx.cache,
                SERVICE,
                build_service(isvc, service),
                uid,
                keep=("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"),
            )
            if service.multi_node is not None:
                await ensure(
                    self.ctx.client,
                    self.ctx.cache,
                    SERVICE,
                    build_members_service(isvc, service),
                    uid,
                    keep=("clusterIPs", "ipFamilies", "ipFamilyPolicy"),
                )
            await ensure_autoscaler(self.ctx.client, self.ctx.cache, isvc, service)
            group = admitted if service.multi_node is None else min(admitted, 1)
            await ensure_budget(
                self.ctx.client, self.ctx.cache, isvc, service, protected(service, ready, group)
            )
        except NotOwned as e:
            conditions += [
                Condition(WORKLOAD_READY, False, c.WORKLOAD_CONFLICT, str(e)),
                Condition(READY, False, c.WORKLOAD_CONFLICT, str(e)),
            ]
            await self._write(
                isvc, service, model, admitted, per_replica, (0, 0), conditions, "Failed", extra
            )
            return Result(requeue_after=NOT_OWNED_RECHECK)
        if demand is not None:
            extra["allocation"] = allocation_status(
                self.ctx.cache,
                self._service_pods(isvc),
                demand.total,
                (isvc.get("status") or {}).get("allocation"),
            )
        wanted = admitted if service.multi_node is None else admitted and 1
        if wanted == 0:
            if service.suspend:
                reason, phase = c.SUSPENDED, "Suspended"
            elif service.replicas == 0:
                reason, phase = c.SCALED_TO_ZERO, "Stopped"
            else:
                reason, phase = c.QUOTA_EXCEEDED, "Pending"
            conditions += [
                Condition(WORKLOAD_READY, False, reason, "no replicas admitted"),
                Condition(READY, False, reason, "no replicas are running"),
            ]
        elif ready >= wanted:
            message = f"{ready}/{wanted} replicas ready"
            conditions += [
                Condition(WORKLOAD_READY, True, c.AVAILABLE, message),
                Condition(READY, True, c.SERVING, message),
            ]
            phase = "Ready"
        else:
            message = f"{ready}/{wanted} replicas ready" + (f"; {pending}" if pending else "")
            reason = c.UNSCHEDULABLE if pending else c.PROGRESSING
            conditions += [
                Condition(WORKLOAD_READY, False, reason, message),
                Condition(READY, False, reason, message),
            ]
            gpu = per_replica or demand is not None  # claims without count hold GPUs too
            phase = "WaitingForGPU" if pending and gpu else "Progressing"
        await self._write(
            isvc, service, model, admitted, per_replica, (ready, running), conditions, phase, extra
        )
        return Result(requeue_after=await recycle_expired(self.ctx, isvc, service, time.time()))

    async def _ensure_deployment(
        self,
        isvc: Obj,
        service: InferenceServiceSpec,
        model: ModelSpec,
        replicas: int,
        claimed: int | None,
        queue: str | None,
        command: RuntimeCommand,
        store: Store,
    ) -> tuple[int, int, str]:
        desired = build_deployment(
            isvc,
            service,
            model,
            service.model_ref,
            replicas,
            claimed_devices=claimed,
            rt=command,
            roots=self.ctx.allowed_host_path_roots,
            store=store,
        )
        if claimed is not None:
            annotations = desired["metadata"].setdefault("annotations", {})
            annotations[CLAIMED_ANNOTATION] = str(claimed)
        if queue is not None:
            label_workload(desired, queue)
        live = await ensure(
            self.ctx.client, self.ctx.cache, DEPLOYMENT, desired, isvc["metadata"]["uid"]
        )
        status = live.get("status") or {}
        ready = int(status.get("readyReplicas") or 0)
        running = int(status.get("replicas") or 0)
        return ready, running, self._unschedulable(isvc)

    async def _ensure_members(
        self,
        isvc: Obj,
        service: InferenceServiceSpec,
        model: ModelSpec,
        admitted: int,
        store: Store,
    ) -> tuple[int, int, str]:
        ns, _ = object_key(isvc)
        uid = isvc["metadata"]["uid"]
        pods = build_member_pods(
            isvc,
            service,
            model,
            service.model_ref,
            min(admitted, 1),
            roots=self.ctx.allowed_host_path_roots,
            store=store,
        )
        wanted = {p["metadata"]["name"] for p in pods}
        ready = 0
        for pod in pods:
            live = await replace_pod_if_changed(self.ctx.client, self.ctx.cache, POD, pod, uid)
            ready += live is not None and _pod_ready(live)
        # Members past the member list (members removed, or scaled to zero) are ours to remove.
        for live in self._owned_pods(isvc):
            if live["metadata"]["name"] not in wanted:
                await self.ctx.client.delete(POD, ns, live["metadata"]["name"])
        group = 1 if pods else 0
        return (group if ready == len(pods) else 0), group, self._unschedulable(isvc)

    def _owned_pods(self, isvc: Obj) -> list[Obj]:
        ns, name = object_key(isvc)
        uid = isvc["metadata"]["uid"]
        return [
            p
            for p in self.ctx.cache.list(POD, ns)
            if (p["metadata"].get("labels") or {}).get(SERVICE_LABEL) == name
            and any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
        ]

    def _service_pods(self, isvc: Obj) -> list[Obj]:
        """The live pods of this service (our label), the Deployment's included.

        Finished (Succeeded/Failed, e.g. evicted) and terminating pods hold no devices
        the service can use: they are not counted in status.allocation.
        """
        ns, name = object_key(isvc)
        return live_pods(
            p
            for p in self.ctx.cache.list(POD, ns)
            if (p["metadata"].get("labels") or {}).get(SERVICE_LABEL) == name
        )

    def _unschedulable(self, isvc: Obj) -> str:
        """The scheduler's word on a pending pod, e.g. Insufficient nvidia.com/gpu."""
        ns, name = object_key(isvc)
        for pod in self.ctx.cache.list(POD, ns):
            if (pod["metadata"].get("labels") or {}).get(SERVICE_LABEL) != name:
                continue
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    return f"pod {pod['metadata']['name']} unschedulable: {cond.get('message', '')}"
        return ""

    async def _write(
        self,
        isvc: Obj,
        service: InferenceServiceSpec,
        model: ModelSpec,
        admitted: int,
        per_replica: int,
        pods: tuple[int, int],
        conditions: list[Condition],
        phase: str,
        extra: Obj | None = None,
    ) -> None:
        """per_replica: what one replica is charged (the GPUQuota's charge when one
        accounts for the service, which follows DRA's allocation; else the guide's)."""
        ns, name = object_key(isvc)
        ready, running = pods
        fields = {
            "phase": phase,
            "mode": service.mode,
            "modelReady": True,
            "model": service.model_ref,
            "runtime": service.runtime,
            "desiredReplicas": service.wanted_replicas,
            "replicas": running,
            "selector": selector(isvc),
            "admittedReplicas": admitted,
            "readyReplicas": ready,
            "gpusPerReplica": per_replica,
            "gpuAttachment": attachment_kind(model, service),
            "endpoint": (
                f"http://{name}.{ns}.svc.cluster.local:{service.endpoint.port}"
                f"{service.endpoint_path}"
            ),
            **(extra or {}),
        }
        await self.ctx.status.write(INFERENCE_SERVICE, isvc, fields, conditions)


def _multi_node_via_dra(model: ModelSpec, device_class: str) -> Problem:
    """The guide's multiNode + DRA rule, for a device-plugin limit that DRA serves."""
    resource = DEFAULT_RESOURCE_NAMES.get(model.gpu.vendor, "nvidia.com/gpu")
    return Problem(
        c.MULTI_NODE_WITH_DRA,
        f"spec.multiNode pins member pods with nodeName, which bypasses the scheduler that "
        f"allocates DRA claims, and DeviceClass {device_class!r} serves {resource} through "
        "DRA (extendedResourceName): the members would get no GPUs. Run this Model "
        "single-node",
    )


def live_pods(pods: Iterable[Obj]) -> list[Obj]:
    """Pods that are neither finished (Succeeded/Failed, e.g. evicted) nor terminating."""
    return [
        p
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def _claims_condition(model_ref: str, missing: list[str]) -> Condition:
    """Claims deleted under running pods: the pods keep their devices, new ones cannot start."""
    if missing:
        return Condition(
            c.CLAIMS_PRESENT,
            False,
            c.ACCELERATOR_NOT_READY,
            f"Model {model_ref!r} names claims that no longer exist: {', '.join(missing)}; "
            "running pods keep their devices, new pods cannot start until they are back",
        )
    return Condition(c.CLAIMS_PRESENT, True, c.ALL_CLAIMS_FOUND, "every named claim exists")


def _kept_demand(live: Obj | None, demand: dra.DeviceDemand) -> dra.DeviceDemand:
    """The per-pod devices the live Deployment was sized for (our annotation), if any."""
    value = ((live or {}).get("metadata", {}).get("annotations") or {}).get(CLAIMED_ANNOTATION)
    if value is None or not str(value).isdigit():
        return demand
    return dra.DeviceDemand(int(value), dict(demand.by_class), list(demand.reasons))


def _device_count_condition(
    count: int, demand: dra.DeviceDemand, missing: list[str] | None = None
) -> Condition:
    """How the runtime is sized against what the claims ask for: count wins (the guide)."""
    if missing:
        if count:
            kept = f"sized for count ({count})"
        else:
            kept = f"kept at {demand.total} device(s)" if demand.total else "not sized from them"
        return Condition(
            c.DEVICE_COUNT,
            False,
            "ClaimsMissing",
            f"claims not found ({', '.join(missing)}): the runtime is {kept} until they are back",
        )
    notes = "".join(f"; {r}" for r in demand.reasons)
    mismatch = dra.count_mismatch(count or None, demand)
    if mismatch:
        return Condition(c.DEVICE_COUNT, False, "CountMismatch", mismatch + notes)
    if count:
        return Condition(
            c.DEVICE_COUNT,
            True,
            "CountMatchesClaims",
            f"count is {count}"
            + (
                f" and the claims ask for {demand.total} device(s) per pod"
                if demand.total is not None
                else "; the claims' device count is known only at allocation"
            )
            + notes,
        )
    if demand.total is None:
        return Condition(
            c.DEVICE_COUNT,
            False,
            "DeviceCountUnknown",
            "count is not set and the claims' device count is known only at allocation: the "
            "runtime runs on one device unless count or tensorParallelSize is set" + notes,
        )
    return Condition(
        c.DEVICE_COUNT,
        True,
        "SizedFromClaims",
        f"count is not set: the runtime is sized for the {demand.total} device(s) the claims "
        "ask for per pod (explicit tensorParallelSize or extraArgs still win)" + notes,
    )


def _pod_ready(pod: Obj) -> bool:
    return any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in (pod.get("status") or {}).get("conditions") or []
    )
