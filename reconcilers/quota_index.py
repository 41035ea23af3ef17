"""GPUQuota coverage and admission, kept up to date from the cache's events.

A GPUQuota covers the InferenceServices of `spec.namespaceRef`, or, with
`spec.selector`, those in its own namespace whose pods carry matching labels. What
each service is admitted is quota_rule's answer.

`QuotaIndex` keeps that answer in linear time: each spec is parsed once per generation
(the cache's parse memo), each namespace under a quota keeps its services in admission
order with what was left before each one's turn, and a change re-admits from the
changed service's place only until the leftovers are again what they were. It records
which services' admission changed, so that only those are reconciled again
(`admission_changes`).
"""

from __future__ import annotations

import bisect
from typing import Any

import structlog

from api import (
    GPUQuotaSpec,
    InvalidSpec,
    parse_gpu_quota,
    parse_inference_service,
    parse_model,
)
from controller.cache import Cache
from controller.informer import DELETED, Event
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE, MODEL, object_key

from .quota_rule import (
    Allocation,
    Demand,
    NamespaceQuota,
    admit,
    allocate,
    allocated_devices,
    charge_per_replica,
)
from .workload import pod_labels

Obj = dict[str, Any]
log = structlog.get_logger("quota")


def quota_key(quota: Obj) -> str:
    return f"{quota['metadata'].get('namespace', '')}/{quota['metadata']['name']}"


def quota_scope(quota: Obj, spec: GPUQuotaSpec) -> str:
    """The namespace whose services the quota covers."""
    return spec.namespace_ref or quota["metadata"].get("namespace", "")


Quotas = dict[str, tuple[Obj, GPUQuotaSpec]]


def quotas_for(cache: Cache, namespace: str) -> Quotas:
    """The valid GPUQuotas (in any namespace) whose scope is this namespace."""
    found = {}
    for quota in cache.list(GPU_QUOTA):
        try:
            spec = cache.parsed(GPU_QUOTA, quota, parse_gpu_quota)
        except InvalidSpec:
            continue  # an invalid quota reports itself; it limits nothing
        if quota_scope(quota, spec) == namespace:
            found[quota_key(quota)] = (quota, spec)
    return found


def demand_for(cache: Cache, isvc: Obj, quotas: Quotas) -> Demand | None:
    """What a valid InferenceService with a valid Model asks for, and who covers it."""
    meta = isvc["metadata"]
    namespace = meta.get("namespace", "")
    try:
        service = cache.parsed(INFERENCE_SERVICE, isvc, parse_inference_service)
        model_obj = cache.get(MODEL, namespace, service.model_ref)
        if model_obj is None:
            return None
        model = cache.parsed(MODEL, model_obj, parse_model)
    except InvalidSpec:
        return None
    labels = pod_labels(isvc, service)
    covering = tuple(
        key
        for key, (q, spec) in sorted(quotas.items())
        if spec.covers(q["metadata"].get("namespace", ""), namespace, labels)
    )
    return Demand(
        meta["name"],
        str(meta.get("creationTimestamp", "")),
        service.wanted_replicas,
        charge_per_replica(isvc, model, service),
        covering,
        allocated_devices(isvc)[0] if model.uses_claims else 0,
    )


def namespace_demands(cache: Cache, namespace: str, quotas: Quotas) -> list[Demand]:
    """Every service's demand, read from the cache now (the straightforward way)."""
    demands = (demand_for(cache, isvc, quotas) for isvc in cache.list(INFERENCE_SERVICE, namespace))
    return [d for d in demands if d is not None]


def recomputed_allocations(cache: Cache, namespace: str) -> NamespaceQuota:
    """namespace_allocations computed from scratch: the reference the index must match."""
    quotas = quotas_for(cache, namespace)
    if not quotas:
        return NamespaceQuota({}, {})
    limits = {key: spec.gpu_count for key, (_, spec) in quotas.items()}
    return NamespaceQuota(limits, allocate(limits, namespace_demands(cache, namespace, quotas)))


def namespace_allocations(cache: Cache, namespace: str) -> NamespaceQuota:
    """The quotas over this namespace and what each service is admitted (read-only).

    Without a GPUQuota every service is admitted in full: nothing is kept for such a
    namespace, and its services and Models are not parsed for this.
    """
    return quota_index(cache).allocations(namespace)


def admission_changes(cache: Cache, event: Event) -> frozenset[tuple[str, str]]:
    """(namespace, name) of the services whose admission this event changed."""
    return quota_index(cache).changes_for(event)


def quota_index(cache: Cache) -> QuotaIndex:
    return cache.extension("gpuquota", QuotaIndex)


_NOTHING: frozenset[tuple[str, str]] = frozenset()


def _same_spec(event: Event) -> bool:
    """An update that left spec alone (a status write, a label...)."""
    old = event.old
    return event.type != DELETED and old is not None and old.get("spec") == event.obj.get("spec")


class _Scope:
    """One namespace under at least one GPUQuota: its services in admission order, what
    was left under each quota before each one's turn, and what each is admitted."""

    def __init__(self, quotas: Quotas) -> None:
        self.quotas = quotas
        self.limits = {key: spec.gpu_count for key, (_, spec) in quotas.items()}
        self.keys = tuple(sorted(quotas))
        self.order: list[tuple[str, str]] = []  # (creationTimestamp, name)
        self.demands: dict[str, Demand] = {}
        self.before: dict[str, tuple[int, ...]] = {}  # leftovers, in `keys` order
        self.allocations: dict[str, Allocation] = {}
        self.model_of: dict[str, str] = {}  # service -> spec.modelRef, also without a demand
        self.users: dict[str, set[str]] = {}  # model -> services naming it
        self.view = NamespaceQuota(self.limits, self.allocations)

    def same_quotas(self, quotas: Quotas) -> bool:
        return {k: s for k, (_, s) in quotas.items()} == {k: s for k, (_, s) in self.quotas.items()}

    def set_model(self, name: str, ref: Any) -> None:
        old = self.model_of.pop(name, None)
        if old is not None:
            self.users[old].discard(name)
            if not self.users[old]:
                del self.users[old]
        if isinstance(ref, str):
            self.model_of[name] = ref
            self.users.setdefault(ref, set()).add(name)

    def _position(self, created: str, name: str) -> int:
        return bisect.bisect_left(self.order, (created, name))

    def _leftovers_before(self, position: int) -> dict[str, int]:
        if position == 0:
            return dict(self.limits)
        prev = self.allocations[self.order[position - 1][1]]
        left = dict(zip(self.keys, self.before[prev.name], strict=True))
        for q in prev.quotas:
            left[q] -= prev.admitted_replicas * prev.gpus_per_replica
        return left

    def update(self, updates: dict[str, Demand | None]) -> set[str]:
        """Apply new demands (None: no demand); the names whose allocation changed."""
        present: list[Demand] = []
        removed: list[tuple[str, str]] = []  # (created, name) of demands withdrawn
        replaced: list[tuple[str, str]] = []  # where every old demand stood
        start = len(self.order)
        for name, demand in updates.items():
            old = self.demands.get(name)
            if old == demand:
                continue
            if old is not None:
                i = self._position(old.created, name)
                del self.order[i]
                del self.demands[name]
                start = min(start, i)
                replaced.append((old.created, name))
                if demand is None:
                    removed.append((old.created, name))
            if demand is not None:
                i = self._position(demand.created, name)
                self.order.insert(i, (demand.created, name))
                self.demands[name] = demand
                start = min(start, i)
                present.append(demand)
        changed: set[str] = set()
        for _, name in removed:
            self.before.pop(name, None)
            if self.allocations.pop(name, None) is not None:
                changed.add(name)
        if not present and not removed:
            return changed
        # Past every changed place (new and old), a service whose leftovers are what
        # they were is admitted as before, and so is everyone after it: stop there.
        stop_from = max(
            [self._position(d.created, d.name) + 1 for d in present]
            + [self._position(created, name) for created, name in replaced]
        )
        left = self._leftovers_before(start)
        for i in range(start, len(self.order)):
            name = self.order[i][1]
            snapshot = tuple(left[k] for k in self.keys)
            if i >= stop_from and self.before.get(name) == snapshot:
                break
            self.before[name] = snapshot
            allocation = admit(self.demands[name], left)
            if self.allocations.get(name) != allocation:
                self.allocations[name] = allocation
                changed.add(name)
        return changed


class QuotaIndex:
    """namespace_allocations for every namespace under a GPUQuota, kept from the
    cache's events (it subscribes to InferenceServices, Models and GPUQuotas)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.scopes: dict[str, _Scope] = {}
        self.quota_scopes: dict[str, str] = {}  # quota key -> the namespace it covers
        self._last: tuple[Event | None, frozenset[tuple[str, str]]] = (None, _NOTHING)
        self.rebuilds = 0  # namespaces (re)built from scratch; tests and metrics read it
        self.demands_computed = 0  # services re-read after an event (not counting rebuilds)
        for quota in cache.list(GPU_QUOTA):
            self._note_quota(quota)
        for ns in set(self.quota_scopes.values()):
            self._rebuild(ns)
        cache.subscribe(INFERENCE_SERVICE, self._on_service)
        cache.subscribe(MODEL, self._on_model)
        cache.subscribe(GPU_QUOTA, self._on_quota)

    # -- reads ---------------------------------------------------------------------

    def allocations(self, namespace: str) -> NamespaceQuota:
        scope = self.scopes.get(namespace)
        return scope.view if scope is not None else NamespaceQuota({}, {})

    def quotas_over(self, namespace: str) -> list[tuple[str, str]]:
        """(namespace, name) of the valid quotas covering this namespace."""
        scope = self.scopes.get(namespace)
        return [object_key(q) for q, _ in scope.quotas.values()] if scope else []

    def changes_for(self, event: Event) -> frozenset[tuple[str, str]]:
        """What the event being dispatched changed (empty for any other event)."""
        seen, changed = self._last
        return changed if seen is event else _NOTHING

    # -- events --------------------------------------------------------------------

    def _record(self, event: Event, ns: str, names: set[str]) -> None:
        self._last = (event, frozenset((ns, n) for n in names) if names else _NOTHING)

    def _guarded(self, event: Event, ns: str, work: Any) -> None:
        """Run work() -> changed names; a failure rebuilds the namespace from the cache."""
        try:
            changed: set[str] = work()
        except Exception:
            log.exception("quota index update failed, rebuilding", namespace=ns)
            scope = self.scopes.get(ns)
            changed = set(scope.allocations) if scope is not None else set()
            changed |= self._rebuild(ns)
        self._record(event, ns, changed)

    def _on_service(self, event: Event) -> None:
        ns, name = object_key(event.obj)
        scope = self.scopes.get(ns)
        if scope is None:
            self._last = (event, _NOTHING)
            return

        def work() -> set[str]:
            self.demands_computed += 1
            isvc = None if event.type == DELETED else self.cache.get(INFERENCE_SERVICE, ns, name)
            scope.set_model(name, (isvc.get("spec") or {}).get("modelRef") if isvc else None)
            demand = demand_for(self.cache, isvc, scope.quotas) if isvc else None
            return scope.update({name: demand})

        self._guarded(event, ns, work)

    def _on_model(self, event: Event) -> None:
        ns, name = object_key(event.obj)
        scope = self.scopes.get(ns)
        if scope is None or name not in scope.users or _same_spec(event):
            # A Model counts by its spec alone (its own status echo moves nothing).
            self._last = (event, _NOTHING)
            return

        def work() -> set[str]:
            updates: dict[str, Demand | None] = {}
            for service in sorted(scope.users[name]):
                self.demands_computed += 1
                isvc = self.cache.get(INFERENCE_SERVICE, ns, service)
                updates[service] = demand_for(self.cache, isvc, scope.quotas) if isvc else None
            return scope.update(updates)

        self._guarded(event, ns, work)

    def _on_quota(self, event: Event) -> None:
        key = quota_key(event.obj)
        affected = {self.quota_scopes.pop(key, None)}
        if event.type != DELETED:
            affected.add(self._note_quota(event.obj))
        changed: set[tuple[str, str]] = set()
        for ns in sorted(a for a in affected if a is not None):
            scope = self.scopes.get(ns)
            if scope is not None and scope.same_quotas(quotas_for(self.cache, ns)):
                continue  # its status, or a change that moves nothing
            before = set(scope.allocations) if scope is not None else set()
            after = self._rebuild(ns)
            changed |= {(ns, n) for n in before | after}
        self._last = (event, frozenset(changed))

    def _note_quota(self, quota: Obj) -> str | None:
        try:
            spec = self.cache.parsed(GPU_QUOTA, quota, parse_gpu_quota)
        except InvalidSpec:
            return None
        scope = quota_scope(quota, spec)
        self.quota_scopes[quota_key(quota)] = scope
        return scope

    def _rebuild(self, ns: str) -> set[str]:
        """The namespace's state from scratch; the services it admits (all changed)."""
        self.rebuilds += 1
        self.scopes.pop(ns, None)
        quotas = quotas_for(self.cache, ns)
        if not quotas:
            return set()
        scope = _Scope(quotas)
        updates: dict[str, Demand | None] = {}
        for isvc in self.cache.list(INFERENCE_SERVICE, ns):
            name = isvc["metadata"]["name"]
            scope.set_model(name, (isvc.get("spec") or {}).get("modelRef"))
            updates[name] = demand_for(self.cache, isvc, quotas)
        scope.update(updates)
        self.scopes[ns] = scope
        return set(scope.allocations)
