"""JSON decoding with a bound on nesting depth, so one hostile object cannot stop a reader.

CPython's decoder recurses once per nesting level and raises RecursionError near
the interpreter's recursion limit (1,000 frames, minus whatever the caller already
uses). The apiserver accepts objects nested up to 10,000 deep, so a single ResourceClaim
can carry one. We refuse anything deeper than MAX_DEPTH with an error naming the
object, well below the point where the decoder would fail, and decode the rest.
"""

from __future__ import annotations

import array
import itertools
import json
import re
from typing import Any

MAX_DEPTH = 512

# A JSON string (skipped whole, escapes included) or one structural bracket.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_NAME = re.compile(rb'"name"\s*:\s*"([^"\\]{1,253})"')
_NAMESPACE = re.compile(rb'"namespace"\s*:\s*"([^"\\]{1,63})"')
_OPEN = frozenset(b"[{")
# A JSON string, escapes included (unrolled: no alternation per character).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
# "[" -> 1 and "]" -> -1 as signed bytes.
_STEPS = bytes.maketrans(b"[]", b"\x01\xff")
# Innermost-pair passes before the running count takes over.
PASSES = 16


class TooDeep(ValueError):
    """A document nested deeper than MAX_DEPTH; `key` names the object when it can be read."""

    def __init__(self, depth: int, key: str, limit: int = MAX_DEPTH) -> None:
        super().__init__(
            f"object {key or '<unknown>'} is nested more than {limit} levels deep"
            f" (JSON depth limit {limit})"
        )
        self.depth = depth
        self.key = key


def guess_key(data: bytes) -> str:
    """namespace/name of an object we refuse to decode, found by pattern (best effort)."""
    name = _NAME.search(data)
    namespace = _NAMESPACE.search(data)
    if not name:
        return ""
    ns = namespace.group(1).decode(errors="replace") + "/" if namespace else ""
    return ns + name.group(1).decode(errors="replace")


def depth(data: bytes, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON document: 0 when it cannot pass limit, limit + 1 once past
    it."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return 0  # cannot be deeper than its bracket count: skip the scan
    # In C throughout, which a token-by-token loop in Python is not (kube-apiserver's
    # Pods and lists pass the count above): the strings taken out (they may hold
    # brackets), then the brackets alone, of one kind.
    brackets = _STRING.sub(b"", data).translate(_ONE_KIND, _NOT_BRACKETS)
    if brackets.count(b"[") <= limit:
        return 0
    # Each pass takes off every innermost pair, so the passes that empty them are the
    # depth: quickest for the shallow documents of every day.
    rounds = min(limit + 1, PASSES)
    for passes in range(rounds):
        if not brackets:
            return passes
        inner = brackets.replace(b"[]", b"")
        if len(inner) == len(brackets):
            return 0  # unbalanced: not JSON, as the decoder will say
        brackets = inner
    if rounds > limit:
        return limit + 1
    if not brackets:
        return rounds
    # Deeper: the running count of open brackets, in one walk whatever the depth (a pass
    # per level would cost a hostile megabyte of nested chains some 500 scans).
    levels = array.array("b", brackets.translate(_STEPS))
    deepest = rounds + max(itertools.accumulate(levels))
    return deepest if deepest <= limit else limit + 1


def loads(data: bytes | str, limit: int = MAX_DEPTH) -> Any:
    raw = data.encode() if isinstance(data, str) else data
    found = depth(raw, limit)
    if found > limit:
        raise TooDeep(found, guess_key(raw), limit)
    return json.loads(raw)


def split_list(data: bytes, limit: int = MAX_DEPTH) -> tuple[dict[str, Any], list[bytes]]:
    """A List document without its items, and each item's raw bytes, by one bracket scan.

    Used only when the whole page is too deep to decode at once: the good items are
    decoded one by one and the bad ones reported, instead of losing the whole page.
    """
    level = 0
    in_items = False
    starts: list[int] = []
    items: list[bytes] = []
    items_span: tuple[int, int] | None = None
    for match in _TOKEN.finditer(data):
        token = match.group()
        if len(token) != 1:
            continue
        if token[0] in _OPEN:
            level += 1
            if level == 2 and token == b"[":
                in_items = True
                items_span = (match.start(), -1)
            elif level == 3 and in_items and token == b"{":
                starts.append(match.start())
        else:
            if level == 3 and in_items and token == b"}":
                items.append(data[starts.pop() : match.end()])
            elif level == 2 and in_items and token == b"]":
                in_items = False
                assert items_span is not None
                items_span = (items_span[0], match.end())
            level -= 1
    if items_span is None or items_span[1] < 0:
        raise ValueError("not a List document")
    envelope = json.loads(data[: items_span[0]] + b"[]" + data[items_span[1] :])
    if not isinstance(envelope, dict):
        raise ValueError("not a List document")
    return envelope, items
