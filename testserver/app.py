"""aiohttp application serving the Kubernetes REST API over the in-memory storage."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from controller.resources import BUILTIN_TYPES, CRD, ResourceType

from .faults import FaultBook, FaultRule
from .patches import APPLY, apply_patch
from .selectors import field_matcher, label_matcher
from .simulator import ClusterSimulator
from .storage import Obj, Storage, StorageError, WatchEvent, type_id

# Kinds a cluster serves beyond those the controller uses: what a chart installs.
EXTRA_BUILTINS = (
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount"),
    ResourceType("", "v1", "configmaps", "ConfigMap"),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
)
# Built-in kinds whose status is not a subresource.
_WITHOUT_STATUS = {
    "events",
    "leases",
    "secrets",
    "resourceclaimtemplates",
    "deviceclasses",
    "serviceaccounts",
    "configmaps",
    "clusterroles",
    "clusterrolebindings",
    "roles",
    "rolebindings",
    "validatingwebhookconfigurations",
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass
class Registered:
    rt: ResourceType
    has_status: bool


@dataclass
class Target:
    reg: Registered
    namespace: str | None
    name: str | None
    subresource: str


def status_body(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def error_response(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status_body(code, reason, message), status=code)


class ApiServer:
    def __init__(self, storage: Storage, bookmark_interval: float = 1.0) -> None:
        self.storage = storage
        self.bookmark_interval = bookmark_interval
        self.faults = FaultBook()
        self.types: dict[tuple[str, str, str], Registered] = {}
        for rt in (*BUILTIN_TYPES, *EXTRA_BUILTINS):
            self.register(rt, has_status=rt.plural not in _WITHOUT_STATUS)
        storage.listeners.append(self._on_crd_event)

    def register(self, rt: ResourceType, has_status: bool) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = Registered(rt, has_status)

    def _on_crd_event(self, event: WatchEvent) -> None:
        """Serve custom resources as soon as their CRD is created, as the apiserver does."""
        if event.resource != f"{CRD.plural}.{CRD.group}" or event.type == "DELETED":
            return
        spec = event.obj.get("spec", {})
        names = spec.get("names", {})
        for version in spec.get("versions", []):
            rt = ResourceType(
                spec.get("group", ""),
                version.get("name", ""),
                names.get("plural", ""),
                names.get("kind", ""),
                spec.get("scope", "Namespaced") == "Namespaced",
            )
            self.register(rt, has_status="status" in (version.get("subresources") or {}))

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
        reg = self.types.get((group, version, rest[0]))
        if reg is None:
            raise StorageError(
                404, "NotFound", f"the server could not find the requested resource ({path})"
            )
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if sub not in ("", "status"):
            raise StorageError(404, "NotFound", f"unknown subresource {sub}")
        if not reg.rt.namespaced:
            namespace = None
        elif name is not None and namespace is None:
            raise StorageError(404, "NotFound", f"{reg.rt.plural} is namespaced: {path}")
        return Target(reg, namespace, name, sub)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("true", "1")
        self.faults.record(request.method, request.path, watch)
        agent = request.headers.get("User-Agent", "")
        fault = self.faults.take(request.method, request.path, watch, agent)
        if fault and fault.delay:
            await asyncio.sleep(fault.delay)
        if fault and fault.status:
            return fault.response()
        try:
            if request.method == "GET" and (listing := self.discovery(request.path)):
                return web.json_response(listing)
            target = self.resolve(request.path)
            if request.query.get("dryRun") == "All" and request.method != "GET":
                return await self.dry_run(request, target)
            if request.method == "GET":
                if watch:
                    return await self.watch(request, target, fault)
                return self.get_or_list(request, target)
            body = await self.read_body(request)
            if request.method == "POST":
                return self.create(target, body)
            if request.method == "PUT":
                return self.replace(target, body)
            if request.method == "PATCH":
                return self.patch(request, target, body)
            if request.method == "DELETE":
                return self.delete(target)
            return error_response(405, "MethodNotAllowed", request.method)
        except StorageError as e:
            return error_response(e.code, e.reason, e.message)

    # -- discovery, as kubectl needs it --------------------------------------------

    def groups(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for group, version, _ in self.types:
            versions = found.setdefault(group, [])
            if version not in versions:
                versions.append(version)
        return found

    def discovery(self, path: str) -> Obj | None:
        parts = [p for p in path.split("/") if p]
        if parts == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
                ],
            }
        if parts == ["apis"]:
            groups = [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in sorted(self.groups().items())
                if g
            ]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        if parts == ["api", "v1"]:
            group, version = "", "v1"
        elif len(parts) == 3 and parts[0] == "apis":
            group, version = parts[1], parts[2]
        else:
            return None
        resources = []
        for (g, v, plural), reg in sorted(self.types.items()):
            if (g, v) != (group, version):
                continue
            resources.append(
                {
                    "name": plural,
                    "singularName": reg.rt.kind.lower(),
                    "namespaced": reg.rt.namespaced,
                    "kind": reg.rt.kind,
                    "verbs": VERBS,
                }
            )
            if reg.has_status:
                resources.append(
                    {
                        "name": f"{plural}/status",
                        "singularName": "",
                        "namespaced": reg.rt.namespaced,
                        "kind": reg.rt.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
        if not resources:
            return None
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    async def dry_run(self, request: web.Request, t: Target) -> web.Response:
        """Validate a write as the real request would, and store nothing (dryRun=All)."""
        body = await self.read_body(request)
        if request.method == "DELETE":
            return web.json_response(self.storage.get(t.reg.rt, t.namespace or "", t.name or ""))
        obj = self._check_body(t, body)
        if request.method == "POST" and t.reg.rt.namespaced and not t.namespace:
            raise StorageError(400, "BadRequest", "a namespace is required to create")
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and not meta.get("generateName"):
            raise StorageError(422, "Invalid", "metadata.name: Required value")
        if t.reg.rt.namespaced:
            meta["namespace"] = t.namespace
        obj["apiVersion"], obj["kind"] = t.reg.rt.api_version, t.reg.rt.kind
        return web.json_response(obj, status=201 if request.method == "POST" else 200)

    @staticmethod
    async def read_body(request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        try:
            if request.content_type == APPLY:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise StorageError(400, "BadRequest", f"invalid request body: {e}") from e

    # -- verbs -----------------------------------------------------------------

    def get_or_list(self, request: web.Request, t: Target) -> web.Response:
        if t.name is not None:
            return web.json_response(self.storage.get(t.reg.rt, t.namespace or "", t.name))
        label, fields = request.query.get("labelSelector"), request.query.get("fieldSelector")
        lm, fm = label_matcher(label), field_matcher(fields)
        items = self.storage.select(t.reg.rt, t.namespace, lambda o: lm(o) and fm(o))
        start = 0
        if token := request.query.get("continue"):
            try:
                start = int(json.loads(base64.b64decode(token))["start"])
            except (ValueError, KeyError) as e:
                raise StorageError(400, "BadRequest", "invalid continue token") from e
        limit = int(request.query.get("limit") or 0)
        page = items[start : start + limit] if limit else items[start:]
        meta: Obj = {"resourceVersion": str(self.storage.rv)}
        if limit and start + limit < len(items):
            meta["continue"] = base64.b64encode(
                json.dumps({"start": start + limit}).encode()
            ).decode()
        return web.json_response(
            {
                "kind": f"{t.reg.rt.kind}List",
                "apiVersion": t.reg.rt.api_version,
                "metadata": meta,
                "items": page,
            }
        )

    def _check_body(self, t: Target, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise StorageError(400, "BadRequest", "request body must be a JSON object")
        kind = body.get("kind")
        if kind and kind != t.reg.rt.kind:
            raise StorageError(400, "BadRequest", f"kind {kind} does not match {t.reg.rt.kind}")
        body_ns = (body.get("metadata") or {}).get("namespace")
        if t.reg.rt.namespaced and body_ns and t.namespace and body_ns != t.namespace:
            raise StorageError(
                400, "BadRequest", "the namespace of the object does not match the request"
            )
        return body

    def create(self, t: Target, body: Any) -> web.Response:
        if t.name is not None:
            raise StorageError(405, "MethodNotAllowed", "POST to an object path")
        if t.reg.rt.namespaced and not t.namespace:
            raise StorageError(400, "BadRequest", "a namespace is required to create")
        obj = self._check_body(t, body)
        return web.json_response(self.storage.create(t.reg.rt, t.namespace or "", obj), status=201)

    def replace(self, t: Target, body: Any) -> web.Response:
        if t.name is None:
            raise StorageError(405, "MethodNotAllowed", "PUT to a collection")
        obj = self._check_body(t, body)
        if (obj.get("metadata") or {}).get("name") not in (None, t.name):
            raise StorageError(400, "BadRequest", "the name of the object does not match")
        updated = self.storage.update(
            t.reg.rt,
            t.namespace or "",
            t.name,
            obj,
            subresource=t.subresource,
            has_status=t.reg.has_status,
        )
        return web.json_response(updated)

    def patch(self, request: web.Request, t: Target, body: Any) -> web.Response:
        if t.name is None:
            raise StorageError(405, "MethodNotAllowed", "PATCH to a collection")
        ns = t.namespace or ""
        try:
            current = self.storage.get(t.reg.rt, ns, t.name)
        except StorageError as e:
            if e.code == 404 and request.content_type == APPLY and not t.subresource:
                obj = self._check_body(t, body)
                obj.setdefault("metadata", {})["name"] = t.name
                return web.json_response(self.storage.create(t.reg.rt, ns, obj), status=201)
            raise
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
        updated = self.storage.update(
            t.reg.rt,
            ns,
            t.name,
            patched,
            subresource=t.subresource,
            has_status=t.reg.has_status,
        )
        return web.json_response(updated)

    def delete(self, t: Target) -> web.Response:
        if t.name is None:
            raise StorageError(405, "MethodNotAllowed", "DELETE of a collection")
        deleted = self.storage.delete(t.reg.rt, t.namespace or "", t.name)
        self.collect_garbage(deleted["metadata"]["uid"])
        return web.json_response(deleted)

    def collect_garbage(self, uid: str) -> None:
        """Background cascading deletion through ownerReferences."""
        by_id = {type_id(r.rt): r.rt for r in self.types.values()}
        for tid, (ns, name) in self.storage.dependents(uid):
            with contextlib.suppress(StorageError):
                child = self.storage.delete(by_id[tid], ns, name)
                self.collect_garbage(child["metadata"]["uid"])

    # -- watch -----------------------------------------------------------------

    async def watch(
        self, request: web.Request, t: Target, fault: FaultRule | None
    ) -> web.StreamResponse:
        lm = label_matcher(request.query.get("labelSelector"))
        fm = field_matcher(request.query.get("fieldSelector"))

        def matches(o: Obj) -> bool:
            return lm(o) and fm(o)

        rv_param = request.query.get("resourceVersion", "")
        initial: list[Obj] = []
        if rv_param in ("", "0"):
            initial = self.storage.select(t.reg.rt, t.namespace, matches)
            since = self.storage.rv
        else:
            try:
                since = int(rv_param)
            except ValueError as e:
                raise StorageError(400, "BadRequest", f"invalid resourceVersion {rv_param}") from e
        try:
            watcher, replay = self.storage.subscribe(t.reg.rt, t.namespace, since, matches)
        except StorageError as e:
            if e.code != 410:
                raise
            # The apiserver reports an expired resourceVersion as an ERROR event.
            resp = await self._open_stream(request)
            await self._send(resp, "ERROR", status_body(410, "Expired", e.message))
            return resp
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        resp = await self._open_stream(request)
        sent = 0
        cut_after = fault.cut_after if fault else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            for obj in initial:
                await self._send(resp, "ADDED", obj)
            for event in replay:
                if await self._send_event(resp, event, t.namespace, matches):
                    sent += 1
                    if cut_after is not None and sent >= cut_after:
                        return self._cut(request, resp)
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
                try:
                    live: WatchEvent | None = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks and loop.time() < deadline:
                        await self._send(resp, "BOOKMARK", self._bookmark(t.reg.rt))
                    continue
                if live is None:
                    await self._send(
                        resp,
                        "ERROR",
                        status_body(410, "Expired", "too old resource version: history compacted"),
                    )
                    break
                if await self._send_event(resp, live, t.namespace, matches):
                    sent += 1
                    if cut_after is not None and sent >= cut_after:
                        return self._cut(request, resp)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.storage.unsubscribe(watcher)
        return resp

    def _bookmark(self, rt: ResourceType) -> Obj:
        return {
            "kind": rt.kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(self.storage.rv)},
        }

    @staticmethod
    def _cut(request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
        """Drop the connection mid-stream, without the chunked terminator."""
        if request.transport is not None:
            request.transport.abort()
        return resp

    @staticmethod
    async def _open_stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        return resp

    @staticmethod
    async def _send(resp: web.StreamResponse, type_: str, obj: Obj) -> None:
        await resp.write(json.dumps({"type": type_, "object": obj}).encode() + b"\n")

    async def _send_event(
        self, resp: web.StreamResponse, e: WatchEvent, namespace: str | None, matches: Any
    ) -> bool:
        """Send an event as a watcher with this selector sees it; False if it sees nothing."""
        ns = e.obj.get("metadata", {}).get("namespace", "")
        if namespace is not None and ns != namespace:
            return False
        now, before = matches(e.obj), e.old is not None and matches(e.old)
        if e.type == "MODIFIED" and now and not before:
            type_ = "ADDED"
        elif e.type == "MODIFIED" and before and not now:
            type_ = "DELETED"
        elif now:
            type_ = e.type
        else:
            return False
        await self._send(resp, type_, e.obj)
        return True

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
        if action == "compact":
            self.storage.compact()
            return web.json_response({"compactedResourceVersion": self.storage.compacted_rv})
        if action == "expire-watches":
            self.storage.expire_watchers()
            return web.json_response({"compactedResourceVersion": self.storage.compacted_rv})
        return error_response(404, "NotFound", f"unknown control {action}")


SERVER: web.AppKey[ApiServer] = web.AppKey("server", ApiServer)


def make_app(
    bookmark_interval: float = 1.0,
    history: int = 10_000,
    simulate: dict[str, int] | None = None,
) -> web.Application:
    """simulate: {"dra": N, "plugin": M} runs a simulated cluster with those GPUs."""
    storage = Storage(history=history)
    server = ApiServer(storage, bookmark_interval)
    if simulate is not None:
        ClusterSimulator(
            storage, dra_gpus=simulate.get("dra", 0), plugin_gpus=simulate.get("plugin", 0)
        )
    app = web.Application(client_max_size=64 * 1024**2)
    app[SERVER] = server

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0-llmkube"})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/version", version)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/api", server.handle)
    app.router.add_get("/apis", server.handle)
    app.router.add_route("*", "/_testserver/{action}", server.control)
    app.router.add_route("*", "/api/{tail:.*}", server.handle)
    app.router.add_route("*", "/apis/{tail:.*}", server.handle)
    return app
