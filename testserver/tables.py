"""meta.k8s.io/v1 Table responses: what `kubectl get` asks for and prints as columns.

Custom resources get their CRD version's additionalPrinterColumns (Name first, Age when
none are declared); built-ins get the columns kube-apiserver prints for the common kinds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from objtypes import Obj

from .registry import Registered

_NAME = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace.",
    "priority": 0,
}
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([\w.-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def wants_table(accept: str) -> bool:
    """True when the first acceptable media type is a Table (kubectl get's Accept)."""
    first = accept.split(",")[0]
    return "as=Table" in first.replace(" ", "")


def jsonpath(obj: Any, path: str) -> Any:
    """The subset of JSONPath printer columns use: fields, [n], [?(@.k=="v")]."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    current: list[Any] = [obj]
    for m in _STEP.finditer(path):
        field, index, key, want = m.groups()
        nxt: list[Any] = []
        for value in current:
            if field is not None and isinstance(value, dict) and field in value:
                nxt.append(value[field])
            elif index is not None and isinstance(value, list) and int(index) < len(value):
                nxt.append(value[int(index)])
            elif key is not None and isinstance(value, list):
                nxt.extend(v for v in value if isinstance(v, dict) and str(v.get(key)) == want)
        current = nxt
    return current[0] if current else None


def human_age(timestamp: str | None, now: datetime | None = None) -> str:
    """duration.HumanDuration, as kubectl prints Age."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 0:
        return "0s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 730:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d" if days < 2920 else f"{days // 365}y"


def _cell(value: Any, type_: str) -> Any:
    if value is None:
        return None
    if type_ == "date":
        return human_age(str(value))
    if type_ == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if type_ in ("number", "boolean") or isinstance(value, int | float | bool):
        return value
    return value if isinstance(value, str) else str(value)


def _ready_containers(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _node_status(node: Obj) -> str:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return "Ready" if c.get("status") == "True" else "NotReady"
    return "Unknown"


def _roles(node: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix))
    return ",".join(roles) or "<none>"


Column = tuple[str, str, Callable[[Obj], Any]]
_BUILTIN: dict[str, list[Column]] = {
    "pods": [
        ("Ready", "string", _ready_containers),
        ("Status", "string", lambda o: jsonpath(o, ".status.phase") or "Unknown"),
        (
            "Restarts",
            "integer",
            lambda o: sum(
                int(s.get("restartCount") or 0)
                for s in jsonpath(o, ".status.containerStatuses") or []
            ),
        ),
    ],
    "nodes": [
        ("Status", "string", _node_status),
        ("Roles", "string", _roles),
    ],
    "namespaces": [("Status", "string", lambda o: jsonpath(o, ".status.phase") or "Active")],
    "deployments": [
        (
            "Ready",
            "string",
            lambda o: (
                f"{jsonpath(o, '.status.readyReplicas') or 0}/{jsonpath(o, '.spec.replicas') or 0}"
            ),
        ),
        ("Up-to-date", "integer", lambda o: jsonpath(o, ".status.updatedReplicas") or 0),
        ("Available", "integer", lambda o: jsonpath(o, ".status.availableReplicas") or 0),
    ],
}
_AFTER_AGE: dict[str, list[Column]] = {
    "nodes": [("Version", "string", lambda o: jsonpath(o, ".status.nodeInfo.kubeletVersion"))],
}


def _column_getter(col: Obj) -> Callable[[Obj], Any]:
    path, type_ = str(col.get("jsonPath", "")), str(col.get("type", ""))
    return lambda o: _cell(jsonpath(o, path), type_)


def _partial(obj: Obj) -> Obj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def to_table(reg: Registered, objects: list[Obj], meta: Obj, include: str | None) -> Obj:
    """A Table for these objects; include is the includeObject query (Object/None/metadata)."""
    getters: list[Callable[[Obj], Any]] = [lambda o: (o.get("metadata") or {}).get("name")]
    definitions: list[Obj] = [dict(_NAME)]
    if reg.custom:
        columns = reg.printer_columns or [_AGE]
        for col in columns:
            definitions.append(
                {
                    "name": col.get("name", ""),
                    "type": col.get("type", "string"),
                    "format": col.get("format", ""),
                    "description": col.get("description", ""),
                    "priority": int(col.get("priority") or 0),
                }
            )
            getters.append(_column_getter(col))
    else:
        plural = reg.rt.plural
        built = [
            *_BUILTIN.get(plural, []),
            ("Age", "string", lambda o: human_age(jsonpath(o, ".metadata.creationTimestamp"))),
            *_AFTER_AGE.get(plural, []),
        ]
        for name, type_, getter in built:
            definitions.append(
                {"name": name, "type": type_, "format": "", "description": "", "priority": 0}
            )
            getters.append(getter)
    rows = []
    for obj in objects:
        row: Obj = {"cells": [g(obj) for g in getters]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = _partial(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }
