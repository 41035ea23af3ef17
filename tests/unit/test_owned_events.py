"""Which events of an InferenceService's own objects wake it: not our own writes coming
back through the watch, nor updates of what a reconcile does not read; every change it
reads does (reconcilers/writes/apply.py OwnWrites, reconcilers/inferenceservice/
predicates.py).

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_owned_events.py.
"""

from __future__ import annotations

import copy
from typing import Any

from controller.cache import Cache
from controller.informer import ADDED, DELETED, MODIFIED, Event
from controller.resources import (
    DEPLOYMENT,
    POD,
    SERVICE,
)
from objtypes import Obj
from reconcilers.inferenceservice.predicates import deployment_status, read_changed
from reconcilers.writes.apply import OwnWrites


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
