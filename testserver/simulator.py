"""A small simulated cluster behind the test API server: ReplicaSet controller,
resourceclaim controller, scheduler with the DRA allocator, and kubelet, reduced to what
decides whether an inference pod runs, shaped as Kubernetes 1.34+ (`resource.k8s.io/v1`).

`dra=N,plugin=M` makes:
- Node `gpu-node-1` (when N > 0) with no nvidia.com/gpu in its capacity, and a
  ResourceSlice publishing its N GPUs (driver gpu.nvidia.com, pool gpu-node-1);
- Node `plugin-node-1` (when M > 0) advertising M nvidia.com/gpu (device plugin);
- a CPU node `node-1` when both are 0; and the DeviceClass `gpu.nvidia.com`.
Tests may add, change or delete Nodes, ResourceSlices and DeviceClasses: the
simulator reads them on every pass (a DeviceClass with `spec.extendedResourceName`
turns on KEP-5004 for that name).

Template claims are created per pod as the resourceclaim controller names them
(`<pod>-<claim>-<random>`, annotation `resource.kubernetes.io/pod-claim-name`, owned by
the pod) and recorded in `pod.status.resourceClaimStatuses`. The scheduler allocates all
of a pod's claims on one node (testserver/dra_allocator.py), writes
`status.allocation` and `status.reservedFor`, or leaves the pod Pending with
PodScheduled=False and the scheduler's message ("0/1 nodes are available: 1 cannot
allocate all claims."). A device-plugin limit that no node advertises is served by
DRA when a DeviceClass maps it, through a claim `<pod>-extended-resources-<random>`
and `pod.status.extendedResourceClaimStatus`. Reservations of deleted pods are
dropped and a claim reserved by nobody is deallocated. Pods pinned with nodeName skip
the scheduler and therefore DRA allocation too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from objtypes import Obj

from .dra_allocator import (
    AllocationError,
    allocate,
    extended_resource_classes,
    node_devices,
)
from .kinds import (
    DEPLOYMENT,
    DEVICE_CLASS,
    JOB,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    ResourceType,
)
from .loader_sim import HOLD_ANNOTATION, LOADER, Volumes, loader_of, run_loader
from .storage import Storage, StorageError, WatchEvent, now_iso, type_id

WATCHED = {
    type_id(rt)
    for rt in (
        DEPLOYMENT,
        JOB,
        POD,
        RESOURCE_CLAIM,
        RESOURCE_CLAIM_TEMPLATE,
        DEVICE_CLASS,
        RESOURCE_SLICE,
        NODE,
    )
}
DRA_NODE = "gpu-node-1"
PLUGIN_NODE = "plugin-node-1"
CPU_NODE = "node-1"
DRIVER = "gpu.nvidia.com"
TEMPLATE_HASH = "pod-template-hash"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# Limits that are not extended resources: never devices.
_NATIVE = ("cpu", "memory", "ephemeral-storage", "hugepages-")


def _template_hash(template: Obj) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _quantity(value: Any) -> int:
    """A whole-number quantity; anything else (extended resources must be integers) is 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _extended_limits(container: Obj) -> dict[str, int]:
    limits = (container.get("resources") or {}).get("limits") or {}
    return {k: _quantity(v) for k, v in limits.items() if not k.startswith(_NATIVE)}


def _owner_ref(pod: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod["metadata"]["name"],
        "uid": pod["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _claim_base_name(pod_name: str, claim_name: str) -> str:
    """generateName of a template claim, shortened as the resourceclaim controller does."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) <= 57:  # room for five random characters in 63
        return base
    keep = 57 - 2  # two hyphens
    pod_len = len(pod_name) * keep // (len(pod_name) + len(claim_name))
    return f"{pod_name[:pod_len]}-{claim_name[: keep - pod_len]}-"


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


def _controller_ref(api_version: str, kind: str, owner: Obj) -> Obj:
    """The ownerReference a controller (Deployment, Job) puts on the pods it makes."""
    meta = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


@dataclass
class Placement:
    """What binding a pod to a node needs: new allocations and the extended-resource claim."""

    node: str
    allocations: dict[str, list[Obj]] = field(default_factory=dict)
    extended_requests: list[Obj] = field(default_factory=list)
    extended_mappings: list[Obj] = field(default_factory=list)
    extended_results: list[Obj] = field(default_factory=list)


class ClusterSimulator:
    def __init__(self, storage: Storage, *, dra_gpus: int, plugin_gpus: int) -> None:
        self.storage = storage
        self.dra_gpus = dra_gpus
        self.plugin_gpus = plugin_gpus
        self._pending = False
        # The model loader's simulated volumes, each pod's loader result (exit code,
        # termination message) and when a held loader finishes (loop time).
        self.volumes = Volumes()
        self._loaded: dict[str, tuple[int, str]] = {}
        self._holds: dict[str, float] = {}
        self._seed()
        storage.listeners.append(self._on_event)

    # -- the cluster's nodes, slices and classes ----------------------------------------

    def _seed(self) -> None:
        if self.dra_gpus:
            self.storage.create(NODE, "", _node(DRA_NODE, {}))
            self.storage.create(RESOURCE_SLICE, "", _slice(DRA_NODE, self.dra_gpus))
        if self.plugin_gpus:
            self.storage.create(
                NODE, "", _node(PLUGIN_NODE, {"nvidia.com/gpu": str(self.plugin_gpus)})
            )
        if not self.dra_gpus and not self.plugin_gpus:
            self.storage.create(NODE, "", _node(CPU_NODE, {}))
        self.storage.create(
            DEVICE_CLASS,
            "",
            {
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            },
        )

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
            for job in self.storage.select(JOB, None, lambda o: True):
                self._sync_job(job)
            self._release_claims()
            self._create_template_claims()
            self._schedule()
            for dep in self.storage.select(DEPLOYMENT, None, lambda o: True):
                self._report(dep)
            for job in self.storage.select(JOB, None, lambda o: True):
                self._report_job(job)
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
                        "annotations": dict(meta.get("annotations") or {}),
                        "ownerReferences": [_controller_ref("apps/v1", "Deployment", dep)],
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

    # -- resourceclaim controller ------------------------------------------------------

    def _release_claims(self) -> None:
        """Drop reservations of pods that are gone; deallocate claims nobody reserves;
        delete claims whose owning pod is gone (the garbage collector's part)."""
        pods = {p["metadata"]["uid"] for p in self.storage.select(POD, None, lambda o: True)}
        for claim in self.storage.select(RESOURCE_CLAIM, None, lambda o: True):
            meta = claim["metadata"]
            owners = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Pod"]
            if owners and not any(r.get("uid") in pods for r in owners):
                self.storage.delete(RESOURCE_CLAIM, meta["namespace"], meta["name"])
                continue
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            kept = [r for r in reserved if r.get("uid") in pods]
            if kept == reserved:
                continue
            if kept:
                claim["status"] = {**status, "reservedFor": kept}
            else:
                claim["status"] = {}
            self._write_status(RESOURCE_CLAIM, claim)

    def _pod_claim(self, pod: Obj, ref_name: str) -> Obj | None:
        """The claim made for one template entry of the pod, if any (status, then owner)."""
        ns = pod["metadata"]["namespace"]
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if st.get("name") == ref_name and st.get("resourceClaimName"):
                try:
                    return self.storage.get(RESOURCE_CLAIM, ns, st["resourceClaimName"])
                except StorageError:
                    return None
        uid = pod["metadata"]["uid"]
        for claim in self.storage.select(RESOURCE_CLAIM, ns, lambda o: True):
            meta = claim["metadata"]
            if (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == ref_name and any(
                r.get("uid") == uid for r in meta.get("ownerReferences") or []
            ):
                return claim
        return None

    def _create_template_claims(self) -> None:
        for pod in self.storage.select(POD, None, lambda o: True):
            ns = pod["metadata"]["namespace"]
            statuses = []
            for ref in pod["spec"].get("resourceClaims") or []:
                template_name = ref.get("resourceClaimTemplateName")
                if not template_name:
                    continue
                claim = self._pod_claim(pod, ref["name"])
                if claim is None:
                    try:
                        template = self.storage.get(RESOURCE_CLAIM_TEMPLATE, ns, template_name)
                    except StorageError:
                        continue  # the scheduler reports the missing template
                    tmeta = (template.get("spec") or {}).get("metadata") or {}
                    claim = self.storage.create(
                        RESOURCE_CLAIM,
                        ns,
                        {
                            "metadata": {
                                "generateName": _claim_base_name(
                                    pod["metadata"]["name"], ref["name"]
                                ),
                                "labels": dict(tmeta.get("labels") or {}),
                                "annotations": {
                                    **(tmeta.get("annotations") or {}),
                                    POD_CLAIM_ANNOTATION: ref["name"],
                                },
                                "ownerReferences": [_owner_ref(pod)],
                            },
                            "spec": json.loads(json.dumps(template["spec"].get("spec") or {})),
                        },
                    )
                statuses.append(
                    {"name": ref["name"], "resourceClaimName": claim["metadata"]["name"]}
                )
            status = pod.get("status") or {}
            if statuses and status.get("resourceClaimStatuses") != statuses:
                self._set_status(pod, {**status, "resourceClaimStatuses": statuses})

    # -- scheduler and DRA allocation ---------------------------------------------------

    def _schedule(self) -> None:
        for pod in self.storage.select(POD, None, lambda o: True):
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
                continue
            if pod["spec"].get("nodeName"):  # pinned: no scheduler, no claim allocation
                self._run(pod)
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
            claim = self._pod_claim(pod, ref["name"])
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
        taken = {
            (r.get("driver"), r.get("pool"), r.get("device"))
            for c in all_claims
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            )
            or []
        }
        used = self._plugin_used()
        reasons: Counter[str] = Counter()
        for node in nodes:
            try:
                placement, reason = self._fit(pod, node, claims, classes, slices, taken, used)
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
                for res, n in _extended_limits(c).items():
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
        used: dict[tuple[str, str], int],
    ) -> tuple[Placement | None, str]:
        name = node["metadata"]["name"]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        placement = Placement(name)
        ext_classes = extended_resource_classes(classes)
        for i, container in enumerate(pod["spec"].get("containers") or []):
            for j, (res, n) in enumerate(sorted(_extended_limits(container).items())):
                if res in allocatable:  # the device plugin serves it on this node
                    if n > _quantity(allocatable[res]) - used.get((name, res), 0):
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
            results = allocate(claim, devices, classes, held)
            held |= {(r["driver"], r["pool"], r["device"]) for r in results}
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
            self._write_status(RESOURCE_CLAIM, claim)
        pod_status = dict(pod.get("status") or {})
        if placement.extended_requests:
            special = self.storage.create(
                RESOURCE_CLAIM,
                ns,
                {
                    "metadata": {
                        "generateName": f"{pod['metadata']['name'][:38]}-extended-resources-",
                        "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                        "ownerReferences": [_owner_ref(pod)],
                    },
                    "spec": {"devices": {"requests": placement.extended_requests}},
                },
            )
            special["status"] = self._allocation(
                placement.extended_results, placement.node, consumer
            )
            self._write_status(RESOURCE_CLAIM, special)
            pod_status["extendedResourceClaimStatus"] = {
                "requestMappings": placement.extended_mappings,
                "resourceClaimName": special["metadata"]["name"],
            }
        pod["spec"]["nodeName"] = placement.node
        pod["status"] = pod_status
        pod = self.storage.update(POD, ns, pod["metadata"]["name"], pod, has_status=True)
        if pod_status.get("extendedResourceClaimStatus"):
            pod["status"] = pod_status
        self._run(pod)

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

    # -- kubelet ---------------------------------------------------------------------

    def _set_status(self, pod: Obj, status: Obj) -> None:
        if pod.get("status") == status:
            return
        pod["status"] = status
        self._write_status(POD, pod)

    def _write_status(self, rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        updated = self.storage.update(
            rt, meta.get("namespace", ""), meta["name"], obj, subresource="status"
        )
        meta["resourceVersion"] = updated["metadata"]["resourceVersion"]

    @staticmethod
    def _claim_status_fields(pod: Obj) -> Obj:
        status = pod.get("status") or {}
        keep = ("resourceClaimStatuses", "extendedResourceClaimStatus")
        return {k: status[k] for k in keep if k in status}

    def _unschedulable(self, pod: Obj, message: str) -> None:
        self._set_status(
            pod,
            {
                **self._claim_status_fields(pod),
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

    def _run(self, pod: Obj) -> None:
        loader = loader_of(pod["spec"])
        init: list[Obj] = []
        if loader is not None:
            result = self._load(pod, loader)
            is_job = loader in (pod["spec"].get("containers") or [])
            if result is None:  # held: the loader is still running
                running = [
                    {
                        "name": LOADER,
                        "ready": False,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now_iso()}},
                    }
                ]
                key = "containerStatuses" if is_job else "initContainerStatuses"
                self._pod_phase(pod, "Pending" if not is_job else "Running", {key: running})
                return
            code, message = result
            term = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "message": message,
                "finishedAt": now_iso(),
            }
            if is_job:  # restartPolicy Never: the pod ends with its loader
                done = [
                    {
                        "name": LOADER,
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": term},
                    }
                ]
                phase = "Succeeded" if code == 0 else "Failed"
                self._pod_phase(pod, phase, {"containerStatuses": done})
                return
            if code != 0:
                failed = {
                    "name": LOADER,
                    "ready": False,
                    "restartCount": 1,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": term},
                }
                self._pod_phase(pod, "Pending", {"initContainerStatuses": [failed]})
                return
            init = [
                {"name": LOADER, "ready": True, "restartCount": 0, "state": {"terminated": term}}
            ]
        status: Obj = {
            **self._claim_status_fields(pod),
            "phase": "Running",
            "startTime": now_iso(),
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
        }
        if init:
            status["initContainerStatuses"] = init
        self._set_status(pod, status)

    def _pod_phase(self, pod: Obj, phase: str, statuses: Obj) -> None:
        self._set_status(
            pod,
            {
                **self._claim_status_fields(pod),
                "phase": phase,
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False"},
                ],
                **statuses,
            },
        )

    def _load(self, pod: Obj, loader: Obj) -> tuple[int, str] | None:
        """The pod's loader result, run once; None while a held loader still runs."""
        uid = pod["metadata"]["uid"]
        if uid in self._loaded:
            return self._loaded[uid]
        hold = float((pod["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION) or 0)
        if hold > 0:
            loop = asyncio.get_running_loop()
            if uid not in self._holds:
                self._holds[uid] = loop.time() + hold
                loop.call_later(hold, self._wake)
            if loop.time() < self._holds[uid]:
                return None
        code, message = run_loader(self.volumes, pod, loader)
        self._loaded[uid] = (code, json.dumps(message, separators=(",", ":")))
        return self._loaded[uid]

    def _wake(self) -> None:
        if not self._pending:
            self._pending = True
            self._sync()

    # -- Job controller (prefetch Jobs: one pod, no retries) -------------------------------

    def _sync_job(self, job: Obj) -> None:
        if self._pods_of(job):
            return
        template = job["spec"]["template"]
        name = job["metadata"]["name"]
        self.storage.create(
            POD,
            job["metadata"]["namespace"],
            {
                "metadata": {
                    "generateName": f"{name}-",
                    "labels": {
                        **(template.get("metadata") or {}).get("labels", {}),
                        "job-name": name,
                    },
                    "ownerReferences": [_controller_ref("batch/v1", "Job", job)],
                },
                "spec": json.loads(json.dumps(template["spec"])),
                "status": {"phase": "Pending"},
            },
        )

    def _report_job(self, job: Obj) -> None:
        phases = [(p.get("status") or {}).get("phase") for p in self._pods_of(job)]
        status: Obj = {"active": phases.count("Pending") + phases.count("Running")}
        if "Succeeded" in phases:
            status = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        elif "Failed" in phases:
            status = {
                "failed": 1,
                "conditions": [
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
                ],
            }
        if job.get("status") != status:
            job["status"] = status
            self._write_status(JOB, job)

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


def _node(name: str, extended: dict[str, str]) -> Obj:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", **extended}
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.34.0", "operatingSystem": "linux"},
        },
    }


def _slice(node: str, gpus: int) -> Obj:
    """What the NVIDIA DRA driver publishes for a node's GPUs."""
    return {
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "index": {"int": i},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(gpus)
            ],
        },
    }
