"""What the simulated components share: the storage they act on, status writes, and the
references and quantities Kubernetes' own controllers compute the same way."""

from __future__ import annotations

from typing import Any

from objtypes import Obj

from ..kinds import POD, ResourceType
from ..storage import Storage

# Limits that are not extended resources: never devices.
NATIVE = ("cpu", "memory", "ephemeral-storage", "hugepages-")


class Component:
    """One simulated controller: it reads and writes the API server's storage directly."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def write_status(self, rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        updated = self.storage.update(
            rt, meta.get("namespace", ""), meta["name"], obj, subresource="status"
        )
        meta["resourceVersion"] = updated["metadata"]["resourceVersion"]

    def set_status(self, pod: Obj, status: Obj) -> None:
        if pod.get("status") == status:
            return
        pod["status"] = status
        self.write_status(POD, pod)


def pods_of(storage: Storage, owner: Obj) -> list[Obj]:
    """The pods in the owner's namespace that name it as an owner."""
    uid = owner["metadata"]["uid"]
    return [
        p
        for p in storage.select(POD, owner["metadata"]["namespace"], lambda o: True)
        if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
    ]


def claim_status_fields(pod: Obj) -> Obj:
    """The pod status fields the resourceclaim controller and scheduler own."""
    status = pod.get("status") or {}
    keep = ("resourceClaimStatuses", "extendedResourceClaimStatus")
    return {k: status[k] for k in keep if k in status}


def quantity(value: Any) -> int:
    """A whole-number quantity; anything else (extended resources must be integers) is 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def extended_limits(container: Obj) -> dict[str, int]:
    limits = (container.get("resources") or {}).get("limits") or {}
    return {k: quantity(v) for k, v in limits.items() if not k.startswith(NATIVE)}


def pod_owner_ref(pod: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod["metadata"]["name"],
        "uid": pod["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_ref(api_version: str, kind: str, owner: Obj) -> Obj:
    """The ownerReference a controller (Deployment, Job) puts on the pods it makes."""
    meta = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
