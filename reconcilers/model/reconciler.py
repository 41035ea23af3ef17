"""Model reconciler: validates the hardware request and sets AcceleratorReady.

For a GPU model with resourceClaims, in order: every named ResourceClaim or
ResourceClaimTemplate exists in the Model's namespace, every DeviceClass their
requests name exists, and the ResourceSlices publish, on one node, at least as many
devices of each class's drivers as one pod needs. The condition follows claims,
templates, classes and slices as they come and go. A device-plugin Model whose
resource a DeviceClass serves through DRA (KEP-5004 extendedResourceName) is checked
against the slices the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

from api import ModelSpec, parse_model
from api import conditions as c
from api.source import host_path_error
from controller.informer import Event
from controller.reconcile import Request, Result, Watch
from controller.resources import (
    DEVICE_CLASS,
    JOB,
    MODEL,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    ResourceType,
    object_key,
)
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.devices import dra
from reconcilers.devices.claims import missing_claims, names_claim
from reconcilers.devices.lookup import (
    claim_shortfalls,
    device_classes,
    model_demand,
    plugin_nodes,
    resource_slices,
    spec_shortfalls,
)
from reconcilers.devices.managed import (
    VENDOR_CLASSES,
    allocatable_changed,
    claim_spec,
    driver_of,
    memory_selector,
)
from reconcilers.model.delivery import Delivery, delivery, loader_changed
from reconcilers.model.pods import index_model_pods, model_pods
from reconcilers.model.prefetch import ensure_prefetch
from reconcilers.opening import open_object
from reconcilers.ownership import MANAGED_BY, MANAGER, MODEL_LABEL
from reconcilers.sources.loader import needs_loader
from reconcilers.writes.conditions import Condition
from runtimes.gpu import attachment_kind, device_plugin_resource

ACCELERATOR_READY = c.ACCELERATOR_READY
READY = c.READY
OWNED_SELECTOR = f"{MANAGED_BY}={MANAGER}"


def accelerator_condition(
    ctx: Context, namespace: str, model: ModelSpec, classes: dict[str, Obj] | None = None
) -> Condition:
    """classes: the cached DeviceClasses by name, when the caller has read them already."""
    if model.uses_claims:
        return _claims_condition(ctx, namespace, model)
    if model.is_gpu_model:
        return _device_plugin_condition(ctx, model, classes)
    return Condition(ACCELERATOR_READY, True, c.NO_ACCELERATOR_REQUIRED, "runs on CPU")


def _claims_condition(ctx: Context, namespace: str, model: ModelSpec) -> Condition:
    missing = missing_claims(ctx.cache, namespace, model)
    if missing:
        reason = (
            c.RESOURCE_CLAIM_TEMPLATE_NOT_FOUND
            if all(m.startswith("ResourceClaimTemplate") for m in missing)
            else c.RESOURCE_CLAIM_NOT_FOUND
        )
        return Condition(
            ACCELERATOR_READY,
            False,
            reason,
            f"not found in namespace {namespace}: {', '.join(missing)}",
        )
    demand = model_demand(ctx.cache, namespace, model)
    problems = dra.capacity_problems(demand, device_classes(ctx.cache), resource_slices(ctx.cache))
    for reason in (c.DEVICE_CLASS_NOT_FOUND, c.INSUFFICIENT_DEVICES):
        found = [p.message for p in problems if p.reason == reason]
        if found:
            return Condition(ACCELERATOR_READY, False, reason, "; ".join(found))
    short = claim_shortfalls(ctx.cache, namespace, model)
    if short:
        return Condition(ACCELERATOR_READY, False, c.UNSATISFIABLE_REQUEST, "; ".join(short))
    names = ", ".join(c.template_name or c.claim_name or "" for c in model.gpu.claims)
    per_pod = (
        f"{demand.total} device(s) per pod"
        if demand.total is not None
        else "a device count known only at allocation (allocationMode All)"
    )
    message = f"{len(model.gpu.claims)} DRA claim(s) found: {names}; {per_pod}"
    unread = [p.device_class for p in problems if p.reason == "DevicesUnknown"]
    if unread:
        message += f"; devices of DeviceClass {', '.join(unread)} not counted (CEL selectors)"
    else:
        message += ", published in ResourceSlices"
    return Condition(ACCELERATOR_READY, True, c.RESOURCE_CLAIMS_FOUND, message)


def _device_plugin_condition(
    ctx: Context, model: ModelSpec, classes: dict[str, Obj] | None
) -> Condition:
    resource = device_plugin_resource(model)
    count = model.gpu.count or 1
    if classes is None:
        classes = device_classes(ctx.cache)
    served_by = dra.extended_resource_class(classes, resource)
    if served_by is None:
        managed_class = _managed_class(ctx, model, classes, resource)
        if managed_class is not None:
            return _managed_condition(ctx, model, managed_class, count, resource, classes)
        return Condition(
            ACCELERATOR_READY,
            True,
            c.DEVICE_PLUGIN,
            f"{count} GPU(s) requested as {resource}",
        )
    demand = dra.DeviceDemand(count, {served_by: count}, minimum_by_class={served_by: count})
    problems = dra.capacity_problems(demand, classes, resource_slices(ctx.cache))
    insufficient = [p.message for p in problems if p.reason == c.INSUFFICIENT_DEVICES]
    if insufficient:
        return Condition(
            ACCELERATOR_READY,
            False,
            c.INSUFFICIENT_DEVICES,
            f"{resource} is served through DRA by DeviceClass {served_by!r}: "
            + "; ".join(insufficient),
        )
    return Condition(
        ACCELERATOR_READY,
        True,
        c.EXTENDED_RESOURCE_VIA_DRA,
        f"{count} GPU(s) requested as {resource}, which DeviceClass {served_by!r} serves "
        "through DRA (extendedResourceName): nodes without the device plugin can run it",
    )


def _managed_class(
    ctx: Context, model: ModelSpec, classes: dict[str, Obj], resource: str
) -> str | None:
    """The DeviceClass the InferenceServices of this Model get managed claims of
    (reconcilers/devices/managed.py), when that path is on and would be taken: no node
    advertises the resource and the class exists. A service's annotation may name another."""
    if not ctx.settings.managed_claims or plugin_nodes(ctx.cache, resource):
        return None
    name = ctx.settings.dra_device_class or VENDOR_CLASSES.get(model.gpu.vendor, "")
    return name if name in classes else None


def _managed_condition(
    ctx: Context,
    model: ModelSpec,
    device_class: str,
    count: int,
    resource: str,
    classes: dict[str, Obj],
) -> Condition:
    demand = dra.DeviceDemand(count, {device_class: count}, minimum_by_class={device_class: count})
    problems = dra.capacity_problems(demand, classes, resource_slices(ctx.cache))
    insufficient = [p.message for p in problems if p.reason == c.INSUFFICIENT_DEVICES]
    if insufficient:
        return Condition(ACCELERATOR_READY, False, c.INSUFFICIENT_DEVICES, "; ".join(insufficient))
    memory = memory_selector(model, driver_of(classes[device_class], device_class))
    spec = claim_spec(device_class, count, (memory,) if memory else ())
    short = spec_shortfalls(ctx.cache, "the ResourceClaimTemplate made for each service", spec)
    if short:
        return Condition(ACCELERATOR_READY, False, c.UNSATISFIABLE_REQUEST, "; ".join(short))
    return Condition(
        ACCELERATOR_READY,
        True,
        c.MANAGED_CLAIMS,
        f"no node advertises {resource}: each InferenceService of this Model gets a "
        f"ResourceClaimTemplate the controller makes, {count} device(s) of DeviceClass "
        f"{device_class!r}",
    )


class ModelReconciler:
    name = "model"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        index_model_pods(ctx.cache)  # its loaders' pods by the model label

    @property
    def primary(self) -> ResourceType:
        return MODEL

    def watches(self) -> list[Watch]:
        return [
            Watch(MODEL, self._itself),
            Watch(RESOURCE_CLAIM, lambda e: self._naming(e, "resourceClaimName")),
            Watch(RESOURCE_CLAIM_TEMPLATE, lambda e: self._naming(e, "resourceClaimTemplateName")),
            # Classes and slices are cluster-wide: any change can move any GPU Model.
            Watch(DEVICE_CLASS, self._gpu_models),
            Watch(RESOURCE_SLICE, self._gpu_models),
            # Managed claims: whether a node advertises the device-plugin resource.
            Watch(NODE, self._gpu_models, predicates=(allocatable_changed,)),
            # The loaders' termination messages: serving pods and prefetch Job pods.
            Watch(POD, self._labelled, OWNED_SELECTOR, (loader_changed,)),
            Watch(JOB, self._labelled, OWNED_SELECTOR),
        ]

    def _labelled(self, event: Event) -> Iterable[Request]:
        ns, _ = object_key(event.obj)
        name = (event.obj.get("metadata", {}).get("labels") or {}).get(MODEL_LABEL)
        if name:
            yield Request(self.name, ns, name)

    def _delivery(self, namespace: str, name: str, model: ModelSpec) -> Delivery:
        return delivery(model, model_pods(self.ctx.cache, namespace, name))

    def _itself(self, event: Event) -> Iterable[Request]:
        ns, name = object_key(event.obj)
        yield Request(self.name, ns, name)

    def _naming(self, event: Event, field: str) -> Iterable[Request]:
        ns, claim = object_key(event.obj)
        for m in self.ctx.cache.list(MODEL, ns):
            if names_claim(m, field, claim):
                yield Request(self.name, ns, m["metadata"]["name"])

    def _gpu_models(self, event: Event) -> Iterable[Request]:
        for m in self.ctx.cache.list(MODEL):
            hardware = (m.get("spec") or {}).get("hardware") or {}
            if hardware.get("accelerator") not in (None, "cpu", "metal") or hardware.get("gpu"):
                ns, name = object_key(m)
                yield Request(self.name, ns, name)

    async def _invalid(self, obj: Obj, message: str) -> None:
        await self.ctx.status.write(
            MODEL,
            obj,
            {"phase": "Failed", "acceleratorReady": False},
            [
                Condition(ACCELERATOR_READY, False, c.INVALID_SPEC, message),
                Condition(READY, False, c.INVALID_SPEC, message),
            ],
        )

    async def reconcile(self, request: Request) -> Result:
        opened = await open_object(self.ctx, MODEL, request, parse_model, self._invalid)
        if opened is None:
            return Result()
        obj, model = opened
        # Read once for the condition and for status.gpu.extendedResourceClass.
        plugin = model.is_gpu_model and not model.uses_claims
        classes = device_classes(self.ctx.cache) if plugin else None
        accelerator = accelerator_condition(self.ctx, request.namespace, model, classes)
        ready = Condition(
            READY,
            accelerator.status,
            "Ready" if accelerator.status else c.ACCELERATOR_NOT_READY,
            "model can be served" if accelerator.status else accelerator.message,
        )
        refusal = host_path_error(model.location, self.ctx.settings.allowed_host_path_roots)
        if refusal:
            ready = Condition(READY, False, c.SOURCE_NOT_ALLOWED, refusal)
        # Every nested key is always written: a status merge patch removes only top-level
        # keys, so an optional nested one would outlive the spec that produced it.
        demand = (
            model_demand(self.ctx.cache, request.namespace, model) if model.uses_claims else None
        )
        extended = (
            dra.extended_resource_class(classes, device_plugin_resource(model))
            if classes is not None
            else None
        )
        gpu: dict[str, object] = {
            "count": model.gpu.count,
            "claims": [c.pod_entry() for c in model.gpu.claims],
            "attachment": attachment_kind(model),
            "devicesPerPod": (demand.total or 0) if demand else 0,
            "deviceClasses": sorted(demand.classes) if demand else [],
            "extendedResourceClass": extended or "",
        }
        fields = {
            "phase": "Failed" if refusal else "Ready" if accelerator.status else "Pending",
            # LLMKube's bool, next to the condition that says why.
            "acceleratorReady": accelerator.status,
            "gpu": gpu,
        }
        conditions = [accelerator, ready]
        if needs_loader(model) and not refusal:
            # What the loaders reported; the controller itself fetches nothing.
            got = self._delivery(request.namespace, request.name, model)
            fields.update(got.status)
            fields["cacheKey"] = model.cache_key
            if accelerator.status or got.phase == "Failed":
                fields["phase"] = got.phase
                conditions[1] = Condition(READY, got.phase == "Ready", got.reason, got.message)
            prefetch = await ensure_prefetch(self.ctx, obj, model, got)
            if prefetch is not None:
                conditions.append(prefetch)
        await self.ctx.status.write(MODEL, obj, fields, conditions)
        return Result()
