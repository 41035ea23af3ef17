"""The product's reconcilers run in a bench process to learn what the product writes:
a cache holding what it is given, a client that records each write instead of sending
it, and a recorder that keeps each Event (record_reconcile). bench.services_ceiling and
bench.model_writes use them on a prototype object, once per distinct spec."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import aiohttp

from controller.cache import Cache
from controller.events import EventRecorder
from controller.kube import MERGE_PATCH, KubeClient
from controller.reconcile import Reconciler, Request
from controller.resources import ResourceType, object_key
from controller.transport import dumps
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.settings import Settings
from reconcilers.writes.status import StatusWriter


@dataclass(frozen=True)
class Write:
    method: str
    path: str  # with the tokens
    query: tuple[tuple[str, str], ...]
    body: str  # JSON with the tokens
    content_type: str


class Objects(Cache):
    """A cache that holds what it is given (no informers)."""

    def __init__(self, objects: Iterable[tuple[ResourceType, Obj]]) -> None:
        super().__init__()
        self._objects: dict[ResourceType, dict[tuple[str, str], Obj]] = {}
        for rt, obj in objects:
            self._objects.setdefault(rt, {})[object_key(obj)] = obj

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self._objects.get(rt, {}).get((namespace, name))

    def list(self, rt: ResourceType, namespace: str | None = None) -> list[Obj]:
        found = self._objects.get(rt, {}).items()
        return [o for (ns, _), o in found if namespace is None or ns == namespace]


class Recording:
    """The client as the reconciler calls it: records each write, finds nothing."""

    def __init__(self) -> None:
        self.writes: list[Write] = []

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        return None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        self.writes.append(
            Write(method, path, tuple((query or {}).items()), dumps(body).decode(), content_type)
        )
        answer: Obj = json.loads(json.dumps(body)) if isinstance(body, dict) else {}
        answer.setdefault("metadata", {}).update(resourceVersion="1", uid=str(uuid.uuid4()))
        return answer

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch: Obj,
        *,
        subresource: str = "",
        content_type: str = MERGE_PATCH,
    ) -> Obj:
        path = rt.object_path(namespace, name, subresource)
        return await self.request("PATCH", path, body=patch, content_type=content_type)

    async def delete(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        self.writes.append(Write("DELETE", rt.object_path(namespace, name), (), "", ""))


class Events:
    """The recorder as the status writer calls it: keeps each Event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def emit(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    async def record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.emit(obj, type_, reason, message)


async def list_items(session: aiohttp.ClientSession, rt: ResourceType) -> list[Obj]:
    """The items of rt the server holds ([] where it does not serve rt)."""
    async with session.get(rt.collection_path()) as r:
        if r.status == 404:  # a server without the API (DeviceClasses)
            return []
        r.raise_for_status()
        items: list[Obj] = (await r.json()).get("items") or []
    return items


@dataclass(frozen=True)
class Recorded:
    """What one reconcile of a prototype wrote."""

    writes: tuple[Write, ...]
    events: tuple[tuple[str, str, str], ...]  # type, reason, message (each once)
    stamp: str  # the conditions' time in its status writes ("" if none)


async def record_reconcile(
    make: Callable[[Context], Reconciler],
    namespace: str,
    name: str,
    objects: Iterable[tuple[ResourceType, Obj]],
) -> Recorded:
    """Reconcile namespace/name with the reconciler `make` builds, over a cache holding
    `objects`, recording instead of writing."""
    client, events = Recording(), Events()
    kube, recorder = cast(KubeClient, client), cast(EventRecorder, events)
    ctx = Context(kube, Objects(objects), recorder, StatusWriter(kube, recorder), Settings())
    reconciler = make(ctx)
    await reconciler.reconcile(Request(reconciler.name, namespace, name))
    stamp = ""
    for w in client.writes:
        if w.path.endswith("/status"):
            for c in json.loads(w.body)["status"].get("conditions") or []:
                stamp = c.get("lastTransitionTime") or stamp
    # The same Event twice is written once (the recorder folds it into one, counted 2).
    return Recorded(tuple(client.writes), tuple(dict.fromkeys(events.events)), stamp)
