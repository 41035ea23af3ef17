"""GPUQuota coverage and admission, kept up to date from the cache's events.

Coverage, as LLMKube's gpuquota_controller: a GPUQuota covers the InferenceServices of
`spec.namespaceRef`, or, with `spec.selector`, those of every namespace whose Namespace
labels match (wherever the quota lives). A selector quota can thus span namespaces,
and its gpuCount is shared by all of them: the unit the rule (rule.py) runs
over is a *group*, the namespaces linked by the quotas covering them (most often one
namespace under its namespaceRef quotas).

`QuotaIndex` keeps the rule's answer in linear time: each spec is parsed once per
generation (the cache's parse memo), each group keeps its services in admission order
with what was left before each one's turn, and a change re-admits from the changed
service's place only until the leftovers are again what they were. A quota or a
Namespace label change regroups the namespaces it touches; a group whose quotas are
unchanged is kept and only the services whose coverage moved are re-read. It records
which services' admission and which quotas' coverage changed, so that only those are
reconciled again (`admission_changes`, `quota_changes`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
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
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE, MODEL, NAMESPACE, object_key
from objtypes import Obj
from reconcilers.quota.rule import (
    Allocation,
    Demand,
    Key,
    NamespaceQuota,
    admit,
    allocate,
    allocated_totals,
    charge_per_replica,
    consume,
    floors_of,
    limits_of,
    served_by_claims,
    vram_per_replica,
)

Quotas = dict[str, tuple[Obj, GPUQuotaSpec]]  # quota key -> (object, spec)
log = structlog.get_logger("quota")


def quota_key(quota: Obj) -> str:
    return f"{quota['metadata'].get('namespace', '')}/{quota['metadata']['name']}"


def valid_quotas(cache: Cache) -> Quotas:
    """Every GPUQuota whose spec is valid (an invalid one reports itself; it limits nothing)."""
    found = {}
    for quota in cache.list(GPU_QUOTA):
        try:
            found[quota_key(quota)] = (quota, cache.parsed(GPU_QUOTA, quota, parse_gpu_quota))
        except InvalidSpec:
            continue
    return found


def namespace_labels(cache: Cache, namespace: str) -> dict[str, str] | None:
    """The Namespace's labels; None when the cache holds no such Namespace."""
    obj = cache.get(NAMESPACE, "", namespace)
    return None if obj is None else dict(obj["metadata"].get("labels") or {})


def coverage(cache: Cache, spec: GPUQuotaSpec) -> frozenset[str]:
    """The namespaces a quota covers now."""
    if spec.namespace_ref is not None:
        return frozenset({spec.namespace_ref})
    return frozenset(
        ns["metadata"]["name"]
        for ns in cache.list(NAMESPACE)
        if spec.covers(ns["metadata"]["name"], ns["metadata"].get("labels") or {})
    )


def groups(covers: Mapping[str, frozenset[str]], seeds: Iterable[str]) -> list[set[str]]:
    """The connected groups of namespaces reached from seeds, through shared quotas."""
    quotas_of: dict[str, set[str]] = {}
    for key, namespaces in covers.items():
        for ns in namespaces:
            quotas_of.setdefault(ns, set()).add(key)
    found: list[set[str]] = []
    seen: set[str] = set()
    for seed in sorted(seeds):
        if seed in seen:
            continue
        group, todo = set(), [seed]
        while todo:
            ns = todo.pop()
            if ns in group:
                continue
            group.add(ns)
            for key in quotas_of.get(ns, ()):
                todo.extend(covers[key] - group)
        seen |= group
        found.append(group)
    return found


def demand_for(cache: Cache, isvc: Obj, covering: tuple[str, ...]) -> Demand | None:
    """What a valid InferenceService with a valid Model asks for, under these quotas."""
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
    charge = charge_per_replica(isvc, model, service)
    return Demand(
        meta["name"],
        str(meta.get("creationTimestamp", "")),
        service.wanted_replicas,
        charge,
        covering,
        allocated_totals(isvc)[0] if served_by_claims(isvc, model) else 0,
        namespace,
        vram_per_replica=vram_per_replica(model, service, charge),
        priority=service.priority,
    )


def recomputed_allocations(cache: Cache, namespace: str) -> NamespaceQuota:
    """namespace_allocations computed from scratch: the reference the index must match."""
    quotas = valid_quotas(cache)
    covers = {key: coverage(cache, spec) for key, (_, spec) in quotas.items()}
    group = groups(covers, [namespace])[0]
    over = {key for key, namespaces in covers.items() if namespaces & group}
    if not over:
        return NamespaceQuota({}, {})
    specs = {key: quotas[key][1] for key in over}
    limits = limits_of(specs)
    demands = []
    for ns in group:
        covering = tuple(sorted(k for k in over if ns in covers[k]))
        for isvc in cache.list(INFERENCE_SERVICE, ns):
            demand = demand_for(cache, isvc, covering)
            if demand is not None:
                demands.append(demand)
    allocations = allocate(limits, demands, floors_of(specs))
    return NamespaceQuota(limits, {n: a for (ns, n), a in allocations.items() if ns == namespace})


def namespace_allocations(cache: Cache, namespace: str) -> NamespaceQuota:
    """The quotas over this namespace and what each service is admitted (read-only).

    Without a GPUQuota every service is admitted in full: nothing is kept for such a
    namespace, and its services and Models are not parsed for this.
    """
    return quota_index(cache).allocations(namespace)


def admission_changes(cache: Cache, event: Event) -> frozenset[Key]:
    """(namespace, name) of the services whose admission this event changed."""
    return quota_index(cache).changes_for(event)


def quota_index(cache: Cache) -> QuotaIndex:
    return cache.extension("gpuquota", QuotaIndex)


_NOTHING: frozenset[Any] = frozenset()


def _same_spec(event: Event) -> bool:
    """An update that left spec alone (a status write, a label...)."""
    old = event.old
    return event.type != DELETED and old is not None and old.get("spec") == event.obj.get("spec")


def _labels(obj: Obj | None) -> dict[str, str] | None:
    return None if obj is None else dict(obj.get("metadata", {}).get("labels") or {})


class _Scope:
    """One group of namespaces under the same quotas: its services in admission order,
    what was left under each quota before each one's turn, and what each is admitted."""

    def __init__(self, quotas: Quotas, covering: dict[str, tuple[str, ...]]) -> None:
        self.quotas = quotas
        self.covering = covering  # namespace -> keys of the quotas covering it
        specs = {key: spec for key, (_, spec) in quotas.items()}
        self.limits = limits_of(specs)  # GPU and VRAM budgets
        self.floors = floors_of(specs)  # minPriority weights
        self.keys = tuple(sorted(self.limits))
        self.order: list[tuple[str, str, str]] = []  # Demand.turn
        self.demands: dict[Key, Demand] = {}
        self.before: dict[Key, tuple[int, ...]] = {}  # leftovers, in `keys` order
        self.allocations: dict[Key, Allocation] = {}
        self.by_namespace: dict[str, dict[str, Allocation]] = {ns: {} for ns in covering}
        self.model_of: dict[Key, str] = {}  # service -> spec.modelRef, also without a demand
        self.users: dict[Key, set[Key]] = {}  # (namespace, model) -> services naming it

    def view(self, namespace: str) -> NamespaceQuota:
        return NamespaceQuota(self.limits, self.by_namespace.setdefault(namespace, {}))

    def same_quotas(self, quotas: Quotas) -> bool:
        return {k: s for k, (_, s) in quotas.items()} == {k: s for k, (_, s) in self.quotas.items()}

    def set_model(self, key: Key, ref: Any) -> None:
        old = self.model_of.pop(key, None)
        if old is not None:
            users = self.users[key[0], old]
            users.discard(key)
            if not users:
                del self.users[key[0], old]
        if isinstance(ref, str):
            self.model_of[key] = ref
            self.users.setdefault((key[0], ref), set()).add(key)

    def forget(self, namespace: str) -> list[Key]:
        """Drop a namespace's bookkeeping; its services, for update() to withdraw."""
        self.covering.pop(namespace, None)
        self.by_namespace.pop(namespace, None)
        keys = [k for k in self.model_of if k[0] == namespace]
        for key in keys:
            self.set_model(key, None)
        return [k for k in self.demands if k[0] == namespace]

    def _set(self, key: Key, allocation: Allocation | None) -> None:
        by_ns = self.by_namespace.setdefault(key[0], {})
        if allocation is None:
            self.allocations.pop(key, None)
            by_ns.pop(key[1], None)
        else:
            self.allocations[key] = allocation
            by_ns[key[1]] = allocation

    def _position(self, turn: tuple[str, str, str]) -> int:
        return bisect.bisect_left(self.order, turn)

    def _leftovers_before(self, position: int) -> dict[str, int]:
        if position == 0:
            return dict(self.limits)
        _, ns, name = self.order[position - 1]
        prev = self.allocations[ns, name]
        left = dict(zip(self.keys, self.before[ns, name], strict=True))
        consume(left, prev)
        return left

    def update(self, updates: Mapping[Key, Demand | None]) -> set[Key]:
        """Apply new demands (None: no demand); the services whose allocation changed."""
        present: list[Demand] = []
        removed: list[Key] = []  # demands withdrawn
        replaced: list[tuple[str, str, str]] = []  # where every old demand stood
        start = len(self.order)
        for key, demand in updates.items():
            old = self.demands.get(key)
            if old == demand:
                continue
            if old is not None:
                i = self._position(old.turn)
                del self.order[i]
                del self.demands[key]
                start = min(start, i)
                replaced.append(old.turn)
                if demand is None:
                    removed.append(key)
            if demand is not None:
                i = self._position(demand.turn)
                self.order.insert(i, demand.turn)
                self.demands[key] = demand
                start = min(start, i)
                present.append(demand)
        changed: set[Key] = set()
        for key in removed:
            self.before.pop(key, None)
            if key in self.allocations:
                self._set(key, None)
                changed.add(key)
        if not present and not removed:
            return changed
        # Past every changed place (new and old), a service whose leftovers are what
        # they were is admitted as before, and so is everyone after it: stop there.
        stop_from = max(
            [self._position(d.turn) + 1 for d in present]
            + [self._position(turn) for turn in replaced]
        )
        left = self._leftovers_before(start)
        for i in range(start, len(self.order)):
            _, ns, name = self.order[i]
            key = (ns, name)
            snapshot = tuple(left[k] for k in self.keys)
            if i >= stop_from and self.before.get(key) == snapshot:
                break
            self.before[key] = snapshot
            allocation = admit(self.demands[key], left, self.floors)
            if self.allocations.get(key) != allocation:
                self._set(key, allocation)
                changed.add(key)
        return changed


class QuotaIndex:
    """namespace_allocations for every namespace under a GPUQuota, kept from the
    cache's events (it subscribes to InferenceServices, Models, GPUQuotas and
    Namespaces)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.scopes: dict[str, _Scope] = {}  # namespace -> its group's scope
        self.quotas: Quotas = {}  # the valid quotas
        self.covers: dict[str, frozenset[str]] = {}  # quota key -> namespaces it covers
        self._last: tuple[Event | None, frozenset[Key], frozenset[str]] = (None, _NOTHING, _NOTHING)
        self.rebuilds = 0  # groups built from scratch; tests and metrics read it
        self.demands_computed = 0  # services re-read after an event (not counting rebuilds)
        self.quotas = valid_quotas(cache)
        self.covers = {key: coverage(cache, spec) for key, (_, spec) in self.quotas.items()}
        self._regroup(set().union(*self.covers.values()))
        cache.subscribe(INFERENCE_SERVICE, self._on_service)
        cache.subscribe(MODEL, self._on_model)
        cache.subscribe(GPU_QUOTA, self._on_quota)
        cache.subscribe(NAMESPACE, self._on_namespace)

    # -- reads ---------------------------------------------------------------------

    def allocations(self, namespace: str) -> NamespaceQuota:
        scope = self.scopes.get(namespace)
        return scope.view(namespace) if scope is not None else NamespaceQuota({}, {})

    def quotas_over(self, namespace: str) -> list[tuple[str, str]]:
        """(namespace, name) of the valid quotas of this namespace's group."""
        scope = self.scopes.get(namespace)
        return [object_key(q) for q, _ in scope.quotas.values()] if scope else []

    def quota_allocations(self, key: str) -> list[Allocation]:
        """The allocations of the services a quota covers, by namespace and name."""
        namespaces = self.covers.get(key, _NOTHING)
        scope = next((self.scopes[ns] for ns in namespaces if ns in self.scopes), None)
        if scope is None:
            return []
        return [
            scope.allocations[k]
            for k in sorted(scope.allocations)
            if key in scope.allocations[k].quotas
        ]

    def changes_for(self, event: Event) -> frozenset[Key]:
        """What the event being dispatched changed (empty for any other event)."""
        seen, changed, _ = self._last
        return changed if seen is event else _NOTHING

    def quota_changes(self, event: Event) -> frozenset[str]:
        """Keys of the quotas whose coverage or group the event being dispatched changed."""
        seen, _, quotas = self._last
        return quotas if seen is event else _NOTHING

    # -- events --------------------------------------------------------------------

    def _record(
        self, event: Event, changed: Iterable[Key], quotas: Iterable[str] = _NOTHING
    ) -> None:
        self._last = (event, frozenset(changed) or _NOTHING, frozenset(quotas) or _NOTHING)

    def _guarded(self, event: Event, ns: str, work: Callable[[], set[Key]]) -> None:
        """Run work() -> changed services; a failure rebuilds the namespace's group."""
        try:
            changed = work()
        except Exception:
            log.exception("quota index update failed, rebuilding", namespace=ns)
            changed = set()
            scope = self.scopes.get(ns)
            if scope is not None:
                changed |= set(scope.allocations)
                for member in list(scope.covering):
                    del self.scopes[member]  # gone from the map: rebuilt, not kept
                changed |= self._regroup(set(scope.covering))[0]
        self._record(event, changed)

    def _on_service(self, event: Event) -> None:
        ns, name = object_key(event.obj)
        scope = self.scopes.get(ns)
        if scope is None:
            self._record(event, ())
            return

        def work() -> set[Key]:
            self.demands_computed += 1
            isvc = None if event.type == DELETED else self.cache.get(INFERENCE_SERVICE, ns, name)
            scope.set_model((ns, name), (isvc.get("spec") or {}).get("modelRef") if isvc else None)
            covering = scope.covering.get(ns, ())
            demand = demand_for(self.cache, isvc, covering) if isvc else None
            return scope.update({(ns, name): demand})

        self._guarded(event, ns, work)

    def _on_model(self, event: Event) -> None:
        ns, name = object_key(event.obj)
        scope = self.scopes.get(ns)
        if scope is None or (ns, name) not in scope.users or _same_spec(event):
            # A Model counts by its spec alone (its own status echo moves nothing).
            self._record(event, ())
            return

        def work() -> set[Key]:
            updates: dict[Key, Demand | None] = {}
            for key in sorted(scope.users[ns, name]):
                self.demands_computed += 1
                isvc = self.cache.get(INFERENCE_SERVICE, *key)
                covering = scope.covering.get(ns, ())
                updates[key] = demand_for(self.cache, isvc, covering) if isvc else None
            return scope.update(updates)

        self._guarded(event, ns, work)

    def _on_quota(self, event: Event) -> None:
        key = quota_key(event.obj)
        if _same_spec(event):  # its status, or a label: coverage and limit are as they were
            if key in self.quotas:
                self.quotas[key] = (event.obj, self.quotas[key][1])
            self._record(event, ())
            return
        seeds = set(self.covers.pop(key, _NOTHING))
        self.quotas.pop(key, None)
        if event.type != DELETED:
            try:
                spec = self.cache.parsed(GPU_QUOTA, event.obj, parse_gpu_quota)
            except InvalidSpec:
                spec = None
            if spec is not None:
                self.quotas[key] = (event.obj, spec)
                self.covers[key] = coverage(self.cache, spec)
                seeds |= self.covers[key]
        changed, quotas = self._regroup(seeds)
        self._record(event, changed, quotas)

    def _on_namespace(self, event: Event) -> None:
        ns = object_key(event.obj)[1]
        labels = None if event.type == DELETED else _labels(event.obj)
        old = _labels(event.old) if event.type != "ADDED" else None
        if event.type != DELETED and event.old is not None and labels == old:
            self._record(event, ())  # a status or annotation change
            return
        moved = False
        for key, (_, spec) in self.quotas.items():
            if spec.selector is None:
                continue
            now = spec.covers(ns, labels)
            if now != (ns in self.covers[key]):
                self.covers[key] = self.covers[key] | {ns} if now else self.covers[key] - {ns}
                moved = True
        if not moved:
            self._record(event, ())
            return
        changed, quotas = self._regroup({ns})
        self._record(event, changed, quotas)

    # -- groups --------------------------------------------------------------------

    def _regroup(self, seeds: set[str]) -> tuple[set[Key], set[str]]:
        """Rebuild the groups of the seed namespaces (and of the groups they were in)
        from `covers`; the services whose allocation changed, and the quotas of every
        group that changed."""
        region = set(seeds)
        for ns in seeds:
            scope = self.scopes.get(ns)
            if scope is not None:
                region |= scope.covering.keys()
        found = groups(self.covers, region)
        old = {id(s): s for ns in set().union(*found) if (s := self.scopes.get(ns))}
        changed: set[Key] = set()
        touched: set[str] = set()
        reused: set[int] = set()
        for group in found:
            for ns in group:
                self.scopes.pop(ns, None)
            over = {k for k, namespaces in self.covers.items() if namespaces & group}
            if not over:
                continue
            covering = {ns: tuple(sorted(k for k in over if ns in self.covers[k])) for ns in group}
            quotas = {k: self.quotas[k] for k in over}
            keep = next(
                (
                    s
                    for i, s in old.items()
                    if i not in reused and s.same_quotas(quotas) and s.covering.keys() & group
                ),
                None,
            )
            if keep is not None:
                reused.add(id(keep))
                refitted, moved = self._refit(keep, quotas, covering)
                changed |= refitted
                if moved:
                    touched |= set(quotas)
                scope = keep
            else:
                scope = self._build(quotas, covering)
                changed |= set(scope.allocations)
                touched |= set(quotas)
            for ns in group:
                self.scopes[ns] = scope
        for i, s in old.items():
            if i not in reused:
                changed |= set(s.allocations)
                touched |= set(s.quotas)
        return changed, touched

    def _refit(
        self, scope: _Scope, quotas: Quotas, covering: dict[str, tuple[str, ...]]
    ) -> tuple[set[Key], bool]:
        """Keep a group whose quotas are unchanged: re-read only the services of the
        namespaces that joined it, left it, or are now covered by other quotas. The
        services whose allocation changed; whether any namespace moved."""
        scope.quotas = quotas
        updates: dict[Key, Demand | None] = {}
        left = [ns for ns in scope.covering if ns not in covering]
        for ns in left:
            updates.update(dict.fromkeys(scope.forget(ns)))
        moved = bool(left)
        for ns, keys in covering.items():
            if scope.covering.get(ns) == keys:
                continue
            moved = True
            scope.covering[ns] = keys
            for isvc in self.cache.list(INFERENCE_SERVICE, ns):
                key = object_key(isvc)
                self.demands_computed += 1
                scope.set_model(key, (isvc.get("spec") or {}).get("modelRef"))
                updates[key] = demand_for(self.cache, isvc, keys)
        changed = scope.update(updates)
        for ns in left:
            scope.by_namespace.pop(ns, None)
        return changed, moved

    def _build(self, quotas: Quotas, covering: dict[str, tuple[str, ...]]) -> _Scope:
        """A group's state from scratch."""
        self.rebuilds += 1
        scope = _Scope(quotas, covering)
        updates: dict[Key, Demand | None] = {}
        for ns, keys in covering.items():
            for isvc in self.cache.list(INFERENCE_SERVICE, ns):
                key = object_key(isvc)
                scope.set_model(key, (isvc.get("spec") or {}).get("modelRef"))
                updates[key] = demand_for(self.cache, isvc, keys)
        scope.update(updates)
        return scope
