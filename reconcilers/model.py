"""Model reconciler: validates the hardware request and sets AcceleratorReady.

For a GPU model with resourceClaims, every named ResourceClaim or ResourceClaimTemplate
must exist in the Model's namespace; the condition follows them as they come and go.
"""

from __future__ import annotations

from collections.abc import Iterable

from api import InvalidSpec, ModelSpec, parse_model
from api import conditions as c
from controller.informer import Event
from controller.reconcile import Request, Result, Watch
from controller.resources import (
    MODEL,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    ResourceType,
    object_key,
)

from .claims import missing_claims, names_claim
from .conditions import Condition
from .context import Context
from .gpu import attachment_kind, device_plugin_resource

ACCELERATOR_READY = c.ACCELERATOR_READY
READY = c.READY


def accelerator_condition(ctx: Context, namespace: str, model: ModelSpec) -> Condition:
    if model.uses_claims:
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
        names = ", ".join(c.template_name or c.claim_name or "" for c in model.gpu.claims)
        return Condition(
            ACCELERATOR_READY,
            True,
            c.RESOURCE_CLAIMS_FOUND,
            f"{len(model.gpu.claims)} DRA claim(s) found: {names}",
        )
    if model.is_gpu_model:
        return Condition(
            ACCELERATOR_READY,
            True,
            c.DEVICE_PLUGIN,
            f"{model.gpu.count or 1} GPU(s) requested as {device_plugin_resource(model)}",
        )
    return Condition(ACCELERATOR_READY, True, c.NO_ACCELERATOR_REQUIRED, "runs on CPU")


class ModelReconciler:
    name = "model"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def primary(self) -> ResourceType:
        return MODEL

    def watches(self) -> list[Watch]:
        return [
            Watch(MODEL, self._itself),
            Watch(RESOURCE_CLAIM, lambda e: self._naming(e, "resourceClaimName")),
            Watch(RESOURCE_CLAIM_TEMPLATE, lambda e: self._naming(e, "resourceClaimTemplateName")),
        ]

    def _itself(self, event: Event) -> Iterable[Request]:
        ns, name = object_key(event.obj)
        yield Request(self.name, ns, name)

    def _naming(self, event: Event, field: str) -> Iterable[Request]:
        ns, claim = object_key(event.obj)
        for m in self.ctx.cache.list(MODEL, ns):
            if names_claim(m, field, claim):
                yield Request(self.name, ns, m["metadata"]["name"])

    async def reconcile(self, request: Request) -> Result:
        obj = self.ctx.cache.get(MODEL, request.namespace, request.name)
        if obj is None:
            return Result()
        try:
            model = parse_model(obj.get("spec"))
        except InvalidSpec as e:
            message = "; ".join(e.errors)
            await self.ctx.status.write(
                MODEL,
                obj,
                {"phase": "Failed", "acceleratorReady": False},
                [
                    Condition(ACCELERATOR_READY, False, c.INVALID_SPEC, message),
                    Condition(READY, False, c.INVALID_SPEC, message),
                ],
            )
            return Result()
        accelerator = accelerator_condition(self.ctx, request.namespace, model)
        ready = Condition(
            READY,
            accelerator.status,
            "Ready" if accelerator.status else c.ACCELERATOR_NOT_READY,
            "model can be served" if accelerator.status else accelerator.message,
        )
        fields = {
            "phase": "Ready" if accelerator.status else "Pending",
            # LLMKube's bool, next to the condition that says why.
            "acceleratorReady": accelerator.status,
            "gpu": {
                "count": model.gpu.count,
                "claims": [c.pod_entry() for c in model.gpu.claims],
                "attachment": attachment_kind(model),
            },
        }
        await self.ctx.status.write(MODEL, obj, fields, [accelerator, ready])
        return Result()
