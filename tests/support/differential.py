"""The differential check's runner: one sequence of requests sent to two API servers (our
test server and kube-apiserver), each response reduced to a normalised view.

A view keeps what a client acts on and drops what differs by nature (uids, timestamps,
resourceVersion values, byte layout): the status code; for a Status its reason, message
(resourceVersion numbers masked) and causes (reason, field, message); for an object the
paths a step picks; for a watch the events in order (type and name; the BOOKMARK that
ends the initial events is kept, periodic ones are not, since when they come is the
server's choice, but one with a resourceVersion below an event already sent is counted).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from objtypes import Obj

JSON = "application/json"
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"

GROUP = "/apis/inference.llmkube.dev/v1alpha1"


def isvcs(name: str = "", sub: str = "") -> str:
    """The path of InferenceServices in the row's namespace ({ns}), or of one of them."""
    return "/".join(p for p in (f"{GROUP}/namespaces/{{ns}}/inferenceservices", name, sub) if p)


def models(name: str = "") -> str:
    return "/".join(p for p in (f"{GROUP}/namespaces/{{ns}}/models", name) if p)


def quotas(name: str = "") -> str:
    return "/".join(p for p in (f"{GROUP}/namespaces/{{ns}}/gpuquotas", name) if p)


def configmaps(name: str = "", namespace: str = "{ns}") -> str:
    return "/".join(p for p in (f"/api/v1/namespaces/{namespace}/configmaps", name) if p)


def isvc(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {"modelRef": "m", **spec},
    }


def configmap(name: str, **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


class Ctx:
    """What earlier steps of a row answered, for the requests of later steps."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace
        self.bodies: dict[str, Any] = {}

    def rv(self, label: str) -> str:
        """The resourceVersion of the object (or list) step `label` answered."""
        rv: str = self.bodies[label]["metadata"]["resourceVersion"]
        return rv

    def cont(self, label: str) -> str:
        token: str = self.bodies[label]["metadata"]["continue"]
        return token


Dynamic = Callable[[Ctx], Any]


@dataclass(frozen=True)
class Request:
    """One HTTP request; body and query may depend on earlier answers (a Ctx function).
    `pick`: what the view keeps of an object answer (dotted paths; `@managers` is
    managedFields as (manager, operation, subresource); `@names` a list's item names;
    `@continue` whether a list has a continue token; `@remaining` remainingItemCount)."""

    method: str
    path: str
    body: Any = None
    query: str | Dynamic = ""
    content_type: str = JSON
    pick: tuple[str, ...] = ()
    label: str = ""


@dataclass(frozen=True)
class Watch:
    """A watch opened with `query`; the requests of `during` are sent once the stream's
    headers arrived (the watcher is registered), then events are read until `events`
    non-BOOKMARK events came, or the stream ends (its timeoutSeconds)."""

    path: str
    query: str | Dynamic
    during: tuple[Request, ...] = ()
    events: int | None = None


@dataclass(frozen=True)
class Compact:
    """Compact the server's history up to now (the test server's control; etcd's
    compaction for kube-apiserver, as its periodic compactor does)."""


Step = Request | Watch | Compact


@dataclass(frozen=True)
class Difference:
    """A known difference: the reason (also in docs/testserver.md) and each server's
    exact views, so the row fails if either server changes."""

    reason: str
    testserver: list[Any]
    kube: list[Any]


@dataclass(frozen=True)
class Row:
    name: str
    steps: tuple[Step, ...]
    difference: Difference | None = None


@dataclass
class Server:
    """An API server under test: its URL, TLS context and how its history is compacted."""

    name: str
    url: str
    ssl: ssl.SSLContext | None = None
    compact: Callable[[aiohttp.ClientSession], Awaitable[None]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_RV_NUMBERS = re.compile(
    r"(too old resource version: )\d+ \(\d+\)|(Too large resource version: )\d+, current: \d+"
    r"|(the ResourceVersion in the precondition )\(\d+\)( does not match the ResourceVersion "
    r"in record )\(\d+\)"
)


def norm_message(message: str, namespace: str) -> str:
    message = message.replace(namespace, "NS")

    def mask(m: re.Match[str]) -> str:
        if m.group(1):
            return f"{m.group(1)}N (N)"
        if m.group(2):
            return f"{m.group(2)}N, current: N"
        return f"{m.group(3)}(N){m.group(4)}(N)"

    return _RV_NUMBERS.sub(mask, message)


def status_view(body: Obj, namespace: str) -> Obj:
    if body.get("status") == "Success":
        details = body.get("details") or {}
        return {"status": "Success", "details": (details.get("kind"), details.get("name"))}
    view: Obj = {
        "reason": body.get("reason"),
        "message": norm_message(body.get("message", ""), namespace),
    }
    causes = (body.get("details") or {}).get("causes")
    if causes:
        view["causes"] = sorted(
            (c.get("reason", ""), c.get("field", ""), norm_message(c.get("message", ""), namespace))
            for c in causes
        )
    return view


def _dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def pick_view(body: Obj, picks: Sequence[str]) -> Obj:
    view: Obj = {}
    for p in picks:
        if p == "@managers":
            view[p] = sorted(
                (m.get("manager", ""), m.get("operation", ""), m.get("subresource", ""))
                for m in (body.get("metadata") or {}).get("managedFields") or []
            )
        elif p == "@names":
            view[p] = [(i.get("metadata") or {}).get("name") for i in body.get("items") or []]
        elif p == "@continue":
            view[p] = bool((body.get("metadata") or {}).get("continue"))
        elif p == "@remaining":
            view[p] = (body.get("metadata") or {}).get("remainingItemCount")
        else:
            view[p] = _dig(body, p)
    return view


def response_view(
    code: int, body: Any, picks: Sequence[str], namespace: str, warnings: Sequence[str] = ()
) -> Obj:
    view: Obj = {"code": code}
    if isinstance(body, dict) and body.get("kind") == "Status":
        view.update(status_view(body, namespace))
    elif isinstance(body, dict):
        view.update(pick_view(body, picks))
    if warnings:
        view["warnings"] = sorted(norm_message(w, namespace) for w in warnings)
    return view


def event_view(event: Obj, namespace: str) -> tuple[Any, ...]:
    type_ = event.get("type", "")
    obj = event.get("object") or {}
    if type_ == "ERROR":
        return (
            type_,
            obj.get("code"),
            obj.get("reason"),
            norm_message(obj.get("message", ""), namespace),
        )
    if type_ == "BOOKMARK":
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        return (type_, annotations.get("k8s.io/initial-events-end", ""))
    return (type_, (obj.get("metadata") or {}).get("name"))


class Runner:
    """Runs rows against one server, each in a namespace of its own."""

    def __init__(self, server: Server, session: aiohttp.ClientSession, namespace: str) -> None:
        self.server = server
        self.session = session
        self.ctx = Ctx(namespace)

    def _url(self, path: str, query: str | Dynamic) -> str:
        q = query(self.ctx) if callable(query) else query
        return self.server.url + path.format(ns=self.ctx.ns) + (f"?{q}" if q else "")

    async def request(self, step: Request) -> Obj:
        body = step.body(self.ctx) if callable(step.body) else step.body
        data = None if body is None else json.dumps(body)
        async with self.session.request(
            step.method,
            self._url(step.path, step.query),
            data=data,
            headers={"Content-Type": step.content_type},
            ssl=self.server.ssl if self.server.ssl is not None else True,
        ) as resp:
            text = await resp.text()
            parsed = json.loads(text) if text else None
            warnings = resp.headers.getall("Warning", [])
        view = response_view(resp.status, parsed, step.pick, self.ctx.ns, warnings)
        for p in step.pick:
            if p.startswith("@same-rv:") and isinstance(parsed, dict):
                view[p] = self.ctx.rv(p.split(":", 1)[1]) == (
                    (parsed.get("metadata") or {}).get("resourceVersion")
                )
        if step.label:
            self.ctx.bodies[step.label] = parsed
        return view

    async def watch(self, step: Watch) -> Obj:
        events: list[tuple[Any, ...]] = []
        during: list[Obj] = []
        async with self.session.get(
            self._url(step.path, step.query),
            ssl=self.server.ssl if self.server.ssl is not None else True,
            timeout=aiohttp.ClientTimeout(total=60),
        ) as resp:
            if resp.status != 200:
                return response_view(resp.status, await resp.json(), (), self.ctx.ns)
            for req in step.during:
                during.append(await self.request(req))
            counted, last_rv, bookmarks_behind = 0, 0, 0
            async for line in resp.content:
                if not line.strip():
                    continue
                raw = json.loads(line)
                ev = event_view(raw, self.ctx.ns)
                rv = ((raw.get("object") or {}).get("metadata") or {}).get("resourceVersion")
                if ev == ("BOOKMARK", ""):
                    # When periodic bookmarks come is the server's choice (and, for
                    # kube-apiserver, timing): only that none goes back is compared.
                    bookmarks_behind += int(rv or 0) < last_rv
                    continue
                if rv and rv.isdigit():
                    last_rv = max(last_rv, int(rv))
                events.append(ev)
                counted += ev[0] != "BOOKMARK"
                if step.events is not None and counted >= step.events:
                    break
        view: Obj = {"code": 200, "events": events}
        if bookmarks_behind:
            view["bookmarks behind the events"] = bookmarks_behind
        if during:
            view["during"] = during
        return view

    async def run(self, steps: Sequence[Step]) -> list[Any]:
        views: list[Any] = []
        for step in steps:
            if isinstance(step, Request):
                views.append(await self.request(step))
            elif isinstance(step, Watch):
                views.append(await self.watch(step))
            else:
                assert self.server.compact is not None, self.server.name
                await self.server.compact(self.session)
                views.append("compacted")
        return views


async def run_row(row: Row, servers: Sequence[tuple[Server, str]]) -> list[list[Any]]:
    """The row's views from each (server, namespace), the servers run side by side."""

    async def one(server: Server, namespace: str) -> list[Any]:
        async with aiohttp.ClientSession() as session:
            return await Runner(server, session, namespace).run(row.steps)

    return list(await asyncio.gather(*(one(s, ns) for s, ns in servers)))
