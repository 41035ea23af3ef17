"""Claims made for the user: a ResourceClaimTemplate the InferenceService reconciler
creates and owns when the Model asks for GPUs without naming claims and the vendor's GPUs
are reachable only through DRA.

The path is taken when, at the reconcile:
- the Model names no resourceClaims and asks for GPUs (count, or gpu.enabled);
- the operator has not turned it off (--managed-dra-claims=false);
- the service is an ordinary one: not multiNode (members are pinned with nodeName, which
  bypasses DRA), not Kueue-managed (Kueue's verdict is reconcilers/devices/kueue.py's);
- no node advertises the device-plugin resource the service would otherwise get in
  status.allocatable (the vendor's, its time-sliced `.shared` one, or `mig-<profile>`);
- no DeviceClass serves that resource through DRA (KEP-5004 extendedResourceName: then the
  scheduler serves the device-plugin request itself, and it stays as it is);
- a DeviceClass for the vendor exists: the one the service's
  `inference.llmkube.dev/dra-device-class` annotation names, else --dra-device-class,
  else the vendor's (gpu.nvidia.com, gpu.amd.com, gpu.intel.com). A class named by the
  annotation or the flag that does not exist is refused, naming it; the vendor's default
  missing leaves the device-plugin request (a cluster autoscaler may add plugin nodes).

The template asks for `count` devices (LLMKube's GPU count, at least 1) of the class in
one request, ExactCount, with one CEL selector per requirement: the Model's
hardware.gpu.memory as the device's `memory` capacity at least that much, and each line
of the `inference.llmkube.dev/dra-cel-selector` annotation (ANDed). Its name carries a
digest of its spec, so a changed Model gets a new template and running pods are never
left on one that no longer matches; the reconciler deletes the older ones once no pod of
the service uses them.

gpuSharing is served the DRA way on this path (the device-plugin path keeps the shared and
MIG resources):
- `shared` with `memoryLimitGiB`: the request asks for that much of the device's `memory`
  capacity (`capacity.requests`, KEP-5075 consumable capacity) on a device that allows
  multiple allocations, so the scheduler places several services on one GPU, each within
  its budget. Without a shareable device published for the class, or without
  memoryLimitGiB, the service is refused, saying which. vLLM, SGLang and TGI preallocate
  a fraction of the whole device: that fraction is memoryLimitGiB over the memory of the
  devices the request can get (one size; several sizes are refused unless the user set
  the runtime's own fraction), and an explicit setting or extraArgs flag still wins.
- `partitioned` with `profile`: `count` partition devices (KEP-4815) of the vendor's
  partition class (`mig.nvidia.com`; the annotation may name another) whose `profile`
  attribute is that profile; the partitions of one GPU draw on its shared counters, so the
  scheduler never over-commits it.
Pure: the cache-reading side is lookup.py's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from api import ClaimRef, InferenceServiceSpec, ModelSpec, gpu_count, has_gpu
from api import conditions as c
from controller.informer import ADDED, DELETED, Event
from objtypes import Obj
from reconcilers.devices.selectors import Device, SelectorError, matches, quantity_value
from reconcilers.ownership import owned_metadata
from runtimes.spellings import normalize_user_args, user_args

DEVICE_CLASS_ANNOTATION = "inference.llmkube.dev/dra-device-class"
CEL_SELECTOR_ANNOTATION = "inference.llmkube.dev/dra-cel-selector"
# The label that marks a template as made by this controller for one service.
MANAGED_CLAIM_LABEL = "inference.llmkube.dev/managed-claim"
CLAIM_NAME = "gpus"  # the pod's and container's claim entry
REQUEST_NAME = "gpu"
VENDOR_CLASSES = {"nvidia": "gpu.nvidia.com", "amd": "gpu.amd.com", "intel": "gpu.intel.com"}
# The DeviceClass of a vendor's GPU partitions (NVIDIA's DRA driver: MIG devices).
PARTITION_CLASSES = {"nvidia": "mig.nvidia.com"}
SHARED_CAPACITY = "memory"  # the capacity a shared request consumes
SHAREABLE = "device.allowMultipleAllocations == true"
# A partition profile as drivers name them (1g.10gb, 1g.10gb+me, 1c.3g.40gb), anchored.
PROFILE = re.compile(r"^[0-9a-z]([0-9a-z.+_-]{0,62})$")
# The fraction of the device each preallocating runtime takes: its setting, where the
# user says it (a spec field, if any), and its flag (extraArgs may give it too).
FRACTION_SETTINGS = {
    "vllm": (
        "gpu_memory_utilization",
        "vllmConfig.gpuMemoryUtilization",
        "--gpu-memory-utilization",
    ),
    "sglang": ("mem_fraction_static", "sglangConfig.memFractionStatic", "--mem-fraction-static"),
    "tgi": ("cuda_memory_fraction", "extraArgs --cuda-memory-fraction", "--cuda-memory-fraction"),
}
GIB = 1 << 30
# resource.k8s.io/v1 limits: 32 selectors per request, 10 KiB per CEL expression.
MAX_SELECTORS = 32
MAX_EXPRESSION = 10 * 1024
# A DNS subdomain (a DeviceClass's name), anchored.
CLASS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# device.driver == "x" (or 'x') in a DeviceClass's selector: the capacity's domain.
_DRIVER = re.compile(r"""device\.driver\s*==\s*["']([a-z0-9.-]+)["']""")
_NAME_BUDGET = 63 - len("-gpus-") - 10  # the service part of the template's name


@dataclass(frozen=True)
class ManagedClaims:
    """The template to apply for the service, and what it asks for."""

    template: Obj
    device_class: str
    count: int
    selectors: tuple[str, ...]
    sharing: str = "exclusive"  # gpuSharing.mode as served: exclusive, shared, partitioned
    memory: str | None = None  # shared: the memory capacity each device's share consumes
    # shared: the fraction of the device a preallocating runtime is given (memoryLimitGiB
    # over the device's memory), None where the runtime needs none or the user set it.
    fraction: float | None = None

    @property
    def name(self) -> str:
        return str(self.template["metadata"]["name"])

    def model(self, model: ModelSpec) -> ModelSpec:
        """The Model as the workload serves it: on the managed template, count set, so that
        every rule of user-written claims (attachment, sizing, charge) applies unchanged."""
        ref = ClaimRef(CLAIM_NAME, template_name=self.name)
        return replace(model, gpu=replace(model.gpu, claims=(ref,), count=self.count))

    def service(self, service: InferenceServiceSpec) -> InferenceServiceSpec:
        """The service as the workload serves it: on a shared device, the runtime's
        fraction of the device set from memoryLimitGiB (the user's own never reaches here)."""
        if self.fraction is None or service.runtime not in FRACTION_SETTINGS:
            return service
        s, f = service.settings, self.fraction
        if service.runtime == "vllm":
            s = replace(s, gpu_memory_utilization=f)
        elif service.runtime == "sglang":
            s = replace(s, mem_fraction_static=f)
        else:
            s = replace(s, cuda_memory_fraction=f)
        return replace(service, settings=s)

    def describe(self) -> str:
        wanted = f"{self.count} device(s) of DeviceClass {self.device_class!r}"
        if self.memory:
            wanted += f", {self.memory} of each one's {SHARED_CAPACITY} (shared)"
        if self.selectors:
            wanted += " where " + " && ".join(self.selectors)
        told = f"ResourceClaimTemplate {self.name!r}: {wanted}"
        if self.fraction is not None:
            told += f"; the runtime gets {self.fraction} of the device's memory"
        return told


@dataclass(frozen=True)
class Refused:
    """The managed path applies but cannot be served: no workload is written."""

    reason: str
    message: str


@dataclass(frozen=True)
class Cluster:
    """What the decision reads of the cluster."""

    classes: Mapping[str, Obj]  # DeviceClasses by name
    plugin_nodes: int  # nodes advertising the vendor's device-plugin resource
    extended_class: str | None  # the DeviceClass serving that resource (KEP-5004)
    devices: tuple[Device, ...] = ()  # what the ResourceSlices publish (selectors.devices)


def applies(isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, queued: bool) -> bool:
    """Whether the service is one the managed path may serve (before the cluster is read)."""
    del isvc
    if model.uses_claims or not has_gpu(model, service.gpu):
        return False
    return service.multi_node is None and not queued


def decide(
    isvc: Obj,
    service: InferenceServiceSpec,
    model: ModelSpec,
    cluster: Cluster,
    default_class: str | None,
) -> ManagedClaims | Refused | None:
    """The managed template for this service, a refusal, or None (not this path)."""
    annotations = isvc.get("metadata", {}).get("annotations") or {}
    named = annotations.get(DEVICE_CLASS_ANNOTATION)
    if named is not None and not CLASS_NAME.match(str(named)):
        return Refused(
            c.INVALID_SPEC,
            f"metadata.annotations[{DEVICE_CLASS_ANNOTATION!r}]: {named!r} is not a "
            "DeviceClass name (a DNS subdomain)",
        )
    if cluster.plugin_nodes or cluster.extended_class is not None:
        return None
    mode = service.sharing.mode or "exclusive"
    if mode == "partitioned":
        profile = service.sharing.profile or ""
        if not PROFILE.match(profile):
            return Refused(
                c.INVALID_SPEC,
                f"spec.resources.gpuSharing.profile: {profile!r} is not a partition profile "
                "(lowercase letters, digits and . + _ -, e.g. 1g.10gb)",
            )
        chosen = str(named) if named is not None else None
        device_class = chosen or PARTITION_CLASSES.get(model.gpu.vendor, "")
    else:
        chosen = str(named) if named is not None else default_class
        device_class = chosen or VENDOR_CLASSES.get(model.gpu.vendor, "")
    cls = cluster.classes.get(device_class)
    whole = VENDOR_CLASSES.get(model.gpu.vendor, "")
    if cls is None and mode == "partitioned" and chosen is None and whole in cluster.classes:
        return Refused(
            c.DEVICE_CLASS_NOT_FOUND,
            f"DeviceClass {device_class or 'of GPU partitions'!r} (spec.resources.gpuSharing."
            f"mode 'partitioned') not found: no node advertises the device-plugin resource and "
            f"DeviceClass {whole!r} serves whole GPUs only; NVIDIA's DRA driver creates "
            f"'mig.nvidia.com' where MIG is on, or name a class with the "
            f"{DEVICE_CLASS_ANNOTATION} annotation",
        )
    if cls is None:
        if chosen is None:
            return None
        source = (
            f"metadata.annotations[{DEVICE_CLASS_ANNOTATION!r}]"
            if named is not None
            else "the controller's --dra-device-class"
        )
        return Refused(
            c.DEVICE_CLASS_NOT_FOUND,
            f"DeviceClass {device_class!r} ({source}) not found: no node advertises "
            f"the device-plugin resource, so this service's GPUs can come only through "
            "that class",
        )
    driver = driver_of(cls, device_class)
    selectors, problem = _selectors(annotations, model, driver)
    if problem:
        return Refused(c.INVALID_SPEC, problem)
    count = gpu_count(model, service.gpu) or 1
    if mode == "partitioned":
        wanted = json.dumps(service.sharing.profile)
        selectors = (f"device.attributes[{json.dumps(driver)}].profile == {wanted}", *selectors)
        made = template(isvc, service.model_ref, device_class, count, selectors)
        return ManagedClaims(made, device_class, count, selectors, mode)
    if mode != "shared":
        made = template(isvc, service.model_ref, device_class, count, selectors)
        return ManagedClaims(made, device_class, count, selectors)
    return _shared(isvc, service, cls, device_class, count, (SHAREABLE, *selectors), cluster)


def _shared(
    isvc: Obj,
    service: InferenceServiceSpec,
    cls: Obj,
    device_class: str,
    count: int,
    selectors: tuple[str, ...],
    cluster: Cluster,
) -> ManagedClaims | Refused:
    """gpuSharing shared through DRA: a share of a multi-allocatable device's memory."""
    limit = service.sharing.memory_limit_gib
    if not limit:
        return Refused(
            c.INVALID_SPEC,
            "spec.resources.gpuSharing.memoryLimitGiB: required to share a GPU through DRA "
            "(no node advertises the time-sliced device-plugin resource): it is the share of "
            f"the device's {SHARED_CAPACITY} each pod's claim consumes",
        )
    memory = f"{limit}Gi"
    shareable = _candidates(cls, selectors[:1], cluster.devices)
    if not shareable:
        return Refused(
            c.NO_SHAREABLE_DEVICE,
            f"spec.resources.gpuSharing.mode 'shared': no device of DeviceClass "
            f"{device_class!r} allows multiple allocations, so no GPU can be shared through "
            "DRA (KEP-5075 consumable capacity: the DRAConsumableCapacity feature gate, on by "
            "default from Kubernetes 1.36, and a driver that publishes shareable devices, "
            "such as NVIDIA's with its ConsumableShares feature)",
        )
    fraction, problem = _fraction(service, limit, _candidates(cls, selectors, cluster.devices))
    if problem:
        return Refused(c.AMBIGUOUS_DEVICE_MEMORY, problem)
    made = template(isvc, service.model_ref, device_class, count, selectors, memory)
    return ManagedClaims(made, device_class, count, selectors, "shared", memory, fraction)


def _candidates(cls: Obj, selectors: tuple[str, ...], devices: tuple[Device, ...]) -> list[Device]:
    """The published devices the class and these selectors select (a failing selector
    selects nothing: the explanation of the claim names it)."""
    expressions = [
        str((s.get("cel") or {}).get("expression") or "")
        for s in (cls.get("spec") or {}).get("selectors") or []
        if isinstance(s, Mapping)
    ]
    found = []
    for device in devices:
        try:
            if all(matches(e, device) for e in (*expressions, *selectors)):
                found.append(device)
        except SelectorError:
            continue
    return found


def _fraction(
    service: InferenceServiceSpec, limit: int, candidates: list[Device]
) -> tuple[float | None, str | None]:
    """The fraction of a device a preallocating runtime gets for memoryLimitGiB, or why
    it cannot be known; None without a problem where none is needed."""
    known = FRACTION_SETTINGS.get(service.runtime)
    if known is None or getattr(service.settings, known[0]) is not None:
        return None, None
    extra = normalize_user_args(service.runtime, service.extra_args)
    if known[2] in user_args(service.runtime, extra):
        return None, None  # the user's own flag: the runtime takes what it says
    sizes = sorted({d.memory() or "" for d in candidates} - {""})
    if not sizes:
        return None, None  # no device can serve it: the claim's explanation says why
    values = {quantity_value(s) for s in sizes}
    if len(values) > 1:
        return None, (
            f"spec.resources.gpuSharing.memoryLimitGiB: the shareable devices the request "
            f"can get have different memory ({', '.join(sizes)}), so the fraction "
            f"{service.runtime} preallocates cannot be derived from {limit}Gi: set "
            f"{known[1]}, or narrow the devices with the "
            f"{CEL_SELECTOR_ANNOTATION} annotation"
        )
    (size,) = values
    share = Fraction(limit * GIB) / size
    if share > 1:
        return None, None  # larger than the device: the claim's explanation says so
    return max(0.01, float(int(share * 100)) / 100), None


def _selectors(
    annotations: Mapping[str, str], model: ModelSpec, driver: str
) -> tuple[tuple[str, ...], str | None]:
    memory = memory_selector(model, driver)
    found: list[str] = [memory] if memory else []
    where = f"metadata.annotations[{CEL_SELECTOR_ANNOTATION!r}]"
    for number, line in enumerate(str(annotations.get(CEL_SELECTOR_ANNOTATION, "")).split("\n")):
        expression = line.strip()
        if not expression:
            continue
        if len(expression) > MAX_EXPRESSION:
            return (), f"{where} line {number + 1}: longer than {MAX_EXPRESSION} bytes"
        found.append(expression)
    if len(found) > MAX_SELECTORS:
        return (), f"{where}: {len(found)} selectors, at most {MAX_SELECTORS} in one request"
    return tuple(found), None


def memory_selector(model: ModelSpec, driver: str) -> str | None:
    """hardware.gpu.memory as a selector: the device's memory capacity at least that."""
    if not model.gpu.memory_bytes:
        return None
    size = json.dumps(_quantity(model.gpu.memory_bytes))
    return f"device.capacity[{json.dumps(driver)}].memory.compareTo(quantity({size})) >= 0"


def driver_of(cls: Obj, name: str) -> str:
    """The driver a DeviceClass selects (its `device.driver == ...` selector), which
    qualifies device capacities in CEL; else the class's name (NVIDIA's, AMD's and
    Intel's classes are named after their drivers)."""
    for selector in (cls.get("spec") or {}).get("selectors") or []:
        found = _DRIVER.search(str((selector.get("cel") or {}).get("expression") or ""))
        if found:
            return found.group(1)
    return name


def claim_spec(
    device_class: str, count: int, selectors: tuple[str, ...], memory: str | None = None
) -> Obj:
    """The ResourceClaimSpec of the template: one request of count devices of the class
    (with `memory`: that much of each device's memory capacity, a share of it)."""
    exactly: Obj = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if memory:
        exactly["capacity"] = {"requests": {SHARED_CAPACITY: memory}}
    return {"devices": {"requests": [{"name": REQUEST_NAME, "exactly": exactly}]}}


def _quantity(size: int) -> str:
    """Bytes as the shortest binary-suffixed quantity that says them exactly."""
    for suffix, unit in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def template(
    isvc: Obj,
    model_name: str,
    device_class: str,
    count: int,
    selectors: tuple[str, ...],
    memory: str | None = None,
) -> Obj:
    """The ResourceClaimTemplate, owned by the service; named `<service>-gpus-<digest>`."""
    meta = isvc["metadata"]
    spec: Obj = {"spec": claim_spec(device_class, count, selectors, memory)}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    service = str(meta["name"])
    if len(service) > _NAME_BUDGET:
        short = hashlib.sha256(service.encode()).hexdigest()[:6]
        service = f"{service[: _NAME_BUDGET - 7].rstrip('-.')}-{short}"
    metadata = owned_metadata(isvc, f"{service}-gpus-{digest}", model_name)
    metadata["labels"][MANAGED_CLAIM_LABEL] = "true"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": metadata,
        "spec": spec,
    }


def allocatable_changed(event: Event) -> bool:
    """A Node's allocatable resources (what the decision reads of it): added, removed or
    changed; its heartbeats and conditions wake nothing."""
    if event.type in (ADDED, DELETED) or event.old is None:
        return True
    before = (event.old.get("status") or {}).get("allocatable")
    return before != (event.obj.get("status") or {}).get("allocatable")
