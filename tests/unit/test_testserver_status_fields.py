"""The test server's status writes find the fields they changed in one walk of each
status (testserver/apply.py `_status_changes`), with the same answer as looking every
field up from the object's root (`_lookup` per path of `_status_fields`), on random
statuses: conditions keyed by type (two with one type among them at times), nested maps,
empty maps and lists, scalar lists, lists held whole that the next write keys, values
of another shape than before."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from objtypes import Obj
from testserver import apply

SCHEMA: Obj = {
    "type": "object",
    "properties": {
        "status": {
            "type": "object",
            "properties": {
                "conditions": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object"},
                },
                "gpu": {"type": "object", "additionalProperties": {}},
            },
            "additionalProperties": {},
        }
    },
}


def _condition(rng: random.Random) -> Obj:
    c: Obj = {"type": rng.choice(["Ready", "Available", "Degraded"])}
    for key in ("status", "reason", "message"):
        if rng.random() < 0.8:
            c[key] = rng.choice(["True", "False", "x", "y"])
    return c


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.35:
        return rng.choice([0, 1, 1.0, True, "a", "b", None])
    if roll < 0.5:
        return rng.choice([{}, []])
    if roll < 0.65:
        return [rng.choice(["a", "b", 1]) for _ in range(rng.randint(1, 3))]
    if roll < 0.8:
        items: list[Any] = [{"name": rng.choice(["n1", "n2"]), "v": rng.randint(0, 1)}]
        # With a scalar beside it the list is held whole: the same item, keyed in the
        # next write, is found by a lookup below the old list.
        return [*items, "a"] if rng.random() < 0.4 else items
    return {rng.choice("pqr"): _value(rng, depth + 1) for _ in range(rng.randint(1, 3))}


def _status(rng: random.Random) -> Obj:
    status: Obj = {}
    if rng.random() < 0.9:
        status["conditions"] = [_condition(rng) for _ in range(rng.randint(0, 3))]
    for key in ("phase", "gpu", "extra"):
        if rng.random() < 0.7:
            status[key] = _value(rng, 0)
    return status


def _reference(old: Obj, new: Obj, schema: Obj | None, builtin: bool) -> tuple[set[Any], ...]:
    before = apply._status_fields(old, schema, builtin)
    after = apply._status_fields(new, schema, builtin)
    changed = {p for p in after if apply._lookup(old, p) != apply._lookup(new, p)}
    return before, after, changed | (before - after)


@pytest.mark.parametrize("builtin", [False, True])
def test_one_walk_finds_what_a_lookup_per_field_finds(builtin: bool) -> None:
    rng = random.Random(20261207)
    schema = None if builtin else SCHEMA
    duplicates = 0
    for _ in range(3000):
        old = {"spec": {"a": 1}, "status": _status(rng)}
        if rng.random() < 0.5:
            # A small edit of the old status, as most writes are.
            new = {"spec": {"a": 1}, "status": {**old["status"], "phase": _value(rng, 0)}}
        else:
            new = {"spec": {"a": 1}, "status": _status(rng)}
        if rng.random() < 0.1:
            del new["status"]
        conditions = [c["type"] for c in new.get("status", {}).get("conditions", [])]
        duplicates += len(conditions) != len(set(conditions))
        assert apply._status_changes(old, new, schema, builtin) == _reference(
            old, new, schema, builtin
        ), (old, new)
    assert duplicates > 100  # the fallback for two items of one key was taken


def test_a_changed_condition_is_the_only_changed_field() -> None:
    old = {"status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "False"}]}}
    new = {"status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}}
    _, _, changed = apply._status_changes(old, new, SCHEMA, False)
    token = 'k:{"type":"Ready"}'
    assert changed == {
        ("f:status", "f:conditions", token),
        ("f:status", "f:conditions", token, "f:status"),
    }


def _status_write(old: Obj, status: Obj) -> Obj:
    new = {**json.loads(json.dumps(old)), "status": status}  # as the server copies it
    apply.record_update(
        old, new, manager="writer", schema=SCHEMA, builtin=False, status=True, subresource="status"
    )
    return new


def test_objects_with_one_field_set_keep_their_own_managed_fields() -> None:
    """fieldsV1 trees are built once per field set and shared: a later write of one object
    (another status, another owner) leaves the other object's entries as they were."""
    created: Obj = {"metadata": {"name": "a"}, "spec": {"a": 1}}
    apply.record_update({}, created, manager="creator", schema=SCHEMA, builtin=False, status=False)
    first = _status_write(created, {"phase": "Ready"})
    renamed = {**created, "metadata": {**created["metadata"], "name": "b"}}
    second = _status_write(renamed, {"phase": "Ready"})
    assert first["metadata"]["managedFields"] == second["metadata"]["managedFields"]
    before = json.dumps(first["metadata"]["managedFields"], sort_keys=True)
    third = _status_write(second, {"phase": "Failed", "gpu": {"count": 2}})
    _status_write(third, {"gpu": {"count": 3}})
    assert json.dumps(first["metadata"]["managedFields"], sort_keys=True) == before
    writer = [e for e in third["metadata"]["managedFields"] if e["manager"] == "writer"]
    assert writer[0]["fieldsV1"] == {"f:status": {"f:phase": {}, "f:gpu": {"f:count": {}}}}
