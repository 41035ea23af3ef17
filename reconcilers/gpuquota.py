"""GPUQuota reconciler: accounts the GPUs each InferenceService in the namespace is charged.

It reports; the InferenceService reconciler enforces, from the same allocation, by
scaling a service no further than its admitted replicas.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.informer import Event
from controller.reconcile import Request, Result, Watch
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE, MODEL, ResourceType, object_key

from .conditions import Condition
from .context import Context
from .quota import namespace_allocations
from .spec import InvalidSpec, parse_gpu_quota

READY = "Ready"
WITHIN_LIMIT = "WithinLimit"


class GPUQuotaReconciler:
    name = "gpuquota"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def primary(self) -> ResourceType:
        return GPU_QUOTA

    def watches(self) -> list[Watch]:
        return [
            Watch(GPU_QUOTA, self._quotas_in_namespace),
            Watch(INFERENCE_SERVICE, self._quotas_in_namespace),
            Watch(MODEL, self._quotas_in_namespace),
        ]

    def _quotas_in_namespace(self, event: Event) -> Iterable[Request]:
        ns, _ = object_key(event.obj)
        for quota in self.ctx.cache.list(GPU_QUOTA, ns):
            yield Request(self.name, ns, quota["metadata"]["name"])

    async def reconcile(self, request: Request) -> Result:
        obj = self.ctx.cache.get(GPU_QUOTA, request.namespace, request.name)
        if obj is None:
            return Result()
        try:
            own = parse_gpu_quota(obj.get("spec"))
        except InvalidSpec as e:
            message = "; ".join(e.errors)
            await self.ctx.status.write(
                GPU_QUOTA,
                obj,
                {},
                [
                    Condition(READY, False, "InvalidSpec", message),
                ],
            )
            return Result()
        effective, allocations = namespace_allocations(self.ctx.cache, request.namespace)
        ordered = sorted(allocations.values(), key=lambda a: a.name)
        used = sum(a.gpus for a in ordered)
        requested = sum(a.requested_replicas * a.gpus_per_replica for a in ordered)
        fields = {
            "limit": own.limit,
            "effectiveLimit": effective,
            "used": used,
            "requested": requested,
            "services": [
                {
                    "name": a.name,
                    "requestedReplicas": a.requested_replicas,
                    "admittedReplicas": a.admitted_replicas,
                    "gpusPerReplica": a.gpus_per_replica,
                    "gpus": a.gpus,
                }
                for a in ordered
            ],
        }
        if requested > used:
            within = Condition(
                WITHIN_LIMIT,
                False,
                "Exceeded",
                f"services ask for {requested} GPUs, {used} of the limit {effective} are admitted",
            )
        else:
            within = Condition(
                WITHIN_LIMIT, True, "WithinLimit", f"{used} of {effective} GPUs in use"
            )
        await self.ctx.status.write(
            GPU_QUOTA,
            obj,
            fields,
            [
                Condition(READY, True, "Accounted", f"{len(ordered)} service(s) accounted"),
                within,
            ],
        )
        return Result()
