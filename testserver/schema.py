"""CRD structural schemas as kube-apiserver applies them on every write of a custom resource.

Order as upstream: prune unknown fields, apply defaults, then validate (OpenAPI keywords
first, then `x-kubernetes-validations` CEL rules on nodes whose value passed them). The
errors read as kube-openapi's do, so kubectl prints the same lines as against a cluster.
On update, an error on a value that did not change is dropped (CRD validation
ratcheting, on by default since 1.30): an old object stays writable.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from objtypes import Obj

from .cel_rules import CelError, evaluate, references_old_self

_ROOT_KEPT = ("apiVersion", "kind", "metadata")
_ABSENT = object()


@dataclass
class Cause:
    """One field error: reason as metav1.CauseType, field as a dotted path."""

    reason: str
    field: str
    message: str

    def as_status_cause(self) -> Obj:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def _fmt(value: Any) -> str:
    """A value as Go's field errors print it: strings quoted, scalars bare."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return '"object"' if isinstance(value, dict) else '"array"'


def invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause("FieldValueInvalid", path, f"Invalid value: {_fmt(value)}: {detail}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# -- pruning and defaulting ------------------------------------------------------------


def _preserves(schema: Obj) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def prune(
    value: Any, schema: Obj, root: bool = False, path: str = "", dropped: list[str] | None = None
) -> Any:
    """Drop fields the schema does not specify, in place; dropped collects their paths."""
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        embedded = root or schema.get("x-kubernetes-embedded-resource")
        for key in list(value):
            if embedded and key in _ROOT_KEPT:
                if key == "metadata" and not root and isinstance(value[key], dict):
                    _prune_embedded_metadata(value[key])
                continue
            if props is not None and key in props:
                prune(value[key], props[key], path=_join(path, key), dropped=dropped)
            elif isinstance(extra, dict):
                prune(value[key], extra, path=_join(path, key), dropped=dropped)
            elif not _preserves(schema) and extra is not True:
                del value[key]
                if dropped is not None:
                    dropped.append(_join(path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            prune(item, schema["items"], path=f"{path}[{i}]", dropped=dropped)
    return value


def _prune_embedded_metadata(meta: Obj) -> None:
    kept = {"name", "generateName", "namespace", "labels", "annotations", "finalizers"}
    for key in list(meta):
        if key not in kept:
            del meta[key]


def default(value: Any, schema: Obj) -> Any:
    """Fill absent properties that declare a default, in place (defaults are defaulted too)."""
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = json.loads(json.dumps(sub["default"]))
            if key in value:
                default(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            props = schema.get("properties") or {}
            for key, item in value.items():
                if key not in props:
                    default(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(item, schema["items"])
    return value


# -- validation -------------------------------------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _type_ok(value: Any, type_: str) -> bool:
    if isinstance(value, bool) and type_ in ("integer", "number"):
        return False
    if type_ == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(type_, (object,)))


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    r"""The pattern as kube-apiserver runs it (Go's regexp): `$` is the end of the text,
    never "before a final newline" as in Python, and \w, \d, \s are ASCII classes."""
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


class Validator:
    def __init__(self, schema: Obj) -> None:
        self.schema = schema
        self.causes: list[Cause] = []

    def run(self, obj: Obj, old: Obj | None) -> list[Cause]:
        """The schema's errors; the CEL rules it met wait in self.pending (run_rules)."""
        self.causes = []
        self.pending: list[tuple[Any, Any, Obj, str]] = []
        self._node(obj, old if old is not None else _ABSENT, self.schema, "", root=True)
        return self.causes

    def run_rules(self) -> list[Cause]:
        """The x-kubernetes-validations rules met by run(), in its order (a node's own
        rules before its children's), as kube-apiserver's CEL pass after the schema's."""
        self.causes = []
        for value, old, schema, path in self.pending:
            self._rules(value, old, schema, path)
        return self.causes

    def _node(self, value: Any, old: Any, schema: Obj, path: str, root: bool = False) -> None:
        if old is not _ABSENT and old == value:
            # Ratcheting: an unchanged value keeps its errors to itself, so none are looked
            # for (a status write does not validate the unchanged spec again).
            return
        if schema.get("x-kubernetes-validations"):
            self.pending.append((value, old, schema, path))
        self._keywords(value, old, schema, path, root)

    def _keywords(self, value: Any, old: Any, schema: Obj, path: str, root: bool) -> None:
        if value is None:
            if not schema.get("nullable"):
                self.causes.append(
                    invalid(
                        path,
                        value,
                        f'{path} in body must be of type {schema.get("type", "object")}: "null"',
                    )
                )
            return
        type_ = schema.get("type")
        if schema.get("x-kubernetes-int-or-string"):
            if not isinstance(value, int | str) or isinstance(value, bool):
                self.causes.append(
                    invalid(path, value, f"{path} in body must be of type integer or string")
                )
                return
        elif type_ and not _type_ok(value, type_):
            got = "null" if value is None else _go_type(value)
            self.causes.append(
                Cause(
                    "FieldValueTypeInvalid",
                    path,
                    f'Invalid value: "{got}": {path} in body must be of type {type_}: "{got}"',
                )
            )
            return
        if "enum" in schema and value not in schema["enum"]:
            supported = ", ".join(_fmt(v) for v in schema["enum"])
            self.causes.append(
                Cause(
                    "FieldValueNotSupported",
                    path,
                    f"Unsupported value: {_fmt(value)}: supported values: {supported}",
                )
            )
        if isinstance(value, str):
            self._string(value, schema, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._number(value, schema, path)
        elif isinstance(value, list):
            self._array(value, old, schema, path)
        elif isinstance(value, dict):
            self._object(value, old, schema, path, root)

    def _string(self, value: str, schema: Obj, path: str) -> None:
        if "minLength" in schema and len(value) < schema["minLength"]:
            self.causes.append(
                invalid(
                    path,
                    value,
                    f"{path} in body should be at least {schema['minLength']} chars long",
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.causes.append(
                Cause(
                    "FieldValueTooLong",
                    path,
                    f"Too long: may not be more than {schema['maxLength']} bytes",
                )
            )
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            self.causes.append(
                invalid(path, value, f"{path} in body should match '{schema['pattern']}'")
            )

    def _number(self, value: float, schema: Obj, path: str) -> None:
        if "minimum" in schema:
            low = schema["minimum"]
            if schema.get("exclusiveMinimum") and value <= low:
                self.causes.append(
                    invalid(path, value, f"{path} in body should be greater than {low}")
                )
            elif value < low:
                self.causes.append(
                    invalid(path, value, f"{path} in body should be greater than or equal to {low}")
                )
        if "maximum" in schema:
            high = schema["maximum"]
            if schema.get("exclusiveMaximum") and value >= high:
                self.causes.append(
                    invalid(path, value, f"{path} in body should be less than {high}")
                )
            elif value > high:
                self.causes.append(
                    invalid(path, value, f"{path} in body should be less than or equal to {high}")
                )
        if "multipleOf" in schema and value % schema["multipleOf"]:
            self.causes.append(
                invalid(
                    path, value, f"{path} in body should be a multiple of {schema['multipleOf']}"
                )
            )

    def _array(self, value: list[Any], old: Any, schema: Obj, path: str) -> None:
        if "minItems" in schema and len(value) < schema["minItems"]:
            self.causes.append(
                invalid(
                    path,
                    len(value),
                    f"{path} in body should have at least {schema['minItems']} items",
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.causes.append(
                Cause(
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                )
            )
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        olds = _correlate_list(value, old, schema)
        for i, item in enumerate(value):
            self._node(item, olds[i], items, f"{path}[{i}]")

    def _object(self, value: Obj, old: Any, schema: Obj, path: str, root: bool) -> None:
        for key in schema.get("required") or []:
            if key not in value:
                self.causes.append(Cause("FieldValueRequired", _join(path, key), "Required value"))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            self.causes.append(
                invalid(
                    path,
                    len(value),
                    f"{path} in body should have at least {schema['minProperties']} properties",
                )
            )
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self.causes.append(
                Cause(
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                )
            )
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, item in value.items():
            if root and key in _ROOT_KEPT:
                continue
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                self._node(item, old_map.get(key, _ABSENT), sub, _join(path, key))

    def _rules(self, value: Any, old: Any, schema: Obj, path: str) -> None:
        for rule in schema["x-kubernetes-validations"]:
            text = rule.get("rule", "")
            transition = references_old_self(text)
            if transition and old is _ABSENT and not rule.get("optionalOldSelf"):
                continue  # transition rules run on updates of an existing value only
            env: Obj = {"self": value}
            if transition:
                env["oldSelf"] = None if old is _ABSENT else old
            field = path + rule["fieldPath"] if rule.get("fieldPath") else path
            try:
                ok = evaluate(text, env)
            except CelError as e:
                self.causes.append(invalid(field, value, f"{e} evaluating rule: {text}"))
                continue
            if ok is True:
                continue
            self.causes.append(self._rule_cause(rule, env, field, value))

    @staticmethod
    def _rule_cause(rule: Obj, env: Obj, field: str, value: Any) -> Cause:
        message = rule.get("message") or f"failed rule: {rule.get('rule', '')}"
        if expr := rule.get("messageExpression"):
            try:
                out = evaluate(expr, env)
                if isinstance(out, str) and out.strip():
                    message = out
            except CelError:
                pass
        reason = rule.get("reason") or "FieldValueInvalid"
        if reason == "FieldValueForbidden":
            return Cause(reason, field, f"Forbidden: {message}")
        if reason == "FieldValueRequired":
            return Cause(reason, field, f"Required value: {message}")
        if reason == "FieldValueDuplicate":
            return Cause(reason, field, f"Duplicate value: {message}")
        return invalid(field, value, message)


def _go_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _correlate_list(value: list[Any], old: Any, schema: Obj) -> list[Any]:
    """Old items paired with new ones: by key for map lists, else none (as upstream)."""
    keys = schema.get("x-kubernetes-list-map-keys")
    if schema.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(old, list):
        return [_ABSENT] * len(value)

    def key_of(item: Any) -> tuple[Any, ...] | None:
        return tuple(item.get(k) for k in keys) if isinstance(item, dict) else None

    by_key = {key_of(o): o for o in old}
    return [by_key.get(key_of(item), _ABSENT) for item in value]


@dataclass
class VersionSchema:
    """The openAPIV3Schema of one served CRD version."""

    schema: Obj
    # Whether any x-kubernetes-validations rule is in the schema (kube-apiserver has a CEL
    # validator for this version only then).
    has_rules: bool = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.has_rules = "x-kubernetes-validations" in json.dumps(self.schema)

    def admit(
        self,
        obj: Obj,
        old: Obj | None,
        dropped: list[str] | None = None,
        scale_replicas: str = "",
    ) -> list[Cause]:
        """Prune and default obj in place, then return its field errors (empty if valid).

        dropped collects the paths of pruned unknown fields (for fieldValidation)."""
        prune(obj, self.schema, root=True, dropped=dropped)
        default(obj, self.schema)
        validator = Validator(self.schema)
        causes = validator.run(obj, old)
        if scale_replicas:
            causes += scale_errors(obj, scale_replicas)
        if not self.has_rules:
            return causes
        if any(c.reason in _BLOCKING for c in causes):
            # kube-apiserver runs no CEL rule over an object the schema refused this way.
            return [
                *causes,
                Cause("FieldValueInvalid", "<nil>", f"Invalid value: null: {_UNCHECKED}"),
            ]
        return causes + validator.run_rules()


# Schema errors after which kube-apiserver skips the CEL rules (apiextensions'
# hasBlockingErr): the value is of a shape the rules' types cannot hold.
_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
_UNCHECKED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


def scale_errors(obj: Obj, spec_replicas_path: str) -> list[Cause]:
    """kube-apiserver's check of a custom resource's scale spec replicas (its field named
    as the CRD's specReplicasPath, with the leading dot), on every write of the object."""
    value: Any = obj
    for part in spec_replicas_path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int):
        go_type = {str: "string", float: "float64", bool: "bool", list: "[]interface {}"}.get(
            type(value), "map[string]interface {}"
        )
        shown = value if isinstance(value, str | float) else json.dumps(value)
        return [
            Cause(
                "FieldValueInvalid",
                spec_replicas_path,
                f"Invalid value: 0: {spec_replicas_path} accessor error: {shown} is of the "
                f"type {go_type}, expected int64",
            )
        ]
    if value < 0:
        return [invalid(spec_replicas_path, value, "should be a non-negative integer")]
    if value > 2**31 - 1:
        return [invalid(spec_replicas_path, value, f"should be less than or equal to {2**31 - 1}")]
    return []


def invalid_error_details(kind: str, group: str, name: str, causes: list[Cause]) -> tuple[str, Obj]:
    """The message and details of kube-apiserver's 422 Invalid Status."""
    qualified = f"{kind}.{group}" if group else kind
    errors = [str(c) for c in causes]
    body = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    message = f'{qualified} "{name}" is invalid: {body}'
    details: Obj = {
        "name": name,
        "group": group,
        "kind": kind,
        "causes": [c.as_status_cause() for c in causes],
    }
    return message, details
