"""Watch predicates: a reconciler's own status writes do not wake it again; spec,
labels, annotations and deletion do; secondary watches see every change.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_predicates.py.
"""

from __future__ import annotations

import itertools
from typing import Any

from controller.informer import ADDED, DELETED, MODIFIED, Event
from controller.reconcile import (
    PRIMARY_DEFAULT,
    annotations_changed,
    any_of,
    deletion_started,
    generation_changed,
    labels_changed,
)


def m(generation: int | None = 1, status: str = "", **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "m", "namespace": "default", **meta}
    if generation is not None:
        metadata["generation"] = generation
    return {"metadata": metadata, "status": {"phase": status}}


def update(old: dict[str, Any], new: dict[str, Any]) -> Event:
    return Event(MODIFIED, new, old)


def test_status_only_update_is_filtered() -> None:
    assert not PRIMARY_DEFAULT(update(m(1, "Pending"), m(1, "Ready")))


def test_each_meaningful_change_passes() -> None:
    assert generation_changed(update(m(1), m(2)))
    recreated = update(m(1, uid="first"), m(1, uid="second"))  # seen again after a relist
    assert generation_changed(recreated) and PRIMARY_DEFAULT(recreated)
    assert not PRIMARY_DEFAULT(update(m(1, "Pending", uid="same"), m(1, "Ready", uid="same")))
    assert labels_changed(update(m(labels={"a": "1"}), m(labels={"a": "2"})))
    assert annotations_changed(update(m(), m(annotations={"x": "y"})))
    deleting = m(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["f"])
    assert deletion_started(update(m(finalizers=["f"]), deleting))
    done = m(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[])
    assert deletion_started(update(deleting, done))
    for event in (
        update(m(1), m(2)),
        update(m(labels={"a": "1"}), m()),
        update(m(), m(annotations={"x": "y"})),
        update(m(finalizers=["f"]), deleting),
    ):
        assert PRIMARY_DEFAULT(event)


def test_primary_default_is_any_of_the_four() -> None:
    """The one-pass PRIMARY_DEFAULT decides as the four predicates combined, everywhere."""
    combined = any_of(generation_changed, labels_changed, annotations_changed, deletion_started)
    finalizers: tuple[dict[str, Any], ...] = ({}, {"finalizers": ["f"]}, {"finalizers": []})
    variants: list[dict[str, Any]] = [
        {"generation": g, "labels": lab, "annotations": ann, "deletionTimestamp": ts, **fin}
        for g, lab, ann, ts, fin in itertools.product(
            (None, 1, 2),
            (None, {"a": "1"}),
            (None, {"x": "y"}),
            (None, "2026-01-01T00:00:00Z"),
            finalizers,
        )
    ]
    objects = [{"metadata": {k: v for k, v in meta.items() if v is not None}} for meta in variants]
    checked = 0
    for old, new in itertools.product(objects, repeat=2):
        for event in (update(old, new), Event(ADDED, new), Event(MODIFIED, new)):
            assert PRIMARY_DEFAULT(event) == combined(event), (old, new, event.type)
            checked += 1
    assert checked == 3 * len(objects) ** 2


def test_adds_deletes_and_objects_without_generation_always_pass() -> None:
    assert PRIMARY_DEFAULT(Event(ADDED, m()))
    assert PRIMARY_DEFAULT(Event(DELETED, m()))
    assert PRIMARY_DEFAULT(Event(MODIFIED, m()))  # no old object: a relist cannot compare
    assert PRIMARY_DEFAULT(update(m(None, "a"), m(None, "b")))
