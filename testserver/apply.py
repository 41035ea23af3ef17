"""Server-side apply: field ownership in metadata.managedFields, conflicts, force.

Field sets are sets of paths (tuples); an item of an associative list is addressed by its
key as upstream writes it (`k:{"name":"a"}`). Lists are associative when the CRD schema
says so (x-kubernetes-list-type: map), or, for built-in kinds, when every item is an object
with a `name` (containers, env, ports, volumes: their patch merge key); other lists are
atomic and owned whole. Writes other than apply record an `Update` entry for the fields
they changed, once an object has managed fields (or the request names a fieldManager).
"""

from __future__ import annotations

import functools
import json
import time
from datetime import UTC, datetime
from typing import Any

from objtypes import Obj

from .storage import StorageError, clone

Path = tuple[str, ...]
_SKIPPED_META = {"labels", "annotations"}


_stamp: tuple[int, str] = (-1, "")


def _now() -> str:
    """The time an entry records, to the second (formatted once per second)."""
    global _stamp
    second = int(time.time())
    if _stamp[0] != second:
        _stamp = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _stamp[1]


# Built-in kinds' associative lists, by field name, with kube's list-map keys (the
# OpenAPI x-kubernetes-list-map-keys of core/v1 and apps/v1). A key field left out of an
# item takes its default, as upstream does for `protocol`.
_BUILTIN_KEYS: dict[str, list[str]] = {
    "containers": ["name"],
    "initContainers": ["name"],
    "ephemeralContainers": ["name"],
    "env": ["name"],
    "volumes": ["name"],
    "imagePullSecrets": ["name"],
    "resourceClaims": ["name"],
    "claims": ["name"],
    "volumeMounts": ["mountPath"],
    "volumeDevices": ["devicePath"],
    "conditions": ["type"],
    "ownerReferences": ["uid"],
    "topologySpreadConstraints": ["topologyKey", "whenUnsatisfiable"],
}
# Lists kube treats as atomic (replaced whole), though their items may carry a name.
_BUILTIN_ATOMIC = {"args", "command", "tolerations", "envFrom"}
_KEY_DEFAULTS = {"protocol": "TCP"}


def _item_keys(
    items: list[Any], schema: Obj | None, builtin: bool, field: str = ""
) -> list[str] | None:
    if schema is not None:
        if schema.get("x-kubernetes-list-type") == "map":
            return list(schema.get("x-kubernetes-list-map-keys") or [])
        return None
    if not builtin or field in _BUILTIN_ATOMIC:
        return None
    if field in _BUILTIN_KEYS:
        return _BUILTIN_KEYS[field]
    if field == "ports" and items and all(isinstance(i, dict) for i in items):
        # Container ports are keyed by containerPort, Service ports by port.
        if all("containerPort" in i for i in items):
            return ["containerPort", "protocol"]
        if all("port" in i for i in items):
            return ["port", "protocol"]
    if items and all(isinstance(i, dict) and "name" in i for i in items):
        return ["name"]
    return None


def _key_values(item: Obj, keys: list[str]) -> Obj:
    return {k: item.get(k, _KEY_DEFAULTS.get(k)) for k in keys}


def _key_token(item: Obj, keys: list[str]) -> str:
    values = tuple(item.get(k, _KEY_DEFAULTS.get(k)) for k in keys)
    try:
        # Typed: 1, 1.0 and True are one key to a tuple and three to JSON.
        return _token(tuple(keys), tuple((type(v), v) for v in values))
    except TypeError:  # a key of a list or a map: not hashable, seldom seen
        return "k:" + json.dumps(_key_values(item, keys), separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def _token(keys: tuple[str, ...], typed: tuple[tuple[type, Any], ...]) -> str:
    """A list item's "k:{...}" token, encoded once per distinct key (the same few recur
    in every object: a condition's type, a container's name)."""
    values = dict(zip(keys, (v for _, v in typed), strict=True))
    return "k:" + json.dumps(values, separators=(",", ":"))


def _matches(item: Any, want: Obj) -> bool:
    return isinstance(item, dict) and _key_values(item, list(want)) == want


_NO_SCHEMA: Obj = {}


def _sub(schema: Obj | None, key: str) -> Obj | None:
    """The schema of a key's value; read only (shared with the CRD's schema, not copied)."""
    if schema is None:
        return None
    props = schema.get("properties") or _NO_SCHEMA
    if key in props:
        sub: Obj = props[key]
        return sub
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else _NO_SCHEMA


def leaves(value: Any, schema: Obj | None, builtin: bool, prefix: Path = ()) -> set[Path]:
    """The field paths a value sets."""
    if isinstance(value, dict) and value:
        out: set[Path] = set()
        for key, item in value.items():
            out |= leaves(item, _sub(schema, key), builtin, (*prefix, f"f:{key}"))
        return out
    if isinstance(value, list) and value:
        item_schema = (schema or {}).get("items") if schema is not None else None
        field = prefix[-1][2:] if prefix and prefix[-1].startswith("f:") else ""
        keys = _item_keys(value, schema, builtin, field)
        # A list of the wrong shape (stored unchecked, schema validation off) is atomic.
        if keys and all(isinstance(item, dict) for item in value):
            out = set()
            for item in value:
                token = _key_token(item, keys)
                out.add((*prefix, token))
                sub = leaves(item, item_schema, builtin, (*prefix, token))
                out |= sub
            return out
    return {prefix} if prefix else set()


def object_fields(obj: Obj, schema: Obj | None, builtin: bool, status: bool) -> set[Path]:
    """Fields of an object that apply tracks: labels, annotations, ownerReferences (by
    uid, as upstream) and the body."""
    fields: set[Path] = set()
    meta = obj.get("metadata") or {}
    for key in _SKIPPED_META:
        if isinstance(meta.get(key), dict):
            for name in meta[key]:
                fields.add(("f:metadata", f"f:{key}", f"f:{name}"))
    if isinstance(meta.get("ownerReferences"), list):
        path = ("f:metadata", "f:ownerReferences")
        fields |= leaves(meta["ownerReferences"], None, True, path)
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata") or (key == "status" and not status):
            continue
        fields |= leaves(value, _sub(schema, key), builtin, (f"f:{key}",))
    return fields


def _same_but_status(old: Obj, new: Obj) -> bool:
    """Every field object_fields tracks outside status is the same in both."""
    keys = (old.keys() | new.keys()) - {"apiVersion", "kind", "metadata", "status"}
    if any(old.get(k) != new.get(k) for k in keys):
        return False
    a, b = old.get("metadata") or {}, new.get("metadata") or {}
    return all(a.get(k) == b.get(k) for k in (*_SKIPPED_META, "ownerReferences"))


def _status_fields(obj: Obj, schema: Obj | None, builtin: bool) -> set[Path]:
    """object_fields' part under status."""
    if "status" not in obj:
        return set()
    return leaves(obj["status"], _sub(schema, "status"), builtin, ("f:status",))


class _DuplicateKey(Exception):
    """A keyed list holds two items with one key: _lookup reads only the first."""


def _leaf_values(
    value: Any, schema: Obj | None, builtin: bool, prefix: Path, out: dict[Path, Any]
) -> None:
    """leaves(), each path with the value _lookup would find there; _DuplicateKey where
    a path's value would depend on which of two items is read."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _leaf_values(item, _sub(schema, key), builtin, (*prefix, f"f:{key}"), out)
        return
    if isinstance(value, list) and value:
        item_schema = (schema or {}).get("items") if schema is not None else None
        field = prefix[-1][2:] if prefix and prefix[-1].startswith("f:") else ""
        keys = _item_keys(value, schema, builtin, field)
        if keys and all(isinstance(item, dict) for item in value):
            for item in value:
                path = (*prefix, _key_token(item, keys))
                if path in out:
                    raise _DuplicateKey
                out[path] = item
                _leaf_values(item, item_schema, builtin, path, out)
            return
    if prefix:
        out[prefix] = value


def _status_values(obj: Obj, schema: Obj | None, builtin: bool) -> dict[Path, Any]:
    """_status_fields with the value at each path."""
    out: dict[Path, Any] = {}
    if "status" in obj:
        _leaf_values(obj["status"], _sub(schema, "status"), builtin, ("f:status",), out)
    return out


def _status_changes(
    old: Obj, new: Obj, schema: Obj | None, builtin: bool
) -> tuple[set[Path], set[Path], set[Path]]:
    """(old's status fields, new's, the fields the write changed), each path's value read
    in one walk of each status rather than looked up from the root per path."""
    try:
        before, after = _status_values(old, schema, builtin), _status_values(new, schema, builtin)
    except _DuplicateKey:
        before_status = _status_fields(old, schema, builtin)
        after_status = _status_fields(new, schema, builtin)
        return (
            before_status,
            after_status,
            _looked_up_changes(old, new, before_status, after_status),
        )
    # Lists old held whole (no keys, or items of another shape) with something in them.
    held = [p for p, value in before.items() if isinstance(value, list) and value]
    changed = {
        p
        for p, value in after.items()
        if (before[p] != value if p in before else _new_field_differs(old, held, p, value))
    }
    changed |= before.keys() - after.keys()
    return set(before), set(after), changed


def _new_field_differs(old: Obj, held: list[Path], path: Path, value: Any) -> bool:
    """Whether a field that is not one of old's differs from old's value at its path.
    Below a list old held whole, _lookup can find an item equal to a new keyed one;
    anywhere else old has nothing there, or a map the new leaf is not."""
    if any(path[: len(h)] == h for h in held):
        return _lookup(old, path) != (True, value)
    return True


def _looked_up_changes(old: Obj, new: Obj, before: set[Path], after: set[Path]) -> set[Path]:
    """The fields a write changed, each looked up from both objects' roots: new's fields
    whose value differs, and old's that new lacks."""
    return {p for p in after if _lookup(old, p) != _lookup(new, p)} | (before - after)


_TREES: dict[frozenset[Path], Obj] = {}  # field set -> its fieldsV1 tree


def to_fields_v1(paths: set[Path]) -> Obj:
    """The fieldsV1 tree of a field set, built once per distinct set: objects of one kind
    mostly carry the same few (every Model's spec, its status). The tree is shared by
    every entry of that set, and read only: a write builds new entries, never edits one."""
    key = frozenset(paths)
    tree = _TREES.get(key)
    if tree is None:
        if len(_TREES) >= 4096:
            _TREES.clear()
        tree = _TREES[key] = _fields_tree(paths)
    return tree


def _fields_tree(paths: set[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
        if path and path[-1].startswith("k:"):
            node.setdefault(".", {})
    return root


def from_fields_v1(tree: Obj, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, sub in tree.items():
        if key == ".":
            continue
        path = (*prefix, key)
        if not sub or set(sub) == {"."}:
            out.add(path)
        else:
            if "." in sub:
                out.add(path)
            out |= from_fields_v1(sub, path)
    return out


@functools.lru_cache(maxsize=4096)
def _item_key(token: str) -> Obj:
    """A list item's key from its "k:{...}" token, decoded once per distinct token (the
    same few recur in every object: a condition's type, a container's name). Read only."""
    key: Obj = json.loads(token[2:])
    return key


def _lookup(obj: Any, path: Path) -> tuple[bool, Any]:
    node = obj
    for part in path:
        if part.startswith("f:") and isinstance(node, dict) and part[2:] in node:
            node = node[part[2:]]
        elif part.startswith("k:") and isinstance(node, list):
            want = _item_key(part)
            match = [i for i in node if _matches(i, want)]
            if not match:
                return False, None
            node = match[0]
        else:
            return False, None
    return True, node


def _remove(obj: Any, path: Path) -> None:
    parent_found, parent = _lookup(obj, path[:-1])
    if not parent_found:
        return
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        want = json.loads(last[2:])
        parent[:] = [i for i in parent if not _matches(i, want)]


def _prune_emptied(obj: Obj, path: Path, kept: set[Path]) -> None:
    """Drop the maps and lists a removal left empty, up to one someone still sets: a
    field nobody sets is absent (for built-ins, Go's omitempty does the same upstream)."""
    for depth in range(len(path) - 1, 1, -1):
        parent = path[:depth]
        found, value = _lookup(obj, parent)
        if not found or value not in ({}, []) or parent in kept:
            return
        _remove(obj, parent)


def _copy(value: Any) -> Any:
    """JSON data copied (scalars are immutable: no copy); the hot path of every apply."""
    return clone(value) if isinstance(value, dict | list) else value


def merge(current: Any, applied: Any, schema: Obj | None, builtin: bool, field: str = "") -> Any:
    """The applied configuration laid over the current object."""
    if isinstance(current, dict) and isinstance(applied, dict):
        out = dict(current)
        for key, value in applied.items():
            out[key] = merge(current.get(key), value, _sub(schema, key), builtin, key)
        return out
    if isinstance(current, list) and isinstance(applied, list):
        keys = _item_keys(applied, schema, builtin, field)
        if keys and all(isinstance(i, dict) for i in current):
            item_schema = (schema or {}).get("items") if schema is not None else None
            by_key = {_key_token(i, keys): i for i in current}
            result = list(current)
            for item in applied:
                token = _key_token(item, keys)
                if token in by_key:
                    index = result.index(by_key[token])
                    result[index] = merge(by_key[token], item, item_schema, builtin)
                else:
                    result.append(_copy(item))
            return result
    return _copy(applied)


def _entries(obj: Obj) -> list[Obj]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _owned(entry: Obj) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _entry(manager: str, operation: str, api_version: str, fields: set[Path], sub: str) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": _now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(fields),
    }
    if sub:
        entry["subresource"] = sub
    return entry


def _using(entry: Obj) -> str:
    """How kube-apiserver names a conflicting manager after its name: an Update manager
    with the apiVersion it wrote, an Apply manager by its name alone."""
    if entry.get("operation") == "Update":
        return f" using {entry.get('apiVersion', '')}"
    return ""


def _set_entries(obj: Obj, entries: list[Obj]) -> None:
    obj.setdefault("metadata", {})["managedFields"] = [
        e for e in entries if e.get("fieldsV1")
    ] or None
    if obj["metadata"]["managedFields"] is None:
        del obj["metadata"]["managedFields"]


def server_side_apply(
    current: Obj | None,
    applied: Obj,
    *,
    manager: str,
    force: bool,
    schema: Obj | None,
    builtin: bool,
    status: bool,
    subresource: str = "",
) -> Obj:
    """The object after this manager applies `applied`; raises 409 on conflicts."""
    if not manager:
        raise StorageError(
            422,
            "Invalid",
            'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required '
            "value: is required for apply patch",
        )
    api_version = applied.get("apiVersion", "")
    base = clone(current) if current is not None else {}
    new_fields = object_fields(applied, schema, builtin, status)
    entries = _entries(base)
    conflicts: list[tuple[str, str, Path]] = []
    for e in entries:
        if e.get("manager") == manager and e.get("operation") == "Apply":
            continue
        for path in _owned(e) & new_fields:
            if path[-1].startswith("k:"):
                continue  # a list item is shared; only its fields conflict
            found, value = _lookup(base, path)
            _, wanted = _lookup(applied, path)
            if found and value != wanted:
                conflicts.append((e.get("manager", ""), _using(e), path))
    if conflicts and not force:
        causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f'conflict with "{m}"{using}',
                "field": _dotted(p),
            }
            for m, using, p in sorted(conflicts)
        ]
        lines = "\n".join(f"- {c['message']}: {c['field']}" for c in causes)
        n = len(causes)
        raise StorageError(
            409,
            "Conflict",
            f"Apply failed with {n} conflict{'s' if n > 1 else ''}: "
            + (f"{causes[0]['message']}: {causes[0]['field']}" if n == 1 else "\n" + lines),
            {"causes": causes},
        )
    previous: set[Path] = set()
    previous_entry: Obj | None = None
    position = len(entries)
    kept: list[Obj] = []
    for i, e in enumerate(entries):
        if e.get("manager") == manager and e.get("operation") == "Apply":
            previous, previous_entry, position = _owned(e), e, i
            continue
        # Forced fields leave their other managers; same-value fields stay shared.
        taken = {p for m, _, p in conflicts if m == e.get("manager")}
        if taken:
            e = {**e, "fieldsV1": to_fields_v1(_owned(e) - taken)}
        kept.append(e)
    merged: Obj = merge(
        base, {k: v for k, v in applied.items() if k != "metadata"}, schema, builtin
    )
    meta_applied = applied.get("metadata") or {}
    meta = merged.setdefault("metadata", {})
    for key in _SKIPPED_META:
        if isinstance(meta_applied.get(key), dict):
            meta[key] = {**(meta.get(key) or {}), **meta_applied[key]}
    if isinstance(meta_applied.get("ownerReferences"), list):
        meta["ownerReferences"] = merge(
            meta.get("ownerReferences"),
            meta_applied["ownerReferences"],
            None,
            True,
            "ownerReferences",
        )
    for key in ("name", "generateName", "namespace", "finalizers"):
        if key in meta_applied:
            meta[key] = _copy(meta_applied[key])
    others: set[Path] = set()
    for e in kept:
        others |= _owned(e)
    kept_paths = new_fields | others
    # Shortest first: an item goes as a whole, before its key fields could be removed.
    for path in sorted(previous - kept_paths, key=len):
        _remove(merged, path)
        _prune_emptied(merged, path, kept_paths)
    merged["apiVersion"], merged["kind"] = applied.get("apiVersion"), applied.get("kind")
    entry = _entry(manager, "Apply", api_version, new_fields, subresource)
    if previous_entry is not None and {**previous_entry, "time": entry["time"]} == entry:
        # The same fields again: keep the entry as it was, so an apply that changes
        # nothing is no write at all (no new resourceVersion, no watch event), as upstream.
        entry = previous_entry
    _set_entries(merged, [*kept[:position], entry, *kept[position:]])
    return merged


def record_update(
    old: Obj,
    new: Obj,
    *,
    manager: str,
    schema: Obj | None,
    builtin: bool,
    status: bool,
    subresource: str = "",
) -> None:
    """Give `manager` (operation Update) the fields a non-apply write changed, in place."""
    if status and _same_but_status(old, new):
        # A status write (the usual one: the status subresource keeps the rest as it
        # was): only status fields can differ, so only they are compared.
        rest = object_fields(new, schema, builtin, status=False)
        before_status, after_status, changed = _status_changes(old, new, schema, builtin)
        before, after = rest | before_status, rest | after_status
    else:
        before = object_fields(old, schema, builtin, status)
        after = object_fields(new, schema, builtin, status)
        # A create (no old object): every field of new is new.
        changed = _looked_up_changes(old, new, before, after) if old else set(after)
    entries = [e for e in _entries(old)]
    if not changed:
        # A write that changes no field leaves managedFields (and so the object) as it was.
        new.setdefault("metadata", {}).pop("managedFields", None)
        if entries:
            new["metadata"]["managedFields"] = entries
        return
    updated: list[Obj] = []
    mine: set[Path] = set()
    for e in entries:
        owned = _owned(e) & after if e.get("operation") == "Update" else _owned(e)
        if e.get("manager") == manager and e.get("operation") == "Update":
            mine = owned
            continue
        updated.append({**e, "fieldsV1": to_fields_v1(owned - changed)})
    mine = (mine | (changed & after)) & after
    if mine:
        updated.append(_entry(manager, "Update", new.get("apiVersion", ""), mine, subresource))
    _set_entries(new, updated)


def _dotted(path: Path) -> str:
    """kube-apiserver's spelling: .spec.containers[name="main"].image."""
    out = ""
    for part in path:
        if part.startswith("f:"):
            out += f".{part[2:]}"
        else:
            key = json.loads(part[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]"
    return out
