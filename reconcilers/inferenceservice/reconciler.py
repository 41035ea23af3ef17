"""InferenceService reconciler: builds and keeps the serving workload.

Model resolved and valid, its claims present, GPUQuota admitting replicas: then a
Deployment (or, for multiNode, one pinned Pod per node) and a Service, owned by the
InferenceService so that deleting it cleans them up. When any step fails, the
existing workload is left as it is and a condition says why; nothing is deleted.

A reconcile is: validate (here), plan (plan.py: pure, what to run and every
condition known before writing), apply (ensure.py: server-side apply of the
workload; a pod-template change passes spec.rolloutPolicy, rollout.py) and status
(outcome.py: status and its Events), then pod recycling (pod_lifetime.py). It reads
the wall clock once (controller.clock.wall), for the held rollout and the recycling.

DRA: without a GPU count the runtime is sized from the devices the Model's claims ask
for (DeviceCount says so, or says both numbers when count disagrees); what DRA
allocated to the pods' claims is `status.allocation`; a Kueue-labelled service gets
the Kueue path (reconcilers/devices/kueue.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog

from api import (
    InferenceServiceSpec,
    InvalidSpec,
    ModelSpec,
    parse_inference_service,
    parse_model,
    rule_errors,
)
from api import conditions as c
from api.source import host_path_error
from api.volumes import host_path_volume_errors
from controller import clock
from controller.informer import Event
from controller.reconcile import Request, Result, Watch
from controller.resources import (
    DEPLOYMENT,
    DEVICE_CLASS,
    GPU_QUOTA,
    HORIZONTAL_POD_AUTOSCALER,
    INFERENCE_SERVICE,
    MODEL,
    NAMESPACE,
    NODE,
    POD,
    POD_DISRUPTION_BUDGET,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    SERVICE,
    ResourceType,
    object_key,
)
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.devices import selectors
from reconcilers.devices.claims import missing_claims, names_claim
from reconcilers.devices.lookup import (
    device_classes,
    index_managed_templates,
    index_slices,
    resource_slices,
)
from reconcilers.devices.managed import ManagedClaims, Refused, allocatable_changed
from reconcilers.devices.taint_rules import TaintRuleReader, rule_taints
from reconcilers.devices.taints import devices_to_reread
from reconcilers.discovery import ServedTypes
from reconcilers.inferenceservice.ensure import apply
from reconcilers.inferenceservice.gateway import ensure_gateway
from reconcilers.inferenceservice.integrations import RECHECK
from reconcilers.inferenceservice.outcome import (
    write_blocked,
    write_refused,
    write_served,
)
from reconcilers.inferenceservice.plan import RuleTaints, observe, observe_managed, plan
from reconcilers.inferenceservice.pod_lifetime import Recycler
from reconcilers.inferenceservice.pods import has_workload, index_pods, service_pods, unschedulable
from reconcilers.inferenceservice.predicates import deployment_status, read_changed
from reconcilers.inferenceservice.slo import ensure_slo
from reconcilers.opening import open_object
from reconcilers.ownership import MANAGED_BY, MANAGER, SERVICE_LABEL
from reconcilers.quota.index import admission_changes
from reconcilers.sources.cache_claim import ClaimMaker
from reconcilers.writes.apply import own_writes

OWNED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
NOT_OWNED_RECHECK = 60.0
log = structlog.get_logger("inferenceservice")


def earliest(*delays: float) -> float:
    """The soonest of the requeue delays asked for (0: none asked)."""
    asked = [d for d in delays if d > 0]
    return min(asked) if asked else 0.0


def _model_ref(isvc: Obj) -> Any:
    return (isvc.get("spec") or {}).get("modelRef")


class InferenceServiceReconciler:
    name = "inferenceservice"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.claims = ClaimMaker()  # the model cache claims made by this controller run
        self.recycler = Recycler()  # maxPodLifetimeSeconds, and the pods it waits on
        index_pods(ctx.cache)  # its pods by the service label, kept from the first event on
        index_slices(ctx.cache)  # allocated devices' product and memory, by driver/pool
        index_managed_templates(ctx.cache)  # the templates made for each service
        # Pyrra's and the AI Gateway's types, which the cluster may not serve (discovery).
        self.served = ServedTypes(ctx.client)
        self.taint_rules = TaintRuleReader(ctx.client, self.served)

    @property
    def primary(self) -> ResourceType:
        return INFERENCE_SERVICE

    def watches(self) -> list[Watch]:
        # A service's own objects: neither our own write coming back through the watch
        # (OwnWrites) nor an update of what a reconcile does not read (predicates.py)
        # wakes it; a pod's every change does (its status is the service's).
        writes = own_writes(self.ctx.cache)
        owned = read_changed()
        return [
            Watch(INFERENCE_SERVICE, self._itself),
            # Every event, status too (DRA allocation moves the charge): the services whose
            # quota admission it changed.
            Watch(INFERENCE_SERVICE, self._quota_peers, predicates=()),
            Watch(MODEL, self._using_model),
            Watch(MODEL, self._quota_peers),
            Watch(GPU_QUOTA, self._quota_peers),
            # A Namespace relabelled in or out of a selector GPUQuota's reach.
            Watch(NAMESPACE, self._quota_peers),
            # A Namespace that starts or stops enforcing Pod Security `restricted`.
            Watch(NAMESPACE, self._in_namespace),
            Watch(RESOURCE_CLAIM, lambda e: self._using_claim(e, "resourceClaimName")),
            # The managed template we apply comes back as ADDED: our own write (OwnWrites).
            Watch(
                RESOURCE_CLAIM_TEMPLATE,
                lambda e: self._using_claim(e, "resourceClaimTemplateName"),
                predicates=(writes.follow(RESOURCE_CLAIM_TEMPLATE),),
            ),
            Watch(
                DEPLOYMENT,
                self._owner,
                OWNED_SELECTOR,
                (writes.follow(DEPLOYMENT), read_changed(deployment_status)),
            ),
            Watch(SERVICE, self._owner, OWNED_SELECTOR, (writes.follow(SERVICE), owned)),
            Watch(
                HORIZONTAL_POD_AUTOSCALER,
                self._owner,
                OWNED_SELECTOR,
                (writes.follow(HORIZONTAL_POD_AUTOSCALER), owned),
            ),
            Watch(
                POD_DISRUPTION_BUDGET,
                self._owner,
                OWNED_SELECTOR,
                (writes.follow(POD_DISRUPTION_BUDGET), owned),
            ),
            Watch(POD, self._pod_owner, OWNED_SELECTOR, (writes.follow(POD),)),
            # KEP-5004, Kueue's verdict and the managed claims read DeviceClasses
            # (cluster-wide, rarely changed).
            Watch(DEVICE_CLASS, self._all_services),
            # A device tainted or untainted (KEP-5055): pending pods are explained anew.
            Watch(RESOURCE_SLICE, self._all_services),
            # Managed claims: whether any node advertises the device-plugin resource.
            Watch(NODE, self._all_services, predicates=(allocatable_changed,)),
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

    def _in_namespace(self, event: Event) -> Iterable[Request]:
        name = event.obj["metadata"]["name"]
        for isvc in self.ctx.cache.list(INFERENCE_SERVICE, name):
            yield self._request(name, isvc["metadata"]["name"])

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
        if field == "resourceClaimTemplateName":  # a managed template: its service
            owners = list(self._owner(event))
            if owners:
                yield from owners
                return
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

    def _known(self, ns: str, name: str) -> Iterable[Request]:
        """A service's request, when the service is in the cache: a reconcile of one that
        is not does nothing, and one created later is reconciled for its own ADDED event
        (e.g. pods listed at start-up before their service exists, or left after it)."""
        if self.ctx.cache.get(INFERENCE_SERVICE, ns, name) is not None:
            yield self._request(ns, name)

    def _owner(self, event: Event) -> Iterable[Request]:
        ns, _ = object_key(event.obj)
        for ref in event.obj.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("kind") == INFERENCE_SERVICE.kind and ref.get("controller"):
                yield from self._known(ns, ref["name"])

    def _pod_owner(self, event: Event) -> Iterable[Request]:
        ns, _ = object_key(event.obj)
        name = (event.obj.get("metadata", {}).get("labels") or {}).get(SERVICE_LABEL)
        if name:
            yield from self._known(ns, name)

    # -- reconcile ------------------------------------------------------------------

    async def _invalid(self, isvc: Obj, message: str) -> None:
        await write_blocked(self.ctx, isvc, c.INVALID_SPEC, message, phase="Failed")

    async def reconcile(self, request: Request) -> Result:
        opened = await open_object(
            self.ctx, INFERENCE_SERVICE, request, parse_inference_service, self._invalid
        )
        if opened is None:
            return Result()
        isvc, service = opened
        if not service.served:
            await write_blocked(
                self.ctx,
                isvc,
                c.RUNTIME_NOT_SUPPORTED,
                f"spec.runtime: {service.runtime!r} is valid in LLMKube's API but llmkube-py "
                "serves only vllm, sglang, tgi and llamacpp",
                phase="Failed",
            )
            return Result()
        refused = host_path_volume_errors(
            service.fields.extra_volumes,
            self.ctx.settings.allowed_host_path_roots,
            self.ctx.settings.allow_any_extra_volume_host_path,
        )
        if refused:
            await write_blocked(
                self.ctx, isvc, c.SOURCE_NOT_ALLOWED, "; ".join(refused), phase="Failed"
            )
            return Result()
        model_obj = self.ctx.cache.get(MODEL, request.namespace, service.model_ref)
        if model_obj is None:
            await write_blocked(
                self.ctx,
                isvc,
                c.MODEL_NOT_FOUND,
                f"Model {service.model_ref!r} not found in namespace {request.namespace}",
            )
            return Result()
        try:
            model = parse_model(model_obj.get("spec"))
        except InvalidSpec as e:
            await write_blocked(
                self.ctx,
                isvc,
                c.MODEL_INVALID,
                f"Model {service.model_ref!r} is invalid: {'; '.join(e.errors)}",
                phase="Failed",
            )
            return Result()
        errors = rule_errors(service, model)
        if errors:
            await write_blocked(self.ctx, isvc, c.INVALID_SPEC, "; ".join(errors), phase="Failed")
            return Result()
        refusal = host_path_error(model.location, self.ctx.settings.allowed_host_path_roots)
        if refusal:
            message = f"Model {service.model_ref!r} {refusal}"
            await write_blocked(self.ctx, isvc, c.SOURCE_NOT_ALLOWED, message, phase="Failed")
            return Result()
        made = observe_managed(self.ctx.cache, isvc, service, model, self.ctx.settings)
        if isinstance(made, Refused):
            phase = "Failed" if made.reason == c.INVALID_SPEC else "Pending"
            await write_blocked(self.ctx, isvc, made.reason, made.message, phase=phase)
            return Result()
        missing = missing_claims(self.ctx.cache, request.namespace, model)
        if made is not None:
            model = made.model(model)  # served on the template this reconcile applies
            service = made.service(service)  # a shared device's fraction for the runtime
        if missing and not has_workload(self.ctx.cache, isvc):
            await write_blocked(
                self.ctx,
                isvc,
                c.ACCELERATOR_NOT_READY,
                f"Model {service.model_ref!r} names claims not found in "
                f"namespace {request.namespace}: {', '.join(missing)}",
            )
            return Result()
        return await self._serve(isvc, service, model, missing, made)

    async def _rule_taints(self, isvc: Obj) -> tuple[RuleTaints, float]:
        """The DeviceTaintRules' taints, when a pod of the service is pending or departing
        (they are listed, not watched: taint_rules.py), else none; and when to look again
        where they came from a list reused for a pending pod (0: no need)."""
        cache = self.ctx.cache
        pods = {p["metadata"]["name"]: p for p in service_pods(cache, isvc)}
        allocation = self.ctx.status.current(isvc).get("allocation")
        departing = bool(devices_to_reread(allocation, pods))
        if not departing and not unschedulable(cache, isvc):
            return {}, 0.0
        rules, stale_in = await self.taint_rules.rules(fresh=departing)
        if not rules:
            return {}, stale_in
        found = selectors.devices(resource_slices(cache))
        return rule_taints(rules, found, device_classes(cache)), stale_in

    async def _serve(
        self,
        isvc: Obj,
        service: InferenceServiceSpec,
        model: ModelSpec,
        missing: list[str],
        made: ManagedClaims | None,
    ) -> Result:
        """plan -> apply -> status; a refused plan writes only the status."""
        rules, rules_stale_in = await self._rule_taints(isvc)
        facts = observe(self.ctx.cache, isvc, service, model, missing, made, rules)
        decided = plan(
            isvc,
            service,
            model,
            missing,
            facts,
            self.ctx.settings,
        )
        if decided.refused:
            await write_refused(self.ctx, isvc, decided)
            return Result()
        now = clock.wall()
        applied = await apply(self.ctx, isvc, service, model, decided, self.claims, now)
        # spec.slo and spec.endpoint.gateway: conditions of their own, never a failure.
        integrations = (
            await ensure_slo(self.ctx, self.served, isvc, service),
            await ensure_gateway(self.ctx, self.served, isvc, service),
        )
        await write_served(self.ctx, isvc, service, model, decided, applied, integrations)
        if applied.conflict is not None:
            return Result(requeue_after=NOT_OWNED_RECHECK)
        # maxPodLifetimeSeconds: the next pod to recycle, if any; a held rollout's next look;
        # an integration whose CRDs are missing, looked at again.
        recycle = await self.recycler.recycle_expired(self.ctx, isvc, service, now)
        after = earliest(recycle, applied.rollout.requeue, rules_stale_in)
        if any(i.recheck for i in integrations):
            after = earliest(after, RECHECK)
        return Result(requeue_after=after)
