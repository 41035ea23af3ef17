"""The nesting bound on decoded JSON (controller/jsondepth.py): the depth it finds is the
decoded document's, whatever brackets, quotes and backslashes its strings hold."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from controller import jsondepth

# Strings that look like structure: brackets, escaped quotes, escaped backslashes right
# before a closing quote, fieldsV1 keys as kube-apiserver writes them.
STRINGS = ["x[", '}"{', 'q\\"[', "\\", '\\"]', '\\\\"{', "é]", 'k:{"type":"Ready"}', "\n[", ""]


def _nesting(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_nesting(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_nesting(v) for v in value), default=0)
    return 0


def _document(rng: random.Random, levels: int) -> Any:
    if levels > 0 and rng.random() < 0.7:
        if rng.random() < 0.5:
            return [_document(rng, levels - 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(STRINGS): _document(rng, levels - 1) for _ in range(rng.randint(0, 3))}
    return rng.choice([*STRINGS, 1, None, True])


@pytest.mark.parametrize("passes", [jsondepth.PASSES, 0, 3])
def test_the_depth_found_is_the_decoded_documents(
    passes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the pair-removing passes, the running count after none, or after a few."""
    monkeypatch.setattr(jsondepth, "PASSES", passes)
    rng = random.Random(20261207)
    past = 0
    for _ in range(4000):
        doc = _document(rng, rng.randint(0, 14))
        data = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode()
        real = _nesting(doc)
        for limit in (0, 2, 5, 9):
            found = jsondepth.depth(data, limit)
            if real > limit:
                assert found == limit + 1, (data, limit)
                past += 1
            else:
                assert found in (0, real), (data, limit, found)
    assert past > 1000


@pytest.mark.parametrize("wide", [1, 300])
def test_a_deep_chain_is_past_the_limit_however_wide(wide: int) -> None:
    """Deeper than PASSES: the running count measures it."""
    chain = b"[" * 600 + b"]" * 600
    data = b"[" + b",".join([b"[1]"] * wide + [chain]) + b"]"
    assert jsondepth.depth(data) == jsondepth.MAX_DEPTH + 1
    # Under a higher limit: too few brackets to pass it, or the depth itself.
    assert jsondepth.depth(data, 700) == (0 if wide == 1 else 601)
    with pytest.raises(jsondepth.TooDeep):
        jsondepth.loads(data)


def test_brackets_inside_strings_are_not_nesting() -> None:
    data = json.dumps({"a": "[" * 1000, "b": '\\"' + "{" * 1000}).encode()
    assert jsondepth.depth(data) == 0
    assert jsondepth.loads(data)["a"] == "[" * 1000
