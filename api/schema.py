"""A small schema language: one description per field gives both the CRD's OpenAPI schema
and the controller's own validation, so the two can never disagree.

Each node renders itself as a structural OpenAPI v3 schema (`openapi()`) and checks a
decoded JSON value (`check()`), appending errors that name the field path and returning
the value with defaults applied. Cross-field rules (`Rule`) carry both their CEL text,
for the apiserver, and a Python predicate, for the controller and the webhook.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from objtypes import Obj

Errors = list[str]


def go_regex(pattern: str) -> re.Pattern[str]:
    r"""A CRD pattern (Go RE2 syntax, as the apiserver runs it) compiled to match in Python
    as it does there: `$` is the end of the text (Python's also matches before a final
    newline, which would let "value\n" through), and \w, \d, \s are ASCII classes."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            start = i + 1 + (pattern[i + 1 : i + 2] == "^")
            if pattern[start : start + 1] == "]":  # a leading ']' is a literal
                out.append(pattern[i : start + 1])
                i = start + 1
                continue
        elif ch == "$":
            ch = r"\Z"
        out.append(ch)
        i += 1
    return re.compile("".join(out), re.ASCII)


class Node:
    description: str = ""

    def openapi(self) -> Obj:
        raise NotImplementedError

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        raise NotImplementedError

    def default_value(self) -> Any:
        return None

    def _describe(self, schema: Obj) -> Obj:
        if self.description:
            schema["description"] = self.description
        default = self.default_value()
        if default is not None:
            schema["default"] = default
        return schema


def _number(value: Any, path: str, errors: Errors) -> float | int | None:
    """A finite JSON number, or None after recording why not."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.append(f"{path}: must be a number")
        return None
    if isinstance(value, float) and not math.isfinite(value):
        errors.append(f"{path}: must be a finite number, got {value}")
        return None
    return value


def _bounds(value: float, path: str, errors: Errors, lo: float | None, hi: float | None) -> bool:
    if lo is not None and value < lo:
        errors.append(f"{path}: must be at least {lo}, got {value}")
        return False
    if hi is not None and value > hi:
        errors.append(f"{path}: must be at most {hi}, got {value}")
        return False
    return True


@dataclass(frozen=True)
class Str(Node):
    description: str = ""
    enum: tuple[str, ...] = ()
    pattern: str | None = None
    default: str | None = None
    min_length: int | None = None
    # Why a value that misses the pattern is refused (the message says it, not the regex).
    explain: Callable[[str], str] | None = None

    def default_value(self) -> Any:
        return self.default

    def openapi(self) -> Obj:
        s: Obj = {"type": "string"}
        if self.enum:
            s["enum"] = list(self.enum)
        if self.pattern:
            s["pattern"] = self.pattern
        if self.min_length is not None:
            s["minLength"] = self.min_length
        return self._describe(s)

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        if not isinstance(value, str):
            errors.append(f"{path}: must be a string")
            return None
        if self.min_length is not None and len(value) < self.min_length:
            errors.append(f"{path}: must be a non-empty string")
            return None
        if self.enum and value not in self.enum:
            errors.append(f"{path}: {value!r} is not one of {', '.join(self.enum)}")
            return None
        if self.pattern and not self._regex.search(value):
            if self.explain:
                errors.append(f"{path}: {value!r}: {self.explain(value)}")
            else:
                errors.append(f"{path}: {value!r} does not match {self.pattern}")
            return None
        return value

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        return go_regex(self.pattern or "")


@dataclass(frozen=True)
class Int(Node):
    description: str = ""
    minimum: int | None = None
    maximum: int | None = None
    default: int | None = None
    fmt: str = "int32"

    def default_value(self) -> Any:
        return self.default

    def openapi(self) -> Obj:
        s: Obj = {"type": "integer", "format": self.fmt}
        if self.minimum is not None:
            s["minimum"] = self.minimum
        if self.maximum is not None:
            s["maximum"] = self.maximum
        return self._describe(s)

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        number = _number(value, path, errors)
        if number is None:
            return None
        if isinstance(number, float):
            errors.append(f"{path}: must be an integer, got {number}")
            return None
        return number if _bounds(number, path, errors, self.minimum, self.maximum) else None


@dataclass(frozen=True)
class Num(Node):
    """A JSON number (Go float64 or a resource.Quantity written as a number)."""

    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False

    def openapi(self) -> Obj:
        s: Obj = {"type": "number"}
        if self.minimum is not None:
            s["minimum"] = self.minimum
            if self.exclusive_minimum:
                s["exclusiveMinimum"] = True
        if self.maximum is not None:
            s["maximum"] = self.maximum
        return self._describe(s)

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        number = _number(value, path, errors)
        if number is None:
            return None
        if self.exclusive_minimum and self.minimum is not None and number <= self.minimum:
            errors.append(f"{path}: must be greater than {self.minimum}, got {number}")
            return None
        return number if _bounds(number, path, errors, self.minimum, self.maximum) else None


@dataclass(frozen=True)
class Bool(Node):
    description: str = ""
    default: bool | None = None

    def default_value(self) -> Any:
        return self.default

    def openapi(self) -> Obj:
        return self._describe({"type": "boolean"})

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        if not isinstance(value, bool):
            errors.append(f"{path}: must be true or false")
            return None
        return value


QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

_QUANTITY = re.compile(QUANTITY_PATTERN)


def _negative(quantity: str) -> bool:
    """A quantity (already matched by QUANTITY_PATTERN) below zero: "-0.0Gi" is zero."""
    number = re.match(r"-([0-9]*\.?[0-9]*)", quantity)
    return number is not None and float(number.group(1) or 0) != 0


@dataclass(frozen=True)
class Quantity(Node):
    """A Kubernetes resource.Quantity: "4Gi", "500m" or a plain number."""

    description: str = ""

    def openapi(self) -> Obj:
        return self._describe(
            {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            }
        )

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        if isinstance(value, str):
            if not _QUANTITY.match(value):
                errors.append(f"{path}: {value!r} is not a quantity (e.g. 4Gi, 500m, 2)")
                return None
            if _negative(value):
                # The pod's resources refuse it ("must be greater than or equal to 0").
                errors.append(f"{path}: {value!r} is negative: a resource is at least 0")
                return None
            return value
        number = _number(value, path, errors)
        if number is None:
            return None
        if number < 0:
            errors.append(f"{path}: must be at least 0, got {number}")
            return None
        return str(int(number)) if float(number).is_integer() else str(number)


# How deep an opaque value may nest. The deepest Kubernetes core types we pass through
# (an affinity term's matchExpressions values, an ephemeral volume's claim template)
# nest about 8 levels; a value far deeper is hostile, and would cost every later
# reader of the pod spec (copies, comparisons, the API server's merge) a stack frame
# per level.
MAX_OPAQUE_DEPTH = 32


def nesting(value: Any, limit: int) -> int:
    """How deep value nests (a scalar 0, {} or [] 1), counted without recursion and
    stopping once past limit."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest


@dataclass(frozen=True)
class Opaque(Node):
    """A Kubernetes core type we pass through unread (affinity, probes, volumes...).

    The apiserver validates it again where it lands (the pod); it is kept whole, not
    pruned. A value nested more than MAX_OPAQUE_DEPTH levels is refused.
    """

    description: str = ""
    kind: str = "object"  # or "array" for lists of opaque objects

    def openapi(self) -> Obj:
        if self.kind == "array":
            return self._describe(
                {
                    "type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }
            )
        return self._describe({"type": "object", "x-kubernetes-preserve-unknown-fields": True})

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        if self.kind == "array":
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                errors.append(f"{path}: must be a list of objects")
                return None
            deep = [
                i for i, v in enumerate(value) if nesting(v, MAX_OPAQUE_DEPTH) > MAX_OPAQUE_DEPTH
            ]
            for i in deep:
                errors.append(_too_deep(f"{path}[{i}]"))
            return None if deep else value
        if not isinstance(value, dict):
            errors.append(f"{path}: must be an object")
            return None
        if nesting(value, MAX_OPAQUE_DEPTH) > MAX_OPAQUE_DEPTH:
            errors.append(_too_deep(path))
            return None
        return value


def _too_deep(path: str) -> str:
    return (
        f"{path}: nested more than {MAX_OPAQUE_DEPTH} levels deep (no Kubernetes object "
        "of this kind nests so deep; refused before it reaches a pod)"
    )


@dataclass(frozen=True)
class Rule:
    """A cross-field rule: CEL for the apiserver, the same predicate in Python for us."""

    cel: str
    message: str
    holds: Callable[[Obj], bool]
    field_path: str = ""  # relative to the object, e.g. ".resourceClaims"


@dataclass(frozen=True)
class Object(Node):
    fields: dict[str, Node] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    description: str = ""
    # Keep fields beyond the typed ones: only where LLMKube's own set is open-ended.
    preserve: bool = False

    def openapi(self) -> Obj:
        s: Obj = {"type": "object"}
        if self.preserve:
            s["x-kubernetes-preserve-unknown-fields"] = True
        if self.fields:
            s["properties"] = {k: v.openapi() for k, v in self.fields.items()}
        if self.required:
            s["required"] = list(self.required)
        if self.rules:
            s["x-kubernetes-validations"] = [
                {"rule": r.cel, "message": r.message}
                | ({"fieldPath": r.field_path} if r.field_path else {})
                for r in self.rules
            ]
        return self._describe(s)

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        if not isinstance(value, dict):
            errors.append(f"{path}: must be an object")
            return None
        out: Obj = {}
        for key in self.required:
            if value.get(key) is None:
                errors.append(f"{path}.{key}: required")
        for key, node, default in self._plan:
            raw = value.get(key)
            if raw is None:
                if default is not None:
                    out[key] = default
                continue
            checked = node.check(raw, f"{path}.{key}", errors)
            if checked is not None:
                out[key] = checked
        for key in value:
            if key not in self.fields and value[key] is not None:
                out[key] = value[key]  # unknown: the apiserver prunes it; we ignore it
        for rule in self.rules:
            if not rule.holds(out):
                errors.append(f"{path}{rule.field_path}: {rule.message}")
        return out

    @cached_property
    def _plan(self) -> tuple[tuple[str, Node, Any], ...]:
        """(key, node, default) of each field: what every check walks, worked out once."""
        return tuple((key, node, node.default_value()) for key, node in self.fields.items())


@dataclass(frozen=True)
class Array(Node):
    items: Node = field(default_factory=lambda: Str())
    min_items: int | None = None
    max_items: int | None = None
    map_keys: tuple[str, ...] = ()  # x-kubernetes-list-type: map with these keys
    description: str = ""

    def openapi(self) -> Obj:
        s: Obj = {"type": "array", "items": self.items.openapi()}
        if self.min_items is not None:
            s["minItems"] = self.min_items
        if self.max_items is not None:
            s["maxItems"] = self.max_items
        if self.map_keys:
            s["x-kubernetes-list-type"] = "map"
            s["x-kubernetes-list-map-keys"] = list(self.map_keys)
        return self._describe(s)

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        if not isinstance(value, list):
            errors.append(f"{path}: must be a list")
            return None
        if self.min_items is not None and len(value) < self.min_items:
            errors.append(f"{path}: must have at least {self.min_items} items, got {len(value)}")
        if self.max_items is not None and len(value) > self.max_items:
            errors.append(f"{path}: must have at most {self.max_items} items, got {len(value)}")
        out = [self.items.check(v, f"{path}[{i}]", errors) for i, v in enumerate(value)]
        if self.map_keys:
            seen: set[tuple[Any, ...]] = set()
            for i, item in enumerate(out):
                if isinstance(item, dict):
                    key = tuple(item.get(k) for k in self.map_keys)
                    if key in seen:
                        errors.append(
                            f"{path}[{i}]: duplicate {'/'.join(self.map_keys)} {key[0]!r}"
                        )
                    seen.add(key)
        return [v for v in out if v is not None]


@dataclass(frozen=True)
class StrMap(Node):
    """map[string]string (labels, annotations, nodeSelector)."""

    description: str = ""

    def openapi(self) -> Obj:
        return self._describe({"type": "object", "additionalProperties": {"type": "string"}})

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            errors.append(f"{path}: must be a map of strings")
            return None
        return value


@dataclass(frozen=True)
class Free(Node):
    """A value of any JSON shape that LLMKube itself leaves open (metadataOverrides...)."""

    description: str = ""

    def openapi(self) -> Obj:
        return self._describe({"x-kubernetes-preserve-unknown-fields": True})

    def check(self, value: Any, path: str, errors: Errors) -> Any:
        return value


def validate(node: Node, value: Any, path: str) -> tuple[Any, Errors]:
    """The value with defaults applied, and every error found (empty when valid)."""
    errors: Errors = []
    if value is None:
        value = {}
    checked = node.check(value, path, errors)
    return checked, errors
