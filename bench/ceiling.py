"""The server's ceiling: the least code that does the product's writes, on plain aiohttp.

List, then watch from the list's resourceVersion; every object without status goes to N
workers; each makes one status PATCH, the product's own body for that Model
(bench.model_writes, learnt once per distinct spec), and hands the product's Events for
it to a pool of background writers (as many as the product's recorder has, so Events do
not crowd out status writes). No cache, no queue semantics, no retries: whatever the
product does beyond this is overhead. On a real apiserver it presents the kubeconfig's
client certificate over TLS (`connection`).
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from objtypes import Obj

from .model_writes import ModelWriter, server_objects

MODELS = "/apis/inference.llmkube.dev/v1alpha1"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(obj: Obj, type_: str, reason: str, message: str) -> Obj:
    """The Event a ceiling posts about obj, as the product's recorder writes one."""
    meta = obj["metadata"]
    now = _now()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:10]}"},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": "ceiling", "host": socket.gethostname()},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class Busy:
    """Whether work is queued or in flight, and when a unit of work last ended (wall
    clock), for the bench's "all writes done" time."""

    def __init__(self) -> None:
        self.active = 0
        self.until = 0.0
        self.queues: list[asyncio.Queue[Any]] = []

    @property
    def idle(self) -> bool:
        return not self.active and all(q.empty() for q in self.queues)

    def __enter__(self) -> None:
        self.active += 1

    def __exit__(self, *_: object) -> None:
        self.active -= 1
        self.until = time.time()


@dataclass(frozen=True)
class Connection:
    url: str
    tls: ssl.SSLContext | None = None  # None: plain http (the test server)


async def connection(url: str | None, kubeconfig: str | None) -> Connection:
    """A plain URL, or the kubeconfig's server, CA and client certificate."""
    if kubeconfig is None:
        assert url is not None
        return Connection(url)
    configuration = k8s_client.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    if not configuration.host or not configuration.cert_file:
        raise ValueError(f"{kubeconfig}: the ceiling needs a server and a client certificate")
    tls = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    tls.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    return Connection(configuration.host, tls)


async def run(
    server: Connection,
    workers: int,
    events: int,
    ready: asyncio.Event,
    busy: Busy,
    event_writers: int = 8,
) -> None:
    connector = aiohttp.TCPConnector(limit=workers + 8, ssl=server.tls or False)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(server.url, connector=connector, timeout=timeout) as session:
        writer = ModelWriter(await server_objects(session))
        todo: asyncio.Queue[Obj] = asyncio.Queue()
        to_post: asyncio.Queue[tuple[Obj, tuple[str, str, str]]] = asyncio.Queue()

        async def event_writer() -> None:
            while True:
                obj, (type_, reason, message) = await to_post.get()
                with busy:
                    ns = obj["metadata"]["namespace"]
                    body = event_body(obj, type_, reason, message)
                    async with session.post(f"/api/v1/namespaces/{ns}/events", json=body) as r:
                        await r.read()

        async def worker() -> None:
            while True:
                obj = await todo.get()
                with busy:
                    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
                    path = f"{MODELS}/namespaces/{ns}/models/{name}/status"
                    writes = await writer.writes(obj)
                    body = writes.body_now(_now())
                    async with session.patch(path, data=body, headers=MERGE) as r:
                        await r.read()
                    for event in writes.events[:events]:
                        to_post.put_nowait((obj, event))

        busy.queues = [todo, to_post]
        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        tasks += [asyncio.create_task(event_writer()) for _ in range(event_writers)]
        try:
            await feed(session, f"{MODELS}/models", todo, ready)
        finally:
            for t in tasks:
                t.cancel()


async def feed(
    session: aiohttp.ClientSession, path: str, todo: asyncio.Queue[Obj], ready: asyncio.Event
) -> None:
    """List `path`, then watch it from the list's resourceVersion: every object without
    status (listed, or ADDED) goes to `todo`; `ready` is set once the list is queued."""
    async with session.get(path) as r:
        listed = await r.json()
    for obj in listed["items"]:
        if not obj.get("status"):
            todo.put_nowait(obj)
    rv = listed["metadata"]["resourceVersion"]
    ready.set()
    while True:
        query = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "3600"}
        async with session.get(path, params=query) as r:
            async for line in r.content:
                event = json.loads(line)
                obj = event["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                if event["type"] == "ADDED" and not obj.get("status"):
                    todo.put_nowait(obj)
