"""Which updates of a service's own objects can change what its reconcile does.

Of its Deployment, Service, HorizontalPodAutoscaler and PodDisruptionBudget a reconcile
reads the metadata and everything outside status (reconcilers/writes/apply.py: is what
we apply still there, unedited, and ours?), and of the Deployment's status three things:
`replicas` and `readyReplicas` (the service's status) and whether the rollout is settled
(pod_lifetime.py). An update that changes none of these wakes nothing: the Deployment
controller's conditions, `unavailableReplicas` and `deployment.kubernetes.io/` annotations
(its revision bookkeeping, never a key we apply), the disruption controller's budget
status. Adds and deletes always pass, as with controller-runtime's predicates.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from controller.informer import ADDED, DELETED, Event
from controller.reconcile import Predicate
from objtypes import Obj
from reconcilers.inferenceservice.pod_lifetime import rollout_settled

# What the Deployment controller writes into metadata.annotations for itself.
CONTROLLER_ANNOTATIONS = "deployment.kubernetes.io/"
_NOT_READ = ("resourceVersion", "managedFields", "annotations")


def _metadata_changed(old: Obj, new: Obj) -> bool:
    before, after = old.get("metadata") or {}, new.get("metadata") or {}
    if any(
        before.get(k) != after.get(k) for k in before.keys() | after.keys() if k not in _NOT_READ
    ):
        return True
    a, b = before.get("annotations") or {}, after.get("annotations") or {}
    return any(
        a.get(k) != b.get(k)
        for k in a.keys() | b.keys()
        if not k.startswith(CONTROLLER_ANNOTATIONS)
    )


def _body_changed(old: Obj, new: Obj) -> bool:
    """spec, and any other top-level field but metadata and status."""
    keys = (old.keys() | new.keys()) - {"metadata", "status"}
    return any(old.get(k) != new.get(k) for k in keys)


def deployment_status(dep: Obj) -> Hashable:
    """What a reconcile reads of a Deployment's status."""
    status = dep.get("status") or {}
    return status.get("replicas"), status.get("readyReplicas"), rollout_settled(dep)


def read_changed(status: Callable[[Obj], Hashable] | None = None) -> Predicate:
    """An update passes when it changed the metadata (but resourceVersion and the
    Deployment controller's annotations), anything outside status, or status(obj)."""

    def passes(event: Event) -> bool:
        old, new = event.old, event.obj
        if event.type in (ADDED, DELETED) or old is None:
            return True
        if _metadata_changed(old, new) or _body_changed(old, new):
            return True
        return status is not None and status(old) != status(new)

    return passes
