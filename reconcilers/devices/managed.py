"""Claims made for the user: a ResourceClaimTemplate the InferenceService reconciler
creates and owns when the Model asks for GPUs without naming claims and the vendor's GPUs
are reachable only through DRA.

The path is taken when, at the reconcile:
- the Model names no resourceClaims and asks for GPUs (count, or gpu.enabled);
- the operator has not turned it off (--managed-dra-claims=false);
- the service is an ordinary one: not multiNode (members are pinned with nodeName, which
  bypasses DRA), not on a shared or partitioned GPU (gpuSharing keeps the device plugin's
  shared resources), not Kueue-managed (Kueue's verdict is reconcilers/devices/kueue.py's);
- no node advertises the vendor's device-plugin resource in status.allocatable;
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
the service uses them. Pure: the cache-reading side is lookup.py's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from api import ClaimRef, InferenceServiceSpec, ModelSpec, gpu_count, has_gpu
from api import conditions as c
from controller.informer import ADDED, DELETED, Event
from objtypes import Obj
from reconcilers.ownership import owned_metadata

DEVICE_CLASS_ANNOTATION = "inference.llmkube.dev/dra-device-class"
CEL_SELECTOR_ANNOTATION = "inference.llmkube.dev/dra-cel-selector"
# The label that marks a template as made by this controller for one service.
MANAGED_CLAIM_LABEL = "inference.llmkube.dev/managed-claim"
CLAIM_NAME = "gpus"  # the pod's and container's claim entry
REQUEST_NAME = "gpu"
VENDOR_CLASSES = {"nvidia": "gpu.nvidia.com", "amd": "gpu.amd.com", "intel": "gpu.intel.com"}
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

    @property
    def name(self) -> str:
        return str(self.template["metadata"]["name"])

    def model(self, model: ModelSpec) -> ModelSpec:
        """The Model as the workload serves it: on the managed template, count set, so that
        every rule of user-written claims (attachment, sizing, charge) applies unchanged."""
        ref = ClaimRef(CLAIM_NAME, template_name=self.name)
        return replace(model, gpu=replace(model.gpu, claims=(ref,), count=self.count))

    def describe(self) -> str:
        wanted = f"{self.count} device(s) of DeviceClass {self.device_class!r}"
        if self.selectors:
            wanted += " where " + " && ".join(self.selectors)
        return f"ResourceClaimTemplate {self.name!r}: {wanted}"


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


def applies(isvc: Obj, service: InferenceServiceSpec, model: ModelSpec, queued: bool) -> bool:
    """Whether the service is one the managed path may serve (before the cluster is read)."""
    del isvc
    if model.uses_claims or not has_gpu(model, service.gpu):
        return False
    if service.multi_node is not None or queued:
        return False
    return service.sharing.mode in ("", "exclusive")


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
    chosen = str(named) if named is not None else default_class
    device_class = chosen or VENDOR_CLASSES.get(model.gpu.vendor, "")
    cls = cluster.classes.get(device_class)
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
    selectors, problem = _selectors(annotations, model, _driver_of(cls, device_class))
    if problem:
        return Refused(c.INVALID_SPEC, problem)
    count = gpu_count(model, service.gpu) or 1
    made = template(isvc, service.model_ref, device_class, count, selectors)
    return ManagedClaims(made, device_class, count, selectors)


def _driver_of(cls: Obj, name: str) -> str:
    """The driver a DeviceClass selects (its `device.driver == ...` selector), which
    qualifies device capacities in CEL; else the class's name (NVIDIA's, AMD's and
    Intel's classes are named after their drivers)."""
    for selector in (cls.get("spec") or {}).get("selectors") or []:
        found = _DRIVER.search(str((selector.get("cel") or {}).get("expression") or ""))
        if found:
            return found.group(1)
    return name


def _selectors(
    annotations: Mapping[str, str], model: ModelSpec, driver: str
) -> tuple[tuple[str, ...], str | None]:
    found: list[str] = []
    if model.gpu.memory_bytes:
        found.append(
            f"device.capacity[{json.dumps(driver)}].memory"
            f".compareTo(quantity({json.dumps(_quantity(model.gpu.memory_bytes))})) >= 0"
        )
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


def _quantity(size: int) -> str:
    """Bytes as the shortest binary-suffixed quantity that says them exactly."""
    for suffix, unit in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def template(
    isvc: Obj, model_name: str, device_class: str, count: int, selectors: tuple[str, ...]
) -> Obj:
    """The ResourceClaimTemplate, owned by the service; named `<service>-gpus-<digest>`."""
    meta = isvc["metadata"]
    exactly: Obj = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    spec: Obj = {"spec": {"devices": {"requests": [{"name": REQUEST_NAME, "exactly": exactly}]}}}
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
