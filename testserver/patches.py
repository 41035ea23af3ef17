"""The patch formats a client may send: JSON merge patch, JSON patch, and apply/strategic.

Strategic merge and server-side apply are served as a JSON merge (lists replaced
whole): enough for clients that send complete lists, which is what this project does.
"""

from __future__ import annotations

from typing import Any

from .storage import StorageError, clone

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, on a copy of target (made once, at the top)."""
    if not isinstance(patch, dict):
        return clone(patch)
    return _merge_into(clone(target) if isinstance(target, dict) else {}, patch)


def _merge_into(result: Any, patch: Any) -> Any:
    """Merge patch into result, which is the caller's own copy."""
    if not isinstance(patch, dict):
        # Strings and numbers are immutable: only containers need a copy of their own.
        return clone(patch) if isinstance(patch, list) else patch
    if not isinstance(result, dict):
        result = {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_into(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise StorageError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 add, remove, replace and test."""
    if not isinstance(ops, list):
        raise StorageError(400, "BadRequest", "JSON patch must be a list of operations")
    doc = clone(target)
    for op in ops:
        parts = _pointer(op.get("path", ""))
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        kind = op.get("op")
        if kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op.get("value"):
                # kube-apiserver's words for a failed test (the path is not named).
                raise StorageError(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                )
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(index, op["value"])
                else:
                    parent[index] = op["value"]
            else:
                parent[last] = op["value"]
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            else:
                parent.pop(last)
        else:
            raise StorageError(422, "Invalid", f"unsupported JSON patch op {kind!r}")
    return doc


def apply_patch(content_type: str, target: Any, patch: Any) -> Any:
    base = content_type.split(";")[0].strip()
    if base in (MERGE, STRATEGIC, APPLY):
        return merge_patch(target, patch)
    if base == JSON_PATCH:
        return json_patch(target, patch)
    raise StorageError(
        415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {base}"
    )
