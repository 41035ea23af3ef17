"""The server's ceiling for InferenceServices whose pods exist: the product's writes for
each service, sent by the least code (plain aiohttp, as bench.ceiling for Models).

What the product writes for a new service is taken from the product itself, once per
distinct (namespace, spec): its InferenceService reconciler runs in this process on a
prototype service (its Model, Namespace and the DeviceClasses as listed at start, no
pods: a service's pods that its Deployment does not own change none of these writes)
against a client that records instead of sending. The recorded requests (server-side
apply of the Deployment, the Service and the PodDisruptionBudget, the status merge
patch) are kept as JSON text, and so are the Events it would record. For each service
the watch brings without a status, a worker sends those requests in the same order
with the service's name, namespace and uid put in (and the conditions' time made
now), then hands its Events to 8 writers, as the product's recorder does. Not sent:
the product's look-ups before a create (a GET of each object missing from its cache),
which are reads; its desired-hash annotation keeps the prototype's value (same size).
No cache, no queue semantics, no retries: whatever the product does beyond this is
overhead.
"""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp

from controller.clock import now as utc_now
from controller.resources import (
    DEVICE_CLASS,
    INFERENCE_SERVICE,
    MODEL,
    NAMESPACE,
    ResourceType,
)
from objtypes import Obj
from reconcilers.inferenceservice.reconciler import InferenceServiceReconciler

from .ceiling import Busy, Connection, event_body, feed
from .recording import Recorded, list_items, record_reconcile

# The prototype's name, namespace and uid: tokens that appear nowhere else in a write.
NAME = "llmkube-prototype-svc"
NS = "llmkube-prototype-ns"
UID = "0d1c7e5a-9b2f-4c3e-8a61-prototype000"


async def prototype(service: Obj, objects: list[tuple[ResourceType, Obj]]) -> Recorded:
    """What the product writes for `service` (as it is on the watch, without status),
    given the Models, Namespaces and DeviceClasses the server holds."""
    ns = service["metadata"]["namespace"]
    proto = {
        "apiVersion": INFERENCE_SERVICE.api_version,
        "kind": INFERENCE_SERVICE.kind,
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "uid": UID,
            "generation": service["metadata"].get("generation", 1),
            "resourceVersion": "1",
        },
        "spec": service.get("spec"),
    }
    held: list[tuple[ResourceType, Obj]] = [(INFERENCE_SERVICE, proto)]
    for rt, obj in objects:
        if rt == MODEL and obj["metadata"].get("namespace") == ns:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": NS}}
        elif rt == NAMESPACE and obj["metadata"]["name"] == ns:
            obj = {**obj, "metadata": {**obj["metadata"], "name": NS}}
        elif rt != DEVICE_CLASS:
            continue
        held.append((rt, obj))
    return await record_reconcile(InferenceServiceReconciler, NS, NAME, held)


def _fill(text: str, name: str, ns: str, uid: str, stamp: str, now: str) -> str:
    text = text.replace(UID, uid).replace(NS, ns).replace(NAME, name)
    return text.replace(stamp, now) if stamp else text


async def run(
    server: Connection,
    workers: int,
    events: int,
    ready: asyncio.Event,
    busy: Busy,
    event_writers: int = 8,
) -> None:
    """events: 0 sends none (as --events 0 for the product); otherwise all it records."""
    connector = aiohttp.TCPConnector(limit=workers + event_writers + 2, ssl=server.tls or False)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(server.url, connector=connector, timeout=timeout) as session:
        objects = [
            (rt, obj)
            for rt in (MODEL, NAMESPACE, DEVICE_CLASS)
            for obj in await list_items(session, rt)
        ]
        prototypes: dict[tuple[str, str], Recorded] = {}
        todo: asyncio.Queue[Obj] = asyncio.Queue()
        to_post: asyncio.Queue[tuple[Obj, tuple[str, str, str]]] = asyncio.Queue()

        async def event_writer() -> None:
            while True:
                service, (type_, reason, message) = await to_post.get()
                with busy:
                    ns = service["metadata"]["namespace"]
                    body = event_body(service, type_, reason, message)
                    async with session.post(f"/api/v1/namespaces/{ns}/events", json=body) as r:
                        await r.read()

        async def worker() -> None:
            while True:
                service = await todo.get()
                with busy:
                    meta = service["metadata"]
                    name, ns, uid = meta["name"], meta["namespace"], meta["uid"]
                    key = (ns, json.dumps(service.get("spec"), sort_keys=True))
                    proto = prototypes.get(key)
                    if proto is None:
                        proto = prototypes[key] = await prototype(service, objects)
                    now = utc_now()
                    for w in proto.writes:
                        path = _fill(w.path, name, ns, uid, "", now)
                        body = _fill(w.body, name, ns, uid, proto.stamp, now).encode()
                        headers = {"Content-Type": w.content_type} if w.content_type else {}
                        async with session.request(
                            w.method, path, params=w.query, data=body or None, headers=headers
                        ) as r:
                            answer = await r.read()
                            if r.status >= 400:  # said on stderr, which the harness quotes
                                print(
                                    f"ceiling: {w.method} {path}: {r.status} {answer[:300]!r}",
                                    file=sys.stderr,
                                    flush=True,
                                )
                    for type_, reason, message in proto.events if events else ():
                        message = _fill(message, name, ns, uid, "", now)
                        to_post.put_nowait((service, (type_, reason, message)))

        busy.queues = [todo, to_post]
        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        tasks += [asyncio.create_task(event_writer()) for _ in range(event_writers)]
        try:
            await feed(session, INFERENCE_SERVICE.collection_path(), todo, ready)
        finally:
            for t in tasks:
                t.cancel()
