"""The Kueue path for DRA-only clusters: what Kueue's pod integration will admit and charge.

Kueue (0.18+, KueueDRAIntegration) charges the devices of claims made from
ResourceClaimTemplates through `resources.deviceClassMappings` of its Configuration
(DeviceClass -> a resource name in the ClusterQueue's quota). It never admits a pod
that names a `resourceClaimName` directly, a request in allocationMode All or with
firstAvailable, or a class with no mapping. The controller cannot read Kueue's
Configuration (it lives in Kueue's ConfigMap), so it is told the mappings by flag
(`--kueue-device-class-mapping CLASS=RESOURCE`) or chart value.

A service labelled `kueue.x-k8s.io/queue-name` gets the label on its Deployment and pod
template (Kueue's pod integration gates pods that carry it), its Model's claims on the
pods (never an nvidia.com/gpu limit, see runtimes/gpu.py), and `suspend` scales it to zero.

The rules (what Kueue admits and charges) are pure functions over the claims and
templates as plain dicts; dra.py counts the devices they ask for.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api import ModelSpec
from api.conditions import KUEUE_COMPATIBLE
from objtypes import Obj
from reconcilers.devices import dra
from reconcilers.writes.conditions import Condition

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True)
class KueueSettings:
    """DeviceClass -> Kueue resource name, as Kueue's deviceClassMappings say."""

    class_resources: Mapping[str, str] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        return bool(self.class_resources)


def parse_mappings(values: Iterable[str]) -> dict[str, str]:
    """ "CLASS=RESOURCE" entries (repeatable flag, or comma-separated) -> {class: resource}."""
    result: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            cls, sep, resource = item.partition("=")
            if not sep or not cls.strip() or not resource.strip():
                raise ValueError(f"expected DEVICECLASS=RESOURCE, got {item!r}")
            result[cls.strip()] = resource.strip()
    return result


# -- the rules ---------------------------------------------------------------------


@dataclass(frozen=True)
class KueueBlocker:
    reason: str  # SharedClaim, AllocationModeAll, FirstAvailable, UnmappedDeviceClass
    message: str


def kueue_class_resources(device_class_mappings: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """DeviceClass -> Kueue resource name, from Configuration.resources.deviceClassMappings."""
    result: dict[str, str] = {}
    for mapping in device_class_mappings:
        classes = mapping.get("deviceClassNames")
        for cls in classes if isinstance(classes, list) else []:
            result.setdefault(str(cls), str(mapping.get("name") or ""))
    return result


def kueue_blockers(
    pod_claims: Iterable[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    mapped_classes: Collection[str] | None,
) -> list[KueueBlocker]:
    """Why Kueue's DRA integration would never admit pods with these claims.

    pod_claims: pod.spec.resourceClaims entries; templates: template name -> template;
    mapped_classes: DeviceClasses of Kueue's deviceClassMappings (None: not known, not
    checked). A missing template is not a Kueue problem (AcceleratorReady reports it)
    and is skipped.
    """
    blockers = []
    for ref in pod_claims:
        entry = str(ref.get("name") or "")
        if ref.get("resourceClaimName"):
            blockers.append(
                KueueBlocker(
                    "SharedClaim",
                    f'claim "{entry}" names ResourceClaim "{ref["resourceClaimName"]}": Kueue '
                    "admits only claims made from a resourceClaimTemplateName",
                )
            )
            continue
        name = ref.get("resourceClaimTemplateName")
        template = templates.get(str(name or ""))
        if template is None:
            continue
        demand = dra.requested_devices(template)
        if demand.all_mode:
            blockers.append(
                KueueBlocker(
                    "AllocationModeAll",
                    f'template "{name}" uses allocationMode All, which Kueue cannot count',
                )
            )
        if demand.first_available:
            blockers.append(
                KueueBlocker(
                    "FirstAvailable",
                    f'template "{name}" uses firstAvailable, which Kueue does not support',
                )
            )
        for cls in sorted(demand.classes):
            if mapped_classes is not None and cls not in mapped_classes:
                blockers.append(
                    KueueBlocker(
                        "UnmappedDeviceClass",
                        f'DeviceClass "{cls}" is not in Kueue\'s deviceClassMappings',
                    )
                )
    return blockers


def kueue_charge(
    demand: dra.DeviceDemand, class_resources: Mapping[str, str], replicas: int
) -> dict[str, int]:
    """What Kueue charges: devices per mapped resource name times replicas (unmapped left out)."""
    charge: dict[str, int] = {}
    for cls, n in demand.by_class.items():
        resource = class_resources.get(cls)
        if resource:
            charge[resource] = charge.get(resource, 0) + n * replicas
    return charge


# -- the service's path --------------------------------------------------------------


def queue_name(isvc: Obj) -> str | None:
    labels = (isvc.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_LABEL)
    return str(value) if value else None


def label_workload(deployment: Obj, queue: str) -> None:
    """Put the queue label on the Deployment and its pod template (in place)."""
    deployment["metadata"].setdefault("labels", {})[QUEUE_LABEL] = queue
    template_meta = deployment["spec"]["template"].setdefault("metadata", {})
    template_meta.setdefault("labels", {})[QUEUE_LABEL] = queue


def kueue_status(
    queue: str,
    model: ModelSpec,
    pod_claims: list[Obj],
    templates: Mapping[str, Obj],
    demand: dra.DeviceDemand,
    replicas: int,
    settings: KueueSettings,
    extended_class: str | None,
    multi_node: bool = False,
) -> tuple[Condition, Obj]:
    """KueueCompatible and status.kueue: whether Kueue can ever admit the pods, and the
    charge it will see (devices per class x replicas, under the mapped resource names)."""
    problems: list[tuple[str, str]] = []
    if multi_node:
        problems.append(
            (
                "MultiNode",
                "spec.multiNode member pods are pinned with nodeName: they start without "
                "the scheduler, so Kueue's pod integration can neither gate, admit nor "
                "charge them; remove the queue label or run single-node",
            )
        )
    if model.gpu.count > 0 and model.uses_claims:
        twice = (
            f"; DeviceClass {extended_class!r} serves nvidia.com/gpu through DRA, so such a "
            "limit would also allocate the devices a second time"
            if extended_class
            else ""
        )
        problems.append(
            (
                "CountWithClaims",
                f"the llmkube-kueue integration asks Kueue for nvidia.com/gpu: "
                f"{model.gpu.count}, which a DRA-only cluster never has: leave count out of "
                f"the Model for Kueue-managed services{twice}",
            )
        )
    mapped = settings.class_resources.keys() if settings.configured else None
    for b in kueue_blockers(pod_claims, templates, mapped):
        problems.append((b.reason, b.message))
    charge = kueue_charge(demand, settings.class_resources, replicas)
    rows = [
        {
            "deviceClass": cls,
            "resource": settings.class_resources.get(cls, ""),
            "perPod": n,
            "total": n * replicas,
        }
        for cls, n in sorted(demand.by_class.items())
    ]
    status: Obj = {
        "queueName": queue,
        "admissible": not problems,
        "replicas": replicas,
        "devices": rows,
        "summary": ", ".join(f"{r}: {n}" for r, n in sorted(charge.items())),
    }
    if problems:
        reason = problems[0][0]
        message = "; ".join(m for _, m in problems)
        return Condition(KUEUE_COMPATIBLE, False, reason, message), status
    if not model.uses_claims:
        message = "no DRA claims: Kueue charges the pod's resource limits"
    elif not settings.configured:
        message = (
            "template claims only; the controller is not told Kueue's deviceClassMappings "
            "(--kueue-device-class-mapping), so unmapped classes are not checked"
        )
    else:
        message = f"Kueue will charge {status['summary'] or 'nothing'} for {replicas} replica(s)"
    return Condition(KUEUE_COMPATIBLE, True, "Admissible", message), status
