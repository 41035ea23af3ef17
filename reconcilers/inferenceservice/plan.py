"""What an InferenceService should run, decided before anything is written.

`observe` reads what the decision needs from the cache (the quota's admission, the
devices the Model's claims ask for, DeviceClasses, templates); `plan` is pure over
that: the replicas admitted and what each is charged, the runtime command, the devices
the runtime is sized for, and every condition known before the workload is applied.
A plan with `refused` problems writes nothing: a running workload is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from api import InferenceServiceSpec, ModelSpec, gpu_count
from api import conditions as c
from controller.cache import Cache
from controller.resources import DEPLOYMENT, object_key
from objtypes import Obj
from reconcilers.devices import dra, managed, selectors
from reconcilers.devices.kueue import kueue_status, queue_name
from reconcilers.devices.lookup import (
    claim_shortfalls,
    device_classes,
    model_demand,
    plugin_nodes,
    resource_slices,
    templates,
)
from reconcilers.devices.managed import ManagedClaims, Refused
from reconcilers.devices.taints import Taint
from reconcilers.inferenceservice.advice import advisories
from reconcilers.inferenceservice.scope import decide
from reconcilers.quota.index import namespace_allocations
from reconcilers.quota.rule import MIN_PRIORITY, VRAM_BYTES, Allocation, replica_charge
from reconcilers.settings import Settings
from reconcilers.sources.cache_claim import store_for
from reconcilers.sources.loader import WeightsVolume
from reconcilers.sources.placement import Placement, runtime_mounts
from reconcilers.writes.conditions import Condition
from runtimes.command import RuntimeCommand
from runtimes.gpu import DEFAULT_RESOURCE_NAMES, device_plugin_resource
from runtimes.problems import Problem, runtime_problems

RuleTaints = Mapping[tuple[str, str, str], tuple[Taint, ...]]

# The devices per pod a Deployment's runtime was sized for from the claims (count absent).
CLAIMED_ANNOTATION = "inference.llmkube.dev/claimed-devices"


@dataclass(frozen=True)
class Facts:
    """What the plan reads of the cluster, from the cache."""

    allocation: Allocation | None  # the GPUQuota's answer; None: no quota covers it
    limit: int | None  # the tightest gpuCount over the service
    demand: dra.DeviceDemand | None  # per pod, from the claims (None: no claims)
    extended_class: str | None  # the DeviceClass serving the vendor resource (KEP-5004)
    templates: Mapping[str, Obj] = field(default_factory=dict)  # for Kueue's verdict
    managed: ManagedClaims | None = None  # the template made for the service, if any
    # Why no published device could serve the pods' claims (explain.py), if so.
    shortfalls: tuple[str, ...] = ()
    rule_taints: RuleTaints = field(default_factory=dict)  # the DeviceTaintRules' taints


def observe_managed(
    cache: Cache, isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, settings: Settings
) -> ManagedClaims | Refused | None:
    """The claims made for the user (reconcilers/devices/managed.py), from the cache."""
    if not settings.managed_claims:
        return None
    if not managed.applies(isvc, service, model, queue_name(isvc) is not None):
        return None
    classes = device_classes(cache)
    resource = device_plugin_resource(model, service)
    # The published devices are read only for a shared GPU (is one shareable, its memory).
    shared = service.sharing.mode == "shared"
    cluster = managed.Cluster(
        classes,
        plugin_nodes(cache, resource),
        dra.extended_resource_class(classes, resource),
        tuple(selectors.devices(resource_slices(cache))) if shared else (),
    )
    return managed.decide(isvc, service, model, cluster, settings.dra_device_class)


def observe(
    cache: Cache,
    isvc: Obj,
    service: InferenceServiceSpec,
    model: ModelSpec,
    missing: list[str],
    made: ManagedClaims | None = None,
    rule_taints: RuleTaints | None = None,
) -> Facts:
    """made: the managed claims the service is served with (model is then served on
    them): their demand is the template's own, written in this reconcile. rule_taints:
    the DeviceTaintRules' taints, read when a pod is pending or departing."""
    ns, name = object_key(isvc)
    nq = namespace_allocations(cache, ns)
    allocation = nq.allocations.get(name)
    demand = model_demand(cache, ns, model) if model.uses_claims else None
    if made is not None:
        demand = dra.pod_demand([made.template])
    if demand is not None and missing:
        # A claim or template vanished under running pods: keep the size they run
        # with, or the Deployment would restart them into pods that cannot start.
        demand = _kept_demand(cache.get(DEPLOYMENT, ns, name), demand)
    resource = DEFAULT_RESOURCE_NAMES.get(model.gpu.vendor, "nvidia.com/gpu")
    return Facts(
        allocation,
        nq.limit_for(allocation),
        demand,
        dra.extended_resource_class(device_classes(cache), resource),
        templates(cache, ns, model) if queue_name(isvc) is not None else {},
        made,
        tuple(
            claim_shortfalls(cache, ns, model, made.template if made else None, rule_taints)
            if model.uses_claims
            else ()
        ),
        rule_taints or {},
    )


@dataclass(frozen=True)
class Plan:
    admitted: int  # replicas the quota admits (all wanted without one)
    per_replica: int  # what one replica is charged (the quota's charge when one covers it)
    claimed: int | None  # devices per pod the runtime is sized for from the claims
    demand: dra.DeviceDemand | None
    command: RuntimeCommand
    placement: Placement  # the model argument, its volumes and loader; .store: where it writes
    queue: str | None  # Kueue's queue name
    conditions: tuple[Condition, ...]  # decided before any write
    refused: tuple[Problem, ...] = ()  # the runtime could not serve: write nothing
    kueue: Obj | None = None  # status.kueue
    managed: ManagedClaims | None = None  # the template to apply before the workload
    shortfalls: tuple[str, ...] = ()  # told beside the scheduler's word on a pending pod
    rule_taints: RuleTaints = field(default_factory=dict)  # beside the slices', for evictions

    @property
    def store(self) -> WeightsVolume:
        """Where the loader writes the model (the cache claim, or the pod's emptyDir)."""
        return self.placement.store


def plan(
    isvc: Obj,
    service: InferenceServiceSpec,
    model: ModelSpec,
    missing: list[str],
    facts: Facts,
    settings: Settings,
) -> Plan:
    """settings: the operator's (Kueue's mappings, the host-path roots a Model source
    may come from, the model cache)."""
    allocation, demand = facts.allocation, facts.demand
    admitted = allocation.admitted_replicas if allocation else service.wanted_replicas
    # Under a quota, what it charges (DRA's allocation may differ from the count).
    per_replica = allocation.gpus_per_replica if allocation else replica_charge(model, service)
    # count sizes the runtime up to the devices the claims give per pod (gpu.sized_devices).
    claimed = (demand.total or None) if demand is not None else None
    resolved = Condition(
        c.MODEL_RESOLVED,
        True,
        c.RESOLVED,
        f"Model {service.model_ref!r} is valid and its accelerator is ready",
    )
    # What the runtime's parser cannot see (parallelism vs the GPUs a pod gets, model
    # form, image): refused before any workload is written. Built once: checked here,
    # and the Deployment's pods run this same command.
    store = store_for(isvc, service, model, settings.model_cache)
    images = settings.runtime_images
    placement, command = decide(
        service,
        model,
        claimed,
        settings.allowed_host_path_roots,
        store,
        settings.hf_endpoint,
        images,
    )
    mounts = runtime_mounts(placement, service)
    problems = runtime_problems(service, model, placement.arg, claimed, command, mounts, images)
    if service.multi_node is not None and facts.extended_class and not model.uses_claims:
        problems.insert(0, _multi_node_via_dra(model, facts.extended_class))
    queue = queue_name(isvc)
    if problems:
        message = "; ".join(p.message for p in problems)
        reason = problems[0].reason
        refused = (
            resolved,
            Condition(c.RUNTIME_CONFIGURED, False, reason, message),
            Condition(c.READY, False, reason, message),
        )
        return Plan(
            admitted,
            per_replica,
            claimed,
            demand,
            command,
            placement,
            queue,
            refused,
            (*problems,),
        )
    conditions = [
        resolved,
        Condition(
            c.RUNTIME_CONFIGURED,
            True,
            c.ARGV_VALID,
            f"{service.runtime} argv, image and model form fit the GPUs a pod gets",
        ),
        quota_condition(service, facts.limit, admitted, per_replica, facts.allocation),
        suspended_condition(service),
    ]
    if facts.managed is not None:
        conditions.append(managed_condition(facts.managed))
    elif demand is not None:
        conditions.append(claims_condition(service.model_ref, missing))
        conditions.append(device_count_condition(gpu_count(model, service.gpu), demand, missing))
    conditions += advisories(isvc, service, model, facts.extended_class)
    kueue_fields = None
    if queue is not None:
        kueue_condition, kueue_fields = kueue_status(
            queue,
            model,
            [ref.pod_entry() for ref in model.gpu.claims],
            facts.templates,
            demand or dra.DeviceDemand(),
            admitted,
            settings.kueue,
            facts.extended_class,
            multi_node=service.multi_node is not None,
        )
        conditions.append(kueue_condition)
    return Plan(
        admitted,
        per_replica,
        claimed,
        demand,
        command,
        placement,
        queue,
        (*conditions,),
        (),
        kueue_fields,
        facts.managed,
        facts.shortfalls,
        facts.rule_taints,
    )


# -- the conditions decided here ---------------------------------------------------------


def quota_condition(
    service: InferenceServiceSpec,
    limit: int | None,
    admitted: int,
    per_replica: int,
    allocation: Allocation | None = None,
) -> Condition:
    wanted = service.wanted_replicas
    if limit is None:
        return Condition(c.QUOTA_ADMITTED, True, c.NO_QUOTA, "no GPUQuota covers this service")
    held_by = allocation.held_by if allocation is not None else ""
    if admitted < wanted and held_by == MIN_PRIORITY:
        return Condition(
            c.QUOTA_ADMITTED,
            False,
            c.BELOW_MIN_PRIORITY,
            f"spec.priority {service.priority!r} is below a covering GPUQuota's minPriority: "
            f"0 of {wanted} replicas admitted",
        )
    if admitted < wanted and held_by == VRAM_BYTES and allocation is not None:
        return Condition(
            c.QUOTA_ADMITTED,
            False,
            c.QUOTA_EXCEEDED,
            f"GPUQuota vramBytes: {admitted} of {wanted} replicas admitted at "
            f"{allocation.vram_per_replica} bytes of GPU memory each "
            f"({_vram_source(service, per_replica)})",
        )
    if admitted < wanted:
        return Condition(
            c.QUOTA_ADMITTED,
            False,
            c.QUOTA_EXCEEDED,
            f"GPUQuota limit {limit} GPUs: {admitted} of {wanted} replicas "
            f"admitted at {per_replica} GPU(s) each",
        )
    return Condition(
        c.QUOTA_ADMITTED,
        True,
        c.WITHIN_QUOTA,
        f"{wanted} replica(s) at {per_replica} GPU(s) each within the GPUQuota limit of {limit}",
    )


def _vram_source(service: InferenceServiceSpec, per_replica: int) -> str:
    """Where a replica's VRAM charge comes from (reconcilers/quota_rule.vram_per_replica)."""
    if service.sharing.mode == "shared" and service.sharing.memory_limit_gib:
        return "spec.resources.gpuSharing.memoryLimitGiB"
    return f"the Model's hardware.gpu.memory x {per_replica} GPU(s)"


def suspended_condition(service: InferenceServiceSpec) -> Condition:
    if service.suspend:
        return Condition(c.SUSPENDED, True, c.SUSPENDED, "spec.suspend: scaled to zero")
    return Condition(c.SUSPENDED, False, c.NOT_SUSPENDED, "spec.suspend is not set")


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


def managed_condition(made: ManagedClaims) -> Condition:
    """DeviceCount for claims made for the user: what was made, and why."""
    return Condition(
        c.DEVICE_COUNT,
        True,
        c.MANAGED_CLAIMS,
        f"the Model names no resourceClaims and no node advertises the device-plugin "
        f"resource: the controller made {made.describe()}; the runtime is sized for "
        f"{made.count} device(s) (explicit tensorParallelSize or extraArgs still win)",
    )


def claims_condition(model_ref: str, missing: list[str]) -> Condition:
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


def device_count_condition(
    count: int, demand: dra.DeviceDemand, missing: list[str] | None = None
) -> Condition:
    """How the runtime is sized against what the claims ask for (gpu.sized_devices)."""
    if missing:
        if count and demand.total and demand.total < count:
            kept = f"kept at the {demand.total} device(s) its pods get"
        elif count:
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
