"""What the informer cache keeps of an object: the same JSON, managedFields dropped,
keys and short strings interned down to a bounded depth, deeper parts as decoded."""

from __future__ import annotations

import json
import sys
from typing import Any

from controller.informer import _COMPACT_DEPTH, transform


def fresh(text: str) -> str:
    """A string object of its own, never interned (as json.loads makes them)."""
    return "".join([text[:1], text[1:]])


def nested(levels: int) -> Any:
    """A document `levels` containers deep, with fresh keys and strings at every level."""
    value: Any = fresh("leaf-value")
    for i in range(levels):
        if i % 2:  # strings right in a dict and in a list below it, at every depth
            value = {
                fresh(f"key-{i}"): value,
                fresh(f"s-{i}"): fresh(f"short-{i}"),
                fresh(f"l-{i}"): [fresh(f"in-list-{i}"), fresh("x" * 65), 1, None],
                fresh(f"d-{i}"): {fresh(f"dk-{i}"): fresh(f"dv-{i}")},  # the other parity
            }
        else:
            value = [value, fresh(f"item-{i}"), {fresh(f"k-{i}"): fresh(f"v-{i}")}]
    return value


def strings(value: Any, depth: int = 0, out: list[tuple[int, str]] | None = None) -> Any:
    """(depth, string) for every key (at its dict's depth) and string, in document order."""
    out = [] if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((depth, k))
            strings(v, depth + 1, out)
    elif isinstance(value, list):
        for v in value:
            strings(v, depth + 1, out)
    elif isinstance(value, str):
        out.append((depth, value))
    return out


def test_transform_keeps_the_json_and_drops_managed_fields() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "managedFields": [{"manager": "kubectl"}], "labels": {}},
        "spec": {"nested": nested(40), "n": 1.5, "flag": True, "none": None},
    }
    expected = json.loads(json.dumps(obj))
    del expected["metadata"]["managedFields"]
    assert json.dumps(transform(obj)) == json.dumps(expected)


def test_keys_and_short_strings_interned_down_to_the_depth_bound_only() -> None:
    doc = {"spec": nested(_COMPACT_DEPTH + 8)}
    # The interned copy of each text, made beforehand from another string object: a
    # string in the cache is interned exactly when it is that copy.
    canonical = {text: sys.intern(fresh(text)) for _, text in strings(doc)}
    seen = strings(transform(doc))
    for depth, text in seen:
        interned = text is canonical[text]
        if len(text) > 64:
            assert not interned, (depth, text)
        else:
            assert interned == (depth <= _COMPACT_DEPTH), (depth, text)
    assert any(d > _COMPACT_DEPTH for d, _ in seen)  # the bound was reached
