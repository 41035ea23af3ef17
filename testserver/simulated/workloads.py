"""The workload controllers: Deployments (through the ReplicaSet controller's part) and Jobs."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from objtypes import Obj

from ..kinds import DEPLOYMENT, JOB, POD, RESOURCE_CLAIM
from ..storage import type_id
from .common import Component, controller_ref, pods_of

TEMPLATE_HASH = "pod-template-hash"


def _template_hash(template: Obj) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


class DeploymentController(Component):
    """A Deployment's pods (Recreate: pods of an older template go first) and its status."""

    def sync(self, dep: Obj) -> None:
        ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        template = dep["spec"]["template"]
        current = _template_hash(template)
        pods = pods_of(self.storage, dep)
        for pod in pods:  # Recreate: pods of an older template go first
            if pod["metadata"]["labels"].get(TEMPLATE_HASH) != current:
                self.delete_pod(pod)
        pods = [p for p in pods if p["metadata"]["labels"].get(TEMPLATE_HASH) == current]
        want = int(dep["spec"].get("replicas", 1))
        for pod in pods[want:]:
            self.delete_pod(pod)
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
                        "ownerReferences": [controller_ref("apps/v1", "Deployment", dep)],
                    },
                    "spec": json.loads(json.dumps(template["spec"])),
                    "status": {"phase": "Pending"},
                },
            )

    def delete_pod(self, pod: Obj) -> None:
        ns = pod["metadata"]["namespace"]
        self.storage.delete(POD, ns, pod["metadata"]["name"])
        for tid, (cns, cname) in self.storage.dependents(pod["metadata"]["uid"]):
            if tid == type_id(RESOURCE_CLAIM):
                self.storage.delete(RESOURCE_CLAIM, cns, cname)

    def report(self, dep: Obj) -> None:
        pods = pods_of(self.storage, dep)
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
            self.write_status(DEPLOYMENT, dep)


class JobController(Component):
    """Prefetch Jobs: one pod, no retries; the Job's status from that pod."""

    def sync(self, job: Obj) -> None:
        if pods_of(self.storage, job):
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
                    "ownerReferences": [controller_ref("batch/v1", "Job", job)],
                },
                "spec": json.loads(json.dumps(template["spec"])),
                "status": {"phase": "Pending"},
            },
        )

    def report(self, job: Obj) -> None:
        phases = [(p.get("status") or {}).get("phase") for p in pods_of(self.storage, job)]
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
            self.write_status(JOB, job)
