"""Label and field selectors, as the apiserver parses them from query strings."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from objtypes import Obj

_SET_RE = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a set expression's parentheses."""
    terms, depth, current = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def _term(term: str) -> Callable[[dict[str, str]], bool]:
    if m := _SET_RE.match(term):
        key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in term:
            key, value = (p.strip() for p in term.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    return lambda labels: term in labels


def label_matcher(selector: str | None) -> Callable[[Obj], bool]:
    if not selector:
        return lambda obj: True
    terms = [_term(t) for t in _split_terms(selector)]

    def matches(obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(t(labels) for t in terms)

    return matches


def _field(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def field_matcher(selector: str | None) -> Callable[[Obj], bool]:
    if not selector:
        return lambda obj: True
    checks: list[tuple[str, str, bool]] = []
    for term in _split_terms(selector):
        negate = "!=" in term
        path, value = (p.strip() for p in re.split(r"!=|==|=", term, maxsplit=1))
        checks.append((path, value, negate))

    def matches(obj: Obj) -> bool:
        return all((_field(obj, p) == v) != neg for p, v, neg in checks)

    return matches
