"""A small simulated cluster behind the test API server: ReplicaSet controller, scheduler,
DRA allocator and kubelet, reduced to what decides whether an inference pod runs.

The nodes advertise `plugin_gpus` of nvidia.com/gpu capacity (0 on a DRA-only cluster)
and a pool of `dra_gpus` devices that only ResourceClaims can allocate. A pod that asks
for more nvidia.com/gpu than is free stays Pending with the scheduler's message
(Insufficient nvidia.com/gpu), as on a real DRA-only cluster; a pod whose claims can
be allocated runs and turns Ready. Pods pinned with nodeName skip the scheduler and
therefore DRA allocation too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from controller.resources import (
    DEPLOYMENT,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    ResourceType,
)

from .storage import Obj, Storage, StorageError, WatchEvent, now_iso, type_id

WATCHED = {type_id(rt) for rt in (DEPLOYMENT, POD, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE)}
NODE = "gpu-node-1"
TEMPLATE_HASH = "pod-template-hash"


def _template_hash(template: Obj) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _claim_devices(claim: Obj) -> int:
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    return sum(int((r.get("exactly") or {}).get("count") or 1) for r in requests)


def _plugin_gpus(pod: Obj) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        limit = ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
        total += int(limit or 0)
    return total


class ClusterSimulator:
    def __init__(self, storage: Storage, *, dra_gpus: int, plugin_gpus: int) -> None:
        self.storage = storage
        self.dra_gpus = dra_gpus
        self.plugin_gpus = plugin_gpus
        self._pending = False
        storage.listeners.append(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        # Never write from inside a write: catch up once the current request is done.
        if event.resource in WATCHED and not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_soon(self._sync)

    def _sync(self) -> None:
        self._pending = False
        try:
            for dep in self.storage.select(DEPLOYMENT, None, lambda o: True):
                self._sync_replicas(dep)
            self._schedule()
            for dep in self.storage.select(DEPLOYMENT, None, lambda o: True):
                self._report(dep)
        except StorageError:
            pass  # a concurrent client write; the event it made brings us back

    # -- ReplicaSet controller -------------------------------------------------------

    def _pods_of(self, dep: Obj) -> list[Obj]:
        uid = dep["metadata"]["uid"]
        return [
            p
            for p in self.storage.select(POD, dep["metadata"]["namespace"], lambda o: True)
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
        ]

    def _sync_replicas(self, dep: Obj) -> None:
        ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        template = dep["spec"]["template"]
        current = _template_hash(template)
        pods = self._pods_of(dep)
        for pod in pods:  # Recreate: pods of an older template go first
            if pod["metadata"]["labels"].get(TEMPLATE_HASH) != current:
                self._delete_pod(pod)
        pods = [p for p in pods if p["metadata"]["labels"].get(TEMPLATE_HASH) == current]
        want = int(dep["spec"].get("replicas", 1))
        for pod in pods[want:]:
            self._delete_pod(pod)
        for _ in range(want - len(pods)):
            meta = template.get("metadata") or {}
            self.storage.create(
                POD,
                ns,
                {
                    "metadata": {
                        "generateName": f"{name}-{current[:5]}-",
                        "labels": {**(meta.get("labels") or {}), TEMPLATE_HASH: current},
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "Deployment",
                                "name": name,
                                "uid": dep["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": json.loads(json.dumps(template["spec"])),
                    "status": {"phase": "Pending"},
                },
            )

    def _delete_pod(self, pod: Obj) -> None:
        ns = pod["metadata"]["namespace"]
        self.storage.delete(POD, ns, pod["metadata"]["name"])
        for tid, (cns, cname) in self.storage.dependents(pod["metadata"]["uid"]):
            if tid == type_id(RESOURCE_CLAIM):
                self.storage.delete(RESOURCE_CLAIM, cns, cname)

    # -- scheduler, DRA allocation, kubelet ---------------------------------------------

    def _in_use(self) -> tuple[int, int]:
        """Devices held by allocated claims, and nvidia.com/gpu held by running pods."""
        claims = self.storage.select(RESOURCE_CLAIM, None, lambda o: True)
        dra = sum(_claim_devices(c) for c in claims if (c.get("status") or {}).get("allocation"))
        pods = self.storage.select(POD, None, lambda o: True)
        plugin = sum(_plugin_gpus(p) for p in pods if p.get("spec", {}).get("nodeName"))
        return dra, plugin

    def _schedule(self) -> None:
        for pod in self.storage.select(POD, None, lambda o: True):
            if (pod.get("status") or {}).get("phase") == "Running":
                continue
            if pod["spec"].get("nodeName"):  # pinned: no scheduler, no claim allocation
                self._run(pod, pod["spec"]["nodeName"])
                continue
            dra_used, plugin_used = self._in_use()
            need = _plugin_gpus(pod)
            if need > self.plugin_gpus - plugin_used:
                self._unschedulable(pod, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
                continue
            claims, missing = self._claims_for(pod)
            if missing:
                self._unschedulable(pod, missing)
                continue
            unallocated = [c for c in claims if not (c.get("status") or {}).get("allocation")]
            devices = sum(_claim_devices(c) for c in unallocated)
            if devices > self.dra_gpus - dra_used:
                self._unschedulable(pod, "0/1 nodes are available: 1 cannot allocate all claims.")
                continue
            for claim in unallocated:
                claim["status"] = {
                    "allocation": {"devices": {"results": self._allocate(claim, dra_used)}},
                    "reservedFor": [
                        {
                            "resource": "pods",
                            "name": pod["metadata"]["name"],
                            "uid": pod["metadata"]["uid"],
                        }
                    ],
                }
                dra_used += _claim_devices(claim)
                self._write_status(RESOURCE_CLAIM, claim)
            pod["spec"]["nodeName"] = NODE
            pod = self.storage.update(
                POD, pod["metadata"]["namespace"], pod["metadata"]["name"], pod, has_status=True
            )
            self._run(pod, NODE, [c["metadata"]["name"] for c in claims])

    @staticmethod
    def _allocate(claim: Obj, first_free: int) -> list[Obj]:
        """One result per device, numbered after the devices already in use."""
        results: list[Obj] = []
        for r in claim["spec"]["devices"].get("requests") or []:
            for _ in range(int((r.get("exactly") or {}).get("count") or 1)):
                results.append(
                    {
                        "request": r.get("name"),
                        "driver": "gpu.nvidia.com",
                        "pool": NODE,
                        "device": f"gpu-{first_free + len(results)}",
                    }
                )
        return results

    def _claims_for(self, pod: Obj) -> tuple[list[Obj], str]:
        """The pod's claims, made from templates where needed; or why they cannot be."""
        ns = pod["metadata"]["namespace"]
        claims = []
        for ref in pod["spec"].get("resourceClaims") or []:
            if ref.get("resourceClaimName"):
                try:
                    claims.append(self.storage.get(RESOURCE_CLAIM, ns, ref["resourceClaimName"]))
                except StorageError:
                    return [], f'resourceclaim "{ref["resourceClaimName"]}" not found'
                continue
            name = f"{pod['metadata']['name']}-{ref['name']}"
            try:
                claims.append(self.storage.get(RESOURCE_CLAIM, ns, name))
                continue
            except StorageError:
                pass
            try:
                template = self.storage.get(
                    RESOURCE_CLAIM_TEMPLATE, ns, ref["resourceClaimTemplateName"]
                )
            except StorageError:
                return [], (f'resourceclaimtemplate "{ref["resourceClaimTemplateName"]}" not found')
            claims.append(
                self.storage.create(
                    RESOURCE_CLAIM,
                    ns,
                    {
                        "metadata": {
                            "name": name,
                            "ownerReferences": [
                                {
                                    "apiVersion": "v1",
                                    "kind": "Pod",
                                    "name": pod["metadata"]["name"],
                                    "uid": pod["metadata"]["uid"],
                                    "controller": True,
                                }
                            ],
                        },
                        "spec": template["spec"]["spec"],
                    },
                )
            )
        return claims, ""

    def _set_status(self, pod: Obj, status: Obj) -> None:
        if pod.get("status") == status:
            return
        pod["status"] = status
        self._write_status(POD, pod)

    def _write_status(self, rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        self.storage.update(rt, meta["namespace"], meta["name"], obj, subresource="status")

    def _unschedulable(self, pod: Obj, message: str) -> None:
        self._set_status(
            pod,
            {
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

    def _run(self, pod: Obj, node: str, claims: list[str] | None = None) -> None:
        status: Obj = {
            "phase": "Running",
            "startTime": now_iso(),
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
        }
        if claims:
            refs = pod["spec"].get("resourceClaims") or []
            status["resourceClaimStatuses"] = [
                {"name": r["name"], "resourceClaimName": c}
                for r, c in zip(refs, claims, strict=False)
            ]
        self._set_status(pod, status)

    def _report(self, dep: Obj) -> None:
        pods = self._pods_of(dep)
        ready = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
        status: Any = {
            "observedGeneration": dep["metadata"].get("generation", 1),
            "replicas": len(pods),
            "updatedReplicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
        }
        if dep.get("status") != status:
            dep["status"] = status
            self._write_status(DEPLOYMENT, dep)
