"""A small simulated cluster behind the test API server: ReplicaSet controller,
resourceclaim controller, scheduler with the DRA allocator, and kubelet, reduced to what
decides whether an inference pod runs, shaped as Kubernetes 1.34+ (`resource.k8s.io/v1`).

`dra=N,plugin=M` makes:
- Node `gpu-node-1` (when N > 0) with no nvidia.com/gpu in its capacity, and a
  ResourceSlice publishing its N GPUs (driver gpu.nvidia.com, pool gpu-node-1);
- Node `plugin-node-1` (when M > 0) advertising M nvidia.com/gpu (device plugin);
- a CPU node `node-1` when both are 0; and the DeviceClass `gpu.nvidia.com`;
- with `shared=S`, S more GPUs in `gpu-node-1`'s slice that allow multiple allocations
  (KEP-5075), each claim's `capacity.requests.memory` a share of their 80Gi.
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

from .kinds import (
    DEPLOYMENT,
    DEVICE_CLASS,
    JOB,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from .simulated.claims import ResourceClaimController
from .simulated.kubelet import Kubelet
from .simulated.nodes import seed
from .simulated.scheduler import Scheduler
from .simulated.workloads import DeploymentController, JobController
from .storage import Storage, StorageError, WatchEvent, type_id

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


class ClusterSimulator:
    """Runs the components in the order a cluster converges: workload controllers, the
    resourceclaim controller, the scheduler (which hands bound pods to the kubelet), then
    the workloads' status; once after each burst of writes."""

    def __init__(
        self, storage: Storage, *, dra_gpus: int, plugin_gpus: int, shared_gpus: int = 0
    ) -> None:
        self.storage = storage
        self._pending = False
        self.deployments = DeploymentController(storage)
        self.jobs = JobController(storage)
        self.claims = ResourceClaimController(storage)
        self.kubelet = Kubelet(storage, wake=self._wake)
        self.scheduler = Scheduler(storage, self.claims, self.kubelet)
        seed(storage, dra_gpus, plugin_gpus, shared_gpus)
        storage.listeners.append(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        # Never write from inside a write: catch up once the current request is done.
        if event.resource in WATCHED and not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_soon(self._sync)

    def _wake(self) -> None:
        if not self._pending:
            self._pending = True
            self._sync()

    def _sync(self) -> None:
        self._pending = False
        try:
            deployments = self.storage.select(DEPLOYMENT, None, lambda o: True)
            jobs = self.storage.select(JOB, None, lambda o: True)
            for dep in deployments:
                self.deployments.sync(dep)
            for job in jobs:
                self.jobs.sync(job)
            self.claims.release()
            self.claims.create_template_claims()
            self.scheduler.schedule()
            for dep in self.storage.select(DEPLOYMENT, None, lambda o: True):
                self.deployments.report(dep)
            for job in self.storage.select(JOB, None, lambda o: True):
                self.jobs.report(job)
        except StorageError:
            pass  # a concurrent client write; the event it made brings us back
