"""GPUQuota reconciler: accounts the GPUs of the InferenceServices the quota covers.

It reports (`status.usedGPUCount`, LLMKube's field; `requestedGPUCount`,
`allocatedGPUCount`, a row per service and the conditions Ready / WithinLimit are
llmkube-py extensions); the InferenceService reconciler enforces, from the same
allocation, by scaling a service no further than its admitted replicas.

A quota is reconciled again when it changes, when the admission of a service it covers
changes (quota_index.admission_changes; not on every status write of its services),
and when the namespaces it covers change (a selector quota: Namespace labels).
"""

from __future__ import annotations

from collections.abc import Iterable

from api import conditions as c
from api import parse_gpu_quota
from controller.informer import Event
from controller.reconcile import Request, Result, Watch
from controller.resources import (
    GPU_QUOTA,
    INFERENCE_SERVICE,
    MODEL,
    NAMESPACE,
    ResourceType,
    object_key,
)
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.opening import open_object
from reconcilers.quota.index import admission_changes, quota_index, quota_key
from reconcilers.quota.rule import Allocation
from reconcilers.writes.conditions import Condition

# Rows in status.services: a status must stay far below etcd's 1.5 MiB request limit
# (a row is ~200 bytes), or every write of it fails once a namespace grows large.
MAX_ROWS = 1000


def shown_rows(ordered: list[Allocation]) -> list[Allocation]:
    """At most MAX_ROWS rows, by namespace and name: the services held back first, then
    those charged."""
    if len(ordered) <= MAX_ROWS:
        return ordered
    rank = sorted(
        ordered,
        key=lambda a: (
            a.admitted_replicas >= a.requested_replicas,
            a.gpus == 0,
            a.namespace,
            a.name,
        ),
    )
    return sorted(rank[:MAX_ROWS], key=lambda a: (a.namespace, a.name))


class GPUQuotaReconciler:
    name = "gpuquota"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        quota_index(ctx.cache)  # kept from the first event on

    @property
    def primary(self) -> ResourceType:
        return GPU_QUOTA

    def watches(self) -> list[Watch]:
        return [
            Watch(GPU_QUOTA, self._quotas_over_namespace),
            Watch(INFERENCE_SERVICE, self._quotas_over_namespace),
            Watch(MODEL, self._quotas_over_namespace),
            # A selector quota covers the namespaces whose labels match.
            Watch(NAMESPACE, self._quotas_over_namespace),
        ]

    def _quotas_over_namespace(self, event: Event) -> Iterable[Request]:
        """The quota itself (its own changes), every quota over a namespace where the
        event changed what a service is admitted, and the quotas whose namespaces moved."""
        if event.obj.get("kind") == GPU_QUOTA.kind:
            yield Request(self.name, *object_key(event.obj))
        index = quota_index(self.ctx.cache)
        for ns in sorted({ns for ns, _ in admission_changes(self.ctx.cache, event)}):
            for q_ns, q_name in index.quotas_over(ns):
                yield Request(self.name, q_ns, q_name)
        for key in sorted(index.quota_changes(event)):
            q_ns, _, q_name = key.partition("/")
            yield Request(self.name, q_ns, q_name)

    async def _invalid(self, obj: Obj, message: str) -> None:
        await self.ctx.status.write(
            GPU_QUOTA, obj, {}, [Condition(c.READY, False, c.INVALID_SPEC, message)]
        )

    async def reconcile(self, request: Request) -> Result:
        opened = await open_object(self.ctx, GPU_QUOTA, request, parse_gpu_quota, self._invalid)
        if opened is None:
            return Result()
        obj, own = opened
        ordered = quota_index(self.ctx.cache).quota_allocations(quota_key(obj))
        used = sum(a.gpus for a in ordered)
        requested = sum(a.requested_replicas * a.gpus_per_replica for a in ordered)
        fields = {
            "usedGPUCount": used,
            "requestedGPUCount": requested,
            "allocatedGPUCount": sum(a.allocated_gpus for a in ordered),
            "usedVRAMBytes": sum(a.vram_bytes for a in ordered),
            "services": [
                {
                    "namespace": a.namespace,
                    "name": a.name,
                    "requestedReplicas": a.requested_replicas,
                    "admittedReplicas": a.admitted_replicas,
                    "gpusPerReplica": a.gpus_per_replica,
                    "gpus": a.gpus,
                    "allocatedGPUs": a.allocated_gpus,
                    "vramBytes": a.vram_bytes,
                    "heldBy": a.held_by or None,
                }
                for a in shown_rows(ordered)
            ],
            "omittedServices": max(0, len(ordered) - MAX_ROWS),
        }
        vram = (
            f"; {fields['usedVRAMBytes']} of vramBytes {own.vram_bytes} in use"
            if own.vram_bytes
            else ""
        )
        held = sorted({a.held_by for a in ordered if a.held_by})
        if held:
            within = Condition(
                c.WITHIN_LIMIT,
                False,
                c.EXCEEDED,
                f"services ask for {requested} GPUs; {used} are admitted under gpuCount "
                f"{own.gpu_count}{vram}; held back by {', '.join(held)}",
            )
        else:
            within = Condition(
                c.WITHIN_LIMIT,
                True,
                c.WITHIN_LIMIT,
                f"{used} of {own.gpu_count} GPUs in use{vram}",
            )
        ready = Condition(c.READY, True, c.ACCOUNTED, f"{len(ordered)} service(s) accounted")
        await self.ctx.status.write(GPU_QUOTA, obj, fields, [ready, within])
        return Result()
