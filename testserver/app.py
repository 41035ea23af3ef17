"""aiohttp application serving the Kubernetes REST API over the in-memory storage.

This module routes requests and runs the verbs; the concerns live beside it: kinds served
(registry.py), discovery (discovery.py), CRD schemas and CEL (schema.py, cel_rules.py),
admission webhooks (admission.py), Table output (tables.py), protobuf bodies (protobuf.py),
watch streams (watch.py), patches (patches.py), selectors (selectors.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import copy
import json
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from objtypes import Obj

from .admission import Admission, Request
from .apply import record_update, server_side_apply
from .builtins import default_and_validate
from .discovery import discovery
from .errors import error_response
from .eviction import evict
from .faults import FaultBook, FaultRule
from .kinds import POD
from .openapi import openapi
from .patches import APPLY, apply_patch
from .protobuf import PROTOBUF, decode
from .registry import Registered, Registry
from .schema import Cause, invalid_error_details
from .selectors import field_matcher, label_matcher
from .simulator import ClusterSimulator
from .storage import (
    Storage,
    StorageError,
    clone,
    now_iso,
    object_not_found,
    too_large_resource_version,
)
from .tables import to_table, wants_table
from .tokens import TokenBook
from .watch import watch

_SNAPSHOTS = 64  # paged lists whose continue tokens still read their snapshot
# How long kube-apiserver's watch cache waits for a resourceVersion it has not reached
# before refusing a read that asks for it (watch_cache.go's blockTimeout).
FRESHNESS_WAIT = 3.0
# The request's fieldValidation (Ignore, Warn, Strict) and the warnings it collected.
_FIELD_VALIDATION: contextvars.ContextVar[str] = contextvars.ContextVar("fv", default="Warn")
_WARNINGS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("w", default=None)
# The request's fieldManager query ("" when the client named none) and its User-Agent.
_FIELD_MANAGER: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar(
    "fm", default=("", "")
)


@dataclass
class Target:
    reg: Registered
    namespace: str | None
    name: str | None
    subresource: str


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(obj, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _get_path(obj: Obj, path: str) -> Any:
    value: Any = obj
    for part in path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _set_path(obj: Obj, path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    for part in parts[:-1]:
        obj = obj.setdefault(part, {})
    obj[parts[-1]] = value


class ApiServer:
    def __init__(
        self, storage: Storage, bookmark_interval: float = 1.0, enforce_schemas: bool = True
    ) -> None:
        self.storage = storage
        # Off: store custom resources unvalidated, as a cluster whose CRDs are older (looser)
        # than the objects sent; pruning and defaults are skipped too.
        self.enforce_schemas = enforce_schemas
        self.bookmark_interval = bookmark_interval
        self.faults = FaultBook()
        self.tokens = TokenBook()
        self.registry = Registry()
        self.admission = Admission(storage)
        self.snapshots: OrderedDict[str, tuple[int, list[Obj]]] = OrderedDict()
        storage.listeners.append(self.registry.on_event)

    # -- routing ---------------------------------------------------------------

    def resolve(self, path: str) -> Target:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise StorageError(404, "NotFound", f"the server could not find {path}")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise StorageError(404, "NotFound", f"the server could not find {path}")
        reg = self.registry.get(group, version, rest[0])
        if reg is None:
            raise StorageError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        eviction = sub == "eviction" and reg.rt == POD
        if (sub not in ("", "status", "scale") and not eviction) or (
            sub == "scale" and reg.scale is None
        ):
            if reg.custom:
                # kube-apiserver's CRD handler answers a subresource it does not serve as
                # a missing object.
                raise object_not_found(reg.rt, name or "")
            raise StorageError(404, "NotFound", f"unknown subresource {sub}")
        if not reg.rt.namespaced:
            namespace = None
        elif name is not None and namespace is None:
            raise StorageError(404, "NotFound", f"{reg.rt.plural} is namespaced: {path}")
        return Target(reg, namespace, name, sub)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        is_watch = request.query.get("watch") in ("true", "1")
        self.faults.record(request.method, request.path, is_watch)
        agent = request.headers.get("User-Agent", "")
        fault = self.faults.take(request.method, request.path, is_watch, agent)
        if fault and fault.delay:
            await asyncio.sleep(fault.delay)
        if fault and fault.disconnect and request.transport is not None:
            await request.read()
            request.transport.abort()  # no answer at all
            return web.Response(status=499)  # never sent: the connection is gone
        if fault and fault.status:
            return fault.response()
        try:
            if request.method == "GET" and (listing := discovery(self.registry, request.path)):
                return _json(listing)
            target = self.resolve(request.path)
            _FIELD_VALIDATION.set(request.query.get("fieldValidation") or "Warn")
            agent = request.headers.get("User-Agent", "unknown").split("/")[0]
            _FIELD_MANAGER.set((request.query.get("fieldManager", ""), agent))
            warnings: list[str] = []
            _WARNINGS.set(warnings)
            if request.method == "GET":
                if is_watch:
                    return await self.watch(request, target, fault)
                await self.wait_fresh(request)
                return self.get_or_list(request, target)
            dry_run = request.query.get("dryRun") == "All"
            body = await self.read_body(request)
            if request.method == "DELETE":
                return await self.delete(target, dry_run, body)
            if request.method == "POST" and target.subresource == "eviction":
                resp = self.evict(target, body)
            elif request.method == "POST":
                resp = await self.create(target, body, dry_run)
            elif request.method == "PUT":
                resp = await self.replace(target, body, dry_run)
            elif request.method == "PATCH":
                resp = await self.patch(request, target, body, dry_run)
            else:
                return error_response(405, "MethodNotAllowed", request.method)
            for warning in warnings:
                resp.headers.add("Warning", f'299 - "{warning}"')
            return resp
        except StorageError as e:
            return error_response(e.code, e.reason, e.message, e.details)

    async def watch(
        self, request: web.Request, t: Target, fault: FaultRule | None
    ) -> web.StreamResponse:
        return await watch(
            request, self.storage, t.reg.rt, t.namespace, fault, self.bookmark_interval
        )

    @staticmethod
    async def read_body(request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        try:
            if request.content_type == APPLY:
                # JSON is YAML, and what controllers send: json.loads is C, safe_load is not.
                if raw.lstrip()[:1] == b"{":
                    try:
                        return json.loads(raw)
                    except ValueError:
                        pass  # YAML in flow style, not JSON
                return yaml.safe_load(raw)
            if request.content_type == PROTOBUF:
                return decode(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise StorageError(400, "BadRequest", f"invalid request body: {e}") from e

    # -- reads -----------------------------------------------------------------

    async def wait_fresh(self, request: web.Request) -> None:
        """A get or list that asks for at least resourceVersion N (resourceVersionMatch
        unset or NotOlderThan) from a server that has not reached N (restarted on older
        storage) is refused as kube-apiserver refuses it: a paginated list is read from
        etcd and refused at once; any other read is served by the watch cache, which
        waits up to FRESHNESS_WAIT for N and then refuses with Retry-After 1."""
        wanted = request.query.get("resourceVersion", "")
        match = request.query.get("resourceVersionMatch", "")
        if not wanted.isdigit() or match not in ("", "NotOlderThan") or "continue" in request.query:
            return
        minimum = int(wanted)
        from_etcd = (request.query.get("limit") or "0") not in ("", "0")
        if self.storage.rv >= minimum:
            return
        if not from_etcd:
            reached = asyncio.Event()

            def check(_: object) -> None:
                if self.storage.rv >= minimum:
                    reached.set()

            self.storage.listeners.append(check)
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FRESHNESS_WAIT):
                        await reached.wait()
            finally:
                self.storage.listeners.remove(check)
        if self.storage.rv < minimum:
            raise too_large_resource_version(minimum, self.storage.rv, 0 if from_etcd else 1)

    def get_or_list(self, request: web.Request, t: Target) -> web.Response:
        table = wants_table(request.headers.get("Accept", ""))
        include = request.query.get("includeObject")
        if t.name is not None:
            obj = self.storage.view(t.reg.rt, t.namespace or "", t.name)
            if t.subresource == "scale":
                return _json(self._scale_of(t.reg, obj))
            if table:
                one = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                return _json(to_table(t.reg, [obj], one, include))
            return self._raw_response(obj)
        rv, items, start = self._page_source(request, t)
        limit = int(request.query.get("limit") or 0)
        page = items[start : start + limit] if limit else items[start:]
        meta: Obj = {"resourceVersion": str(rv)}
        if limit and start + limit < len(items):
            meta["continue"] = self._continue_token(rv, items, start + limit)
            meta["remainingItemCount"] = len(items) - start - limit
        if table:
            return _json(to_table(t.reg, page, meta, include))
        head = json.dumps(
            {"kind": f"{t.reg.rt.kind}List", "apiVersion": t.reg.rt.api_version, "metadata": meta},
            separators=(",", ":"),
        ).encode()
        raw_items = b",".join(self.storage.raw(o) for o in page)
        return web.Response(
            body=head[:-1] + b',"items":[' + raw_items + b"]}", content_type="application/json"
        )

    def _raw_response(self, obj: Obj, status: int = 200) -> web.Response:
        """A stored object from its cached bytes (serialized once per change)."""
        return web.Response(
            body=self.storage.raw(obj), status=status, content_type="application/json"
        )

    def _page_source(self, request: web.Request, t: Target) -> tuple[int, list[Obj], int]:
        """The list a page reads: a fresh one, or the snapshot a continue token names."""
        token = request.query.get("continue")
        if not token:
            lm = label_matcher(request.query.get("labelSelector"))
            fm = field_matcher(request.query.get("fieldSelector"))
            items = self.storage.select_view(t.reg.rt, t.namespace, lambda o: lm(o) and fm(o))
            return self.storage.rv, items, 0
        try:
            data = json.loads(base64.b64decode(token))
            key, start, rv = str(data["id"]), int(data["start"]), int(data["rv"])
        except (ValueError, KeyError, TypeError) as e:
            raise StorageError(400, "BadRequest", "invalid continue token") from e
        snapshot = self.snapshots.get(key)
        if snapshot is None or rv < self.storage.compacted_rv:
            raise StorageError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        return snapshot[0], snapshot[1], start

    def _continue_token(self, rv: int, items: list[Obj], start: int) -> str:
        """Pin the list (stored objects are immutable, so this shares, not copies)."""
        key = next((k for k, (_, v) in self.snapshots.items() if v is items), None)
        if key is None:
            key = uuid.uuid4().hex
            self.snapshots[key] = (rv, items)
            while len(self.snapshots) > _SNAPSHOTS:
                self.snapshots.popitem(last=False)
        token = {"id": key, "rv": rv, "start": start}
        return base64.b64encode(json.dumps(token).encode()).decode()

    @staticmethod
    def _scale_of(reg: Registered, obj: Obj) -> Obj:
        assert reg.scale is not None
        meta = obj["metadata"]
        status: Obj = {"replicas": _get_path(obj, reg.scale.status_replicas) or 0}
        if reg.scale.label_selector and (sel := _get_path(obj, reg.scale.label_selector)):
            status["selector"] = sel
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": _get_path(obj, reg.scale.spec_replicas) or 0},
            "status": status,
        }

    # -- admission ---------------------------------------------------------------

    def _check_body(self, t: Target, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise StorageError(400, "BadRequest", "request body must be a JSON object")
        kind = body.get("kind")
        if kind and kind != t.reg.rt.kind:
            if t.reg.custom:
                # kube-apiserver's custom resource validation names the kind sent.
                name = (body.get("metadata") or {}).get("name") or ""
                cause = Cause(
                    "FieldValueInvalid", "kind", f'Invalid value: "{kind}": must be {t.reg.rt.kind}'
                )
                message, details = invalid_error_details(kind, t.reg.rt.group, name, [cause])
                raise StorageError(422, "Invalid", message, details)
            raise StorageError(400, "BadRequest", f"kind {kind} does not match {t.reg.rt.kind}")
        body_ns = (body.get("metadata") or {}).get("namespace")
        if t.reg.rt.namespaced and body_ns and t.namespace and body_ns != t.namespace:
            raise StorageError(
                400, "BadRequest", "the namespace of the object does not match the request"
            )
        return body

    async def _admit(
        self, t: Target, operation: str, obj: Obj, old: Obj | None, dry_run: bool
    ) -> None:
        """Schema (prune, default, validate) then validating webhooks, as kube-apiserver."""
        reg = t.reg
        meta = obj.setdefault("metadata", {})
        name = meta.get("name") or meta.get("generateName") or ""
        if not reg.custom and (causes := default_and_validate(reg.rt.kind, reg.rt.group, obj)):
            message, details = invalid_error_details(reg.rt.kind, reg.rt.group, name, causes)
            raise StorageError(422, "Invalid", message, details)
        if reg.schema is not None and self.enforce_schemas:
            dropped: list[str] = []
            scale = reg.scale.spec_replicas if reg.custom and reg.scale else ""
            causes = reg.schema.admit(obj, old, dropped, scale if t.subresource != "status" else "")
            mode = _FIELD_VALIDATION.get()
            if dropped and mode == "Strict":
                unknown = ", ".join(f'unknown field "{p}"' for p in dropped)
                rt = reg.rt
                raise StorageError(
                    400,
                    "BadRequest",
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                    f"strict decoding error: {unknown}",
                )
            if dropped and mode == "Warn" and (warnings := _WARNINGS.get()) is not None:
                warnings.extend(f'unknown field \\"{p}\\"' for p in dropped)
            if causes:
                message, details = invalid_error_details(reg.rt.kind, reg.rt.group, name, causes)
                raise StorageError(422, "Invalid", message, details)
        await self.admission.validate(
            Request(
                reg.rt,
                operation,
                t.namespace or "",
                name,
                t.subresource,
                obj,
                old,
                dry_run,
            )
        )

    # -- writes ------------------------------------------------------------------

    async def create(self, t: Target, body: Any, dry_run: bool = False) -> web.Response:
        if t.name is not None:
            raise StorageError(405, "MethodNotAllowed", "POST to an object path")
        if t.reg.rt.namespaced and not t.namespace:
            raise StorageError(400, "BadRequest", "a namespace is required to create")
        obj = self._check_body(t, body)
        if t.reg.custom and t.reg.has_status:
            obj.pop("status", None)  # the status subresource owns status; create resets it
        return await self._store_new(t, obj, dry_run)

    async def _store_new(self, t: Target, obj: Obj, dry_run: bool) -> web.Response:
        obj["apiVersion"], obj["kind"] = t.reg.rt.api_version, t.reg.rt.kind
        meta = obj.setdefault("metadata", {})
        if t.reg.rt.namespaced:
            meta["namespace"] = t.namespace
        if not meta.get("name") and not meta.get("generateName"):
            raise StorageError(422, "Invalid", "metadata.name: Required value")
        await self._admit(t, "CREATE", obj, None, dry_run)
        named, agent = _FIELD_MANAGER.get()
        if "managedFields" not in meta:
            # Unnamed, the manager is the User-Agent's product token, as kube-apiserver.
            self._record_update(t, {}, obj, named or agent, "")
        if dry_run:
            # What the write would have stored, less the resourceVersion (as upstream).
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_iso())
            meta["generation"] = 1
            return _json(obj, status=201)
        # obj is this request's own (decoded from its body): stored without a copy.
        created = self.storage.create(t.reg.rt, t.namespace or "", obj, share=True, owned=True)
        self._collect_if_orphan(t, created)
        return self._raw_response(created, status=201)

    async def replace(self, t: Target, body: Any, dry_run: bool = False) -> web.Response:
        if t.name is None:
            raise StorageError(405, "MethodNotAllowed", "PUT to a collection")
        if t.subresource == "scale":
            return await self._write_scale(t, lambda scale: body, dry_run)
        obj = self._check_body(t, body)
        if (obj.get("metadata") or {}).get("name") not in (None, t.name):
            raise StorageError(
                400,
                "BadRequest",
                f"the name of the object ({obj['metadata']['name']}) does not match the name "
                f"on the URL ({t.name})",
            )
        old = self.storage.view(t.reg.rt, t.namespace or "", t.name)
        if t.reg.custom and not (obj.get("metadata") or {}).get("resourceVersion"):
            # A custom resource allows no unconditional update (kube-apiserver's CRD
            # strategy): the PUT must name the resourceVersion it replaces.
            rt, cause = t.reg.rt, Cause("FieldValueInvalid", "metadata.resourceVersion", "")
            cause.message = "Invalid value: 0: must be specified for an update"
            message, details = invalid_error_details(rt.plural, rt.group, t.name, [cause])
            raise StorageError(422, "Invalid", message, details)
        return await self._store_update(t, obj, old, dry_run)

    def _record_update(self, t: Target, old: Obj, new: Obj, manager: str, sub: str) -> None:
        reg = t.reg
        record_update(
            old,
            new,
            manager=manager,
            schema=reg.schema.schema if reg.schema else None,
            builtin=not reg.custom,
            status=not reg.has_status or sub == "status",
            subresource=sub,
        )

    async def _store_update(
        self,
        t: Target,
        obj: Obj,
        old: Obj,
        dry_run: bool,
        sub: str | None = None,
        applied: bool = False,
        private_status_patch: bool = False,
    ) -> web.Response:
        sub = t.subresource if sub is None else sub
        obj["apiVersion"], obj["kind"] = t.reg.rt.api_version, t.reg.rt.kind
        # Validate the object as it will be stored: one part comes from the old object.
        if sub == "status" and private_status_patch:
            candidate = obj  # a copy of old made for this request, changed only in status
            candidate.setdefault("status", {})
        elif sub == "status":
            candidate = clone({**old, "status": obj.get("status", {})})
            candidate["metadata"]["resourceVersion"] = (obj.get("metadata") or {}).get(
                "resourceVersion"
            ) or ""
            if applied and (fields := (obj.get("metadata") or {}).get("managedFields")):
                # An apply to /status records its manager (subresource status), as upstream.
                candidate["metadata"]["managedFields"] = fields
        else:
            candidate = obj
            if t.reg.has_status:
                if "status" in old:
                    candidate["status"] = clone(old["status"])
                else:
                    candidate.pop("status", None)
        await self._admit(t, "UPDATE", candidate, old, dry_run)
        named, agent = _FIELD_MANAGER.get()
        if not applied and (named or (old.get("metadata") or {}).get("managedFields")):
            self._record_update(t, old, candidate, named or agent, sub)
        if dry_run:
            return _json(candidate)
        if sub == "status" and not candidate["metadata"].get("resourceVersion"):
            candidate["metadata"].pop("resourceVersion", None)
        updated = self.storage.update(
            t.reg.rt,
            t.namespace or "",
            t.name or "",
            candidate,
            subresource=sub,
            has_status=t.reg.has_status,
            share=True,
            owned=True,  # candidate was built for this request
        )
        self._collect_if_orphan(t, updated)
        return self._raw_response(updated)

    async def patch(
        self, request: web.Request, t: Target, body: Any, dry_run: bool = False
    ) -> web.Response:
        if t.name is None:
            raise StorageError(405, "MethodNotAllowed", "PATCH to a collection")
        ns = t.namespace or ""
        if t.subresource == "scale":
            return await self._write_scale(
                t, lambda scale: apply_patch(request.content_type, scale, body), dry_run
            )
        if request.content_type == APPLY:
            return await self._apply(request, t, body, dry_run)
        current = self.storage.view(t.reg.rt, ns, t.name)
        patched = apply_patch(request.content_type, current, body)
        if not isinstance(patched, dict):
            raise StorageError(422, "Invalid", "patch must produce an object")
        # A patch applies to what is stored now; only a resourceVersion it names is checked.
        patch_rv = (
            (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        )
        patched.setdefault("metadata", {})["resourceVersion"] = (
            patch_rv or current["metadata"]["resourceVersion"]
        )
        # A status patch that names nothing but status (and a resourceVersion) leaves the
        # rest of the copy as stored: it needs no second copy to reset the other parts.
        status_only = (
            t.subresource == "status"
            and isinstance(body, dict)
            and body.keys() <= {"status", "metadata"}
            and (body.get("metadata") or {}).keys() <= {"resourceVersion"}
        )
        return await self._store_update(
            t, patched, current, dry_run, private_status_patch=status_only
        )

    async def _apply(
        self, request: web.Request, t: Target, body: Any, dry_run: bool
    ) -> web.Response:
        """Server-side apply (application/apply-patch+yaml)."""
        obj = self._check_body(t, body)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") not in (None, t.name):
            raise StorageError(
                400,
                "BadRequest",
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({t.name})",
            )
        meta["name"] = t.name
        current: Obj | None
        try:
            current = self.storage.view(t.reg.rt, t.namespace or "", t.name or "")
        except StorageError as e:
            if e.code != 404 or t.subresource:
                raise
            current = None
        reg = t.reg
        result = server_side_apply(
            current,
            obj,
            manager=request.query.get("fieldManager", ""),
            force=request.query.get("force") in ("true", "1"),
            schema=reg.schema.schema if reg.schema else None,
            builtin=not reg.custom,
            status=not reg.has_status or t.subresource == "status",
            subresource=t.subresource,
        )
        if current is None:
            return await self._store_new(t, result, dry_run)
        result["metadata"]["resourceVersion"] = (
            meta.get("resourceVersion") or current["metadata"]["resourceVersion"]
        )
        return await self._store_update(t, result, current, dry_run, applied=True)

    async def _write_scale(self, t: Target, change: Any, dry_run: bool) -> web.Response:
        """PUT/PATCH of the scale subresource: writes spec replicas on the object."""
        assert t.reg.scale is not None
        current = self.storage.view(t.reg.rt, t.namespace or "", t.name or "")
        new_scale = change(self._scale_of(t.reg, current))
        if not isinstance(new_scale, dict):
            raise StorageError(400, "BadRequest", "request body must be a Scale object")
        replicas = (new_scale.get("spec") or {}).get("replicas")
        if (
            not isinstance(replicas, int)
            or isinstance(replicas, bool)
            or (
                replicas < 0 and not t.reg.custom  # a custom resource's own checks refuse it
            )
        ):
            raise StorageError(
                422,
                "Invalid",
                f'Scale.autoscaling "{t.name}" is invalid: spec.replicas: Invalid value: '
                f"{json.dumps(replicas)}: must be greater than or equal to 0",
            )
        obj = copy.deepcopy(current)
        _set_path(obj, t.reg.scale.spec_replicas, replicas)
        sent_rv = (new_scale.get("metadata") or {}).get("resourceVersion")
        obj["metadata"]["resourceVersion"] = sent_rv or current["metadata"]["resourceVersion"]
        await self._store_update(t, obj, current, dry_run, sub="")
        updated = self.storage.view(t.reg.rt, t.namespace or "", t.name or "")
        return _json(self._scale_of(t.reg, updated if not dry_run else obj))

    async def delete(self, t: Target, dry_run: bool = False, options: Any = None) -> web.Response:
        if t.name is None:
            raise StorageError(405, "MethodNotAllowed", "DELETE of a collection")
        old = self.storage.view(t.reg.rt, t.namespace or "", t.name)
        _check_preconditions(t, old, options)
        await self.admission.validate(
            Request(t.reg.rt, "DELETE", t.namespace or "", t.name, "", None, old, dry_run)
        )
        if dry_run:
            deleted = old
        else:
            deleted = self.storage.delete(t.reg.rt, t.namespace or "", t.name)
            self.collect_garbage(deleted["metadata"]["uid"])
        if t.reg.custom:
            # kube-apiserver answers a custom resource's deletion with a Status.
            rt = t.reg.rt
            details = {"name": t.name, "group": rt.group, "kind": rt.plural}
            return _json(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {**details, "uid": deleted["metadata"]["uid"]},
                }
            )
        return _json(deleted)

    def evict(self, t: Target, body: Any) -> web.Response:
        assert t.name is not None
        deleted = evict(self.storage, t.namespace or "", t.name, body)
        self.collect_garbage(deleted["metadata"]["uid"])
        return _json({"kind": "Status", "apiVersion": "v1", "status": "Success"}, status=201)

    # -- garbage collection --------------------------------------------------------

    def collect_garbage(self, uid: str) -> None:
        """Background cascading deletion through ownerReferences."""
        by_id = self.registry.by_type_id()
        for tid, (ns, name) in self.storage.dependents(uid):
            with contextlib.suppress(StorageError):
                child = self.storage.delete(by_id[tid], ns, name)
                self.collect_garbage(child["metadata"]["uid"])

    def _collect_if_orphan(self, t: Target, obj: Obj) -> None:
        """A dependent none of whose owners exists is collected, as the GC does, even when
        it was written after its owner's deletion."""
        refs = obj.get("metadata", {}).get("ownerReferences") or []
        uids = [r.get("uid") for r in refs if r.get("uid")]
        if not uids or any(u in self.storage.uids for u in uids):
            return
        meta = obj["metadata"]
        rt, ns, name, uid = t.reg.rt, t.namespace or "", meta["name"], meta["uid"]

        def collect() -> None:
            with contextlib.suppress(StorageError):
                current = self.storage.view(rt, ns, name)
                if current["metadata"]["uid"] == uid:
                    self.storage.delete(rt, ns, name)
                    self.collect_garbage(uid)

        asyncio.get_running_loop().call_soon(collect)

    # -- test controls ----------------------------------------------------------

    async def control(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        if action == "faults" and request.method == "POST":
            try:
                rule = FaultRule.from_json(await request.json())
            except (ValueError, TypeError) as e:
                return error_response(400, "BadRequest", str(e))
            self.faults.rules.append(rule)
            return web.json_response({"rules": len(self.faults.rules)})
        if action == "faults" and request.method == "DELETE":
            self.faults.rules.clear()
            return web.json_response({"rules": 0})
        if action == "requests" and request.method == "GET":
            return web.json_response(dict(self.faults.requests))
        if action == "requests" and request.method == "DELETE":
            self.faults.requests.clear()
            return web.json_response({})
        if action == "schema-validation" and request.method in ("PUT", "POST"):
            self.enforce_schemas = bool((await request.json()).get("enforce", True))
            return web.json_response({"enforce": self.enforce_schemas})
        if action == "tokens" and request.method == "POST":
            body = await request.json() if request.can_read_body else {}
            ttl = body.get("ttl", 3600) if isinstance(body, dict) else None
            if not isinstance(ttl, int | float) or ttl <= 0:
                return error_response(400, "BadRequest", "ttl: a positive number of seconds")
            return web.json_response(self.tokens.mint(float(ttl)))
        if action == "tokens" and request.method == "GET":
            return web.json_response(self.tokens.stats())
        if action == "tokens" and request.method == "DELETE":
            self.tokens.revoke_all()
            return web.json_response(self.tokens.stats())
        if action == "compact":
            self.storage.compact()
            return web.json_response({"compactedResourceVersion": self.storage.compacted_rv})
        if action == "expire-watches":
            self.storage.expire_watchers()
            return web.json_response({"compactedResourceVersion": self.storage.compacted_rv})
        return error_response(404, "NotFound", f"unknown control {action}")


def _check_preconditions(t: Target, current: Obj, options: Any) -> None:
    """DeleteOptions.preconditions (uid, resourceVersion): 409 Conflict as kube-apiserver."""
    pre = (options or {}).get("preconditions") if isinstance(options, dict) else None
    if not isinstance(pre, dict):
        return
    meta = current["metadata"]
    if (uid := pre.get("uid")) and uid != meta.get("uid"):
        raise StorageError(
            409,
            "Conflict",
            f"Precondition failed: UID in precondition: {uid}, "
            f"UID in object meta: {meta.get('uid')}",
        )
    if (rv := pre.get("resourceVersion")) and rv != meta.get("resourceVersion"):
        rt = t.reg.rt
        kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
        raise StorageError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {kind} "{t.name}": the ResourceVersion in the '
            f"precondition ({rv}) does not match the ResourceVersion in record "
            f"({meta.get('resourceVersion')}). The object might have been modified",
        )


SERVER: web.AppKey[ApiServer] = web.AppKey("server", ApiServer)


def make_app(
    bookmark_interval: float = 1.0,
    history: int = 10_000,
    simulate: dict[str, int] | None = None,
    enforce_schemas: bool = True,
    require_token: bool = False,
) -> web.Application:
    """simulate: {"dra": N, "plugin": M, "shared": S} runs a simulated cluster with those GPUs.

    require_token: every request but the /_testserver/ controls needs a bearer token
    minted by POST /_testserver/tokens, unexpired (testserver/tokens.py).
    """
    storage = Storage(history=history)
    server = ApiServer(storage, bookmark_interval, enforce_schemas)
    if simulate is not None:
        ClusterSimulator(
            storage,
            dra_gpus=simulate.get("dra", 0),
            plugin_gpus=simulate.get("plugin", 0),
            shared_gpus=simulate.get("shared", 0),
        )
    middlewares = [server.tokens.middleware()] if require_token else []
    app = web.Application(client_max_size=64 * 1024**2, middlewares=middlewares)
    app[SERVER] = server

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0-llmkube"})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/version", version)
    app.router.add_get("/healthz", healthz)

    async def openapi_v3(request: web.Request) -> web.Response:
        doc = openapi(server.registry, request.path)
        if doc is None:
            return error_response(404, "NotFound", f"the server could not find {request.path}")
        return web.json_response(doc)

    app.router.add_get("/openapi/v3", openapi_v3)
    app.router.add_get("/openapi/v3/{tail:.*}", openapi_v3)
    app.router.add_get("/api", server.handle)
    app.router.add_get("/apis", server.handle)
    app.router.add_route("*", "/_testserver/{action}", server.control)
    app.router.add_route("*", "/api/{tail:.*}", server.handle)
    app.router.add_route("*", "/apis/{tail:.*}", server.handle)
    return app
