"""The scheduler with its DRA plugin: a pod's claims allocated on one node, then bound."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from objtypes import Obj

from ..dra_allocator import (
    AllocationError,
    Consumed,
    allocate,
    consumed_memory,
    exclusive_keys,
    extended_resource_classes,
    node_devices,
)
from ..kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from ..storage import Storage, StorageError, now_iso
from .claims import ResourceClaimController
from .common import (
    Component,
    claim_status_fields,
    extended_limits,
    pod_owner_ref,
    quantity,
)
from .kubelet import Kubelet

EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def _allocated_on(claim: Obj, node: str) -> bool:
    """Whether an allocated claim's nodeSelector lets a pod on `node` use it."""
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
    if not selector:
        return True
    for term in selector.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and node in (f.get("values") or []):
                return True
    return False


@dataclass
class Placement:
    """What binding a pod to a node needs: new allocations and the extended-resource claim."""

    node: str
    allocations: dict[str, list[Obj]] = field(default_factory=dict)
    extended_requests: list[Obj] = field(default_factory=list)
    extended_mappings: list[Obj] = field(default_factory=list)
    extended_results: list[Obj] = field(default_factory=list)


class Scheduler(Component):
    """Allocates all of a pod's claims on one node (testserver/dra_allocator.py), writes
    status.allocation and status.reservedFor and binds the pod; or leaves it Pending with
    PodScheduled=False and the scheduler's message. A device-plugin limit that no node
    advertises is served by DRA when a DeviceClass maps it (KEP-5004). Pods pinned with
    nodeName skip it and go to the kubelet."""

    def __init__(self, storage: Storage, claims: ResourceClaimController, kubelet: Kubelet) -> None:
        super().__init__(storage)
        self.claims = claims
        self.kubelet = kubelet

    def schedule(self) -> None:
        for pod in self.storage.select(POD, None, lambda o: True):
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
                continue
            if pod["spec"].get("nodeName"):  # pinned: no scheduler, no claim allocation
                self.kubelet.run(pod)
                continue
            claims, problem = self._claims_for(pod)
            if problem:
                self._unschedulable(pod, problem)
                continue
            placement, problem = self._place(pod, claims)
            if placement is None:
                self._unschedulable(pod, problem)
                continue
            self._bind(pod, claims, placement)

    def _claims_for(self, pod: Obj) -> tuple[list[Obj], str]:
        """The pod's claims; or why the scheduler cannot consider it yet."""
        ns = pod["metadata"]["namespace"]
        claims = []
        for ref in pod["spec"].get("resourceClaims") or []:
            if ref.get("resourceClaimName"):
                try:
                    claims.append(self.storage.get(RESOURCE_CLAIM, ns, ref["resourceClaimName"]))
                except StorageError:
                    return [], f'resourceclaim "{ref["resourceClaimName"]}" not found'
                continue
            claim = self.claims.pod_claim(pod, ref["name"])
            if claim is None:
                template = ref.get("resourceClaimTemplateName")
                return [], f'resourceclaimtemplate "{template}" not found'
            claims.append(claim)
        return claims, ""

    def _place(self, pod: Obj, claims: list[Obj]) -> tuple[Placement | None, str]:
        """The first node that fits the pod, or the scheduler's FitError message."""
        nodes = self.storage.select(NODE, None, lambda o: True)
        classes = {
            c["metadata"]["name"]: c
            for c in self.storage.select(DEVICE_CLASS, None, lambda o: True)
        }
        slices = self.storage.select(RESOURCE_SLICE, None, lambda o: True)
        all_claims = self.storage.select(RESOURCE_CLAIM, None, lambda o: True)
        taken = exclusive_keys(all_claims)
        consumed = consumed_memory(all_claims)
        used = self._plugin_used()
        reasons: Counter[str] = Counter()
        for node in nodes:
            try:
                placement, reason = self._fit(
                    pod, node, claims, classes, slices, taken, Counter(consumed), used
                )
            except AllocationError as err:
                if err.unresolvable:
                    return None, str(err)
                placement, reason = None, "cannot allocate all claims"
            if placement is not None:
                return placement, ""
            reasons[reason] += 1
        summary = ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
        return None, f"0/{len(nodes)} nodes are available: {summary}."

    def _plugin_used(self) -> dict[tuple[str, str], int]:
        """Extended resources held by bound pods, per (node, resource)."""
        used: Counter[tuple[str, str]] = Counter()
        for p in self.storage.select(POD, None, lambda o: True):
            node = p["spec"].get("nodeName")
            if not node:
                continue
            for c in p["spec"].get("containers") or []:
                for res, n in extended_limits(c).items():
                    used[(node, res)] += n
        return used

    def _fit(
        self,
        pod: Obj,
        node: Obj,
        claims: list[Obj],
        classes: dict[str, Obj],
        slices: list[Obj],
        taken: set[Any],
        consumed: Consumed,
        used: dict[tuple[str, str], int],
    ) -> tuple[Placement | None, str]:
        name = node["metadata"]["name"]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        placement = Placement(name)
        ext_classes = extended_resource_classes(classes)
        for i, container in enumerate(pod["spec"].get("containers") or []):
            for j, (res, n) in enumerate(sorted(extended_limits(container).items())):
                if res in allocatable:  # the device plugin serves it on this node
                    if n > quantity(allocatable[res]) - used.get((name, res), 0):
                        return None, f"Insufficient {res}"
                elif res in ext_classes:  # KEP-5004: DRA serves it
                    request = f"container-{i}-request-{j}"
                    placement.extended_requests.append(
                        {
                            "name": request,
                            "exactly": {
                                "deviceClassName": ext_classes[res],
                                "allocationMode": "ExactCount",
                                "count": n,
                            },
                        }
                    )
                    placement.extended_mappings.append(
                        {
                            "containerName": container.get("name", ""),
                            "resourceName": res,
                            "requestName": request,
                        }
                    )
                elif n > 0:
                    return None, f"Insufficient {res}"
        devices = node_devices(slices, name)
        held = set(taken)
        for claim in claims:
            if (claim.get("status") or {}).get("allocation"):
                if not _allocated_on(claim, name):
                    return None, "cannot allocate all claims"
                continue
            results = allocate(claim, devices, classes, held, consumed)
            held |= {(r["driver"], r["pool"], r["device"]) for r in results if not r.get("shareID")}
            placement.allocations[claim["metadata"]["name"]] = results
        if placement.extended_requests:
            special = {
                "metadata": {"name": "extended-resources"},
                "spec": {"devices": {"requests": placement.extended_requests}},
            }
            placement.extended_results = allocate(special, devices, classes, held)
        return placement, ""

    def _bind(self, pod: Obj, claims: list[Obj], placement: Placement) -> None:
        ns = pod["metadata"]["namespace"]
        consumer = {
            "resource": "pods",
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
        }
        for claim in claims:
            status = claim.get("status") or {}
            results = placement.allocations.get(claim["metadata"]["name"])
            if results is not None:
                claim["status"] = self._allocation(results, placement.node, consumer)
            elif consumer not in (status.get("reservedFor") or []):
                claim["status"] = {
                    **status,
                    "reservedFor": [*status.get("reservedFor", []), consumer],
                }
            else:
                continue
            self.write_status(RESOURCE_CLAIM, claim)
        pod_status = dict(pod.get("status") or {})
        if placement.extended_requests:
            special = self.storage.create(
                RESOURCE_CLAIM,
                ns,
                {
                    "metadata": {
                        "generateName": f"{pod['metadata']['name'][:38]}-extended-resources-",
                        "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                        "ownerReferences": [pod_owner_ref(pod)],
                    },
                    "spec": {"devices": {"requests": placement.extended_requests}},
                },
            )
            special["status"] = self._allocation(
                placement.extended_results, placement.node, consumer
            )
            self.write_status(RESOURCE_CLAIM, special)
            pod_status["extendedResourceClaimStatus"] = {
                "requestMappings": placement.extended_mappings,
                "resourceClaimName": special["metadata"]["name"],
            }
        pod["spec"]["nodeName"] = placement.node
        pod["status"] = pod_status
        pod = self.storage.update(POD, ns, pod["metadata"]["name"], pod, has_status=True)
        if pod_status.get("extendedResourceClaimStatus"):
            pod["status"] = pod_status
        self.kubelet.run(pod)

    @staticmethod
    def _allocation(results: list[Obj], node: str, consumer: Obj) -> Obj:
        return {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
                "allocationTimestamp": now_iso(),
            },
            "reservedFor": [consumer],
        }

    def _unschedulable(self, pod: Obj, message: str) -> None:
        self.set_status(
            pod,
            {
                **claim_status_fields(pod),
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": message,
                    }
                ],
            },
        )
