"""Which events of an InferenceService's own objects wake it: not our own writes coming
back through the watch, nor updates of what a reconcile does not read; every change it
reads does (reconcilers/writes/apply.py OwnWrites, reconcilers/inferenceservice/
predicates.py)."""

from __future__ import annotations

import copy
from typing import Any

from app.manifests import apply_text
from controller.cache import Cache
from controller.informer import ADDED, DELETED, MODIFIED, Event
from controller.kube import KubeClient
from controller.resources import (
    DEPLOYMENT,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    POD_DISRUPTION_BUDGET,
    SERVICE,
    ResourceType,
)
from objtypes import Obj
from reconcilers.inferenceservice.predicates import deployment_status, read_changed
from reconcilers.writes.apply import OwnWrites
from testserver.process import ApiServerProcess

from .conftest import eventually, isvc_yaml, manager_for, model_yaml, reconciles, wait_condition

CPU = "      enabled: false"


def dep(rv: str = "1", **status: Any) -> Obj:
    return {
        "metadata": {
            "name": "svc",
            "namespace": "default",
            "uid": "u",
            "generation": 2,
            "resourceVersion": rv,
            "labels": {"app": "svc"},
            "annotations": {"inference.llmkube.dev/desired-hash": "h"},
        },
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}},
        "status": status,
    }


def changed(old: Obj, edit: Any) -> Obj:
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = str(int(old["metadata"]["resourceVersion"]) + 1)
    edit(new)
    return new


def test_an_update_of_what_no_reconcile_reads_is_filtered() -> None:
    owned, deployment = read_changed(), read_changed(deployment_status)
    old = dep(replicas=1, readyReplicas=0, conditions=[{"type": "Progressing"}])

    def conditions(o: Obj) -> None:
        o["status"]["conditions"] = [{"type": "Available"}]
        o["status"]["unavailableReplicas"] = 1

    def revision(o: Obj) -> None:
        o["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "2"

    for edit in (conditions, revision, lambda o: None):
        assert not owned(Event(MODIFIED, changed(old, edit), old))
        assert not deployment(Event(MODIFIED, changed(old, edit), old))


def test_every_change_a_reconcile_reads_passes() -> None:
    owned, deployment = read_changed(), read_changed(deployment_status)
    old = dep(replicas=1, readyReplicas=0)
    edits = [
        lambda o: o["spec"].update(replicas=2),
        lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image="evil:1"),
        lambda o: o["metadata"]["labels"].pop("app"),
        lambda o: o["metadata"]["annotations"].update({"inference.llmkube.dev/desired-hash": "x"}),
        lambda o: o["metadata"]["annotations"].update({"team": "a"}),
        lambda o: o["metadata"].update(ownerReferences=[{"uid": "other"}]),
        lambda o: o["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
        lambda o: o["metadata"].update(uid="recreated"),
        lambda o: o.update(data={"k": "v"}),  # a top-level field outside spec
    ]
    for edit in edits:
        event = Event(MODIFIED, changed(old, edit), old)
        assert owned(event) and deployment(event)
    # The Deployment's status: what the service's status and pod recycling read.
    for status in ({"replicas": 2}, {"readyReplicas": 1}):
        event = Event(MODIFIED, changed(old, lambda o, s=status: o["status"].update(s)), old)
        assert deployment(event) and not owned(event)
    unsettled = dep(replicas=1, readyReplicas=1, updatedReplicas=1, availableReplicas=1)
    unsettled["status"]["observedGeneration"] = 1
    settled = changed(unsettled, lambda o: o["status"].update(observedGeneration=2))
    assert deployment(Event(MODIFIED, settled, unsettled))
    for event in (Event(ADDED, old), Event(DELETED, old), Event(MODIFIED, old)):
        assert owned(event) and deployment(event)


def test_our_own_write_is_recognised_once_whichever_comes_first() -> None:
    writes = OwnWrites(Cache())
    not_echo = writes.follow(DEPLOYMENT)
    # The answer first: the event at its resourceVersion is the echo, once.
    writes.wrote(DEPLOYMENT, dep("5"))
    assert not_echo(Event(MODIFIED, dep("4"), dep("3")))  # older: someone else's
    assert len(writes) == 1
    assert not not_echo(Event(MODIFIED, dep("5"), dep("4")))
    assert len(writes) == 0
    assert not_echo(Event(MODIFIED, dep("5"), dep("4")))  # consumed
    assert not_echo(Event(MODIFIED, dep("6"), dep("5")))  # a later write: not ours
    # A deleted object's entry goes with it.
    writes.wrote(DEPLOYMENT, dep("7"))
    assert not_echo(Event(DELETED, dep("6")))
    assert len(writes) == 0
    # The event first: an ADDED while our create is in flight is our create.
    with writes.creating(DEPLOYMENT, "default", "svc"):
        assert not not_echo(Event(ADDED, dep("8")))
        other = dep("8")
        other["metadata"]["name"] = "other"
        assert not_echo(Event(ADDED, other))
    assert not_echo(Event(ADDED, dep("9")))  # after the create: someone else's
    # A type no watch follows is not remembered (nobody would consume the entry).
    writes.wrote(SERVICE, dep("10"))
    with writes.creating(POD, "default", "svc"):
        writes.wrote(POD, dep("10"))
    assert len(writes) == 0


async def _gone(kube: KubeClient, rt: ResourceType, name: str) -> bool:
    return await kube.get(rt, "default", name) is None


def service_pod(i: int) -> Obj:
    name = f"svc-{i}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-7d9f8-x{i}",
            "namespace": "default",
            "labels": {
                "app.kubernetes.io/managed-by": "llmkube",
                "inference.llmkube.dev/inferenceservice": name,
            },
        },
        "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]},
    }


async def test_services_whose_pods_exist_reconcile_once_each_and_real_changes_wake_them(
    apiserver: ApiServerProcess, kube: KubeClient
) -> None:
    """Before: the pods' start-up events reconciled services not created yet, and the
    Deployment, Service and PodDisruptionBudget each service made came back through the
    watch to reconcile it again (3 per service)."""
    await apply_text(kube, model_yaml("m", CPU))
    for i in range(3):
        await kube.create(POD, service_pod(i))
    manager = manager_for(kube)
    await manager.start()
    try:
        await manager.wait_synced()
        await wait_condition(kube, MODEL, "m", "Ready", "True")
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 0
        for i in range(3):
            await apply_text(kube, isvc_yaml(f"svc-{i}", "m"))
        for i in range(3):
            await wait_condition(kube, INFERENCE_SERVICE, f"svc-{i}", "ModelResolved", "True")
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 3

        # What the Deployment controller writes for itself wakes nothing...
        for patch in (
            {"status": {"conditions": [{"type": "Progressing", "status": "True"}]}},
            {"metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}}},
        ):
            sub = "status" if "status" in patch else ""
            await kube.patch(DEPLOYMENT, "default", "svc-0", patch, subresource=sub)
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 3

        # ...its replicas becoming ready do, and reach the service's status.
        ready = {"status": {"replicas": 1, "readyReplicas": 1}}
        await kube.patch(DEPLOYMENT, "default", "svc-0", ready, subresource="status")
        await wait_condition(kube, INFERENCE_SERVICE, "svc-0", "Ready", "True")
        # Ready ends the startup protection: that reconcile deletes the budget, whose
        # DELETED event wakes the service once more (deletes always pass).
        await eventually(
            lambda: _gone(kube, POD_DISRUPTION_BUDGET, "svc-0"), what="the budget deleted"
        )
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 5

        # A label of ours taken off the Service is put back.
        label = "app.kubernetes.io/managed-by"
        unlabel = {"metadata": {"labels": {"inference.llmkube.dev/model": None}}}
        await kube.patch(SERVICE, "default", "svc-1", unlabel)

        async def relabelled() -> bool:
            live = await kube.get(SERVICE, "default", "svc-1")
            labels = (live or {}).get("metadata", {}).get("labels") or {}
            return labels.get("inference.llmkube.dev/model") == "m" and label in labels

        await eventually(relabelled, what="the Service's label put back")
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 6
    finally:
        await manager.stop()
