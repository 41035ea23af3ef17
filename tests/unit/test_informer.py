"""Informers over raw watch streams, against the test API server process.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_informer.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from controller.informer import Informer
from controller.kube import KubeClient
from controller.resources import POD
from tests.support.waiting import eventually


def nested(depth: int) -> str:
    """A JSON value nested `depth` levels deep (each level one array)."""
    return "[" * depth + "]" * depth


def pod_json(name: str, rv: int, extra: str = "{}") -> str:
    return (
        f'{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default",'
        f'"resourceVersion":"{rv}","uid":"u-{name}"}},"spec":{{"containers":[],"x":{extra}}}}}'
    )


@pytest.fixture
async def hostile_server() -> AsyncIterator[str]:
    """A loopback API endpoint serving pods nested at, beyond and far beyond the limit.

    The bundled test server cannot store such objects itself (it deep-copies them), so
    this endpoint replays what a real apiserver (limit 10,000) would send.
    """
    from aiohttp import web

    from controller.jsondepth import MAX_DEPTH

    # The pod and its spec are 2 levels: x may nest MAX_DEPTH - 2 more.
    at_limit = pod_json("at-limit", 2, nested(MAX_DEPTH - 2))
    beyond = pod_json("beyond", 3, nested(MAX_DEPTH - 1))
    huge = pod_json("huge", 4, nested(10_000))

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            items = ",".join([pod_json("plain", 1), at_limit, beyond, huge])
            body = f'{{"kind":"PodList","items":[{items}],"metadata":{{"resourceVersion":"4"}}}}'
            return web.Response(text=body, content_type="application/json")
        resp = web.StreamResponse()
        await resp.prepare(request)
        if request.query.get("resourceVersion") == "4":
            for line in (
                pod_json("late-beyond", 5, nested(MAX_DEPTH - 1)),
                pod_json("late-at-limit", 5, nested(MAX_DEPTH - 2)),
                pod_json("late-huge", 5, nested(2_000)),
                '{"type":"ADDED","object":' + pod_json("late", 6) + "}",
            ):
                if line.startswith('{"api'):
                    line = '{"type":"ADDED","object":' + line + "}"
                await resp.write(line.encode() + b"\n")
        await asyncio.sleep(30)
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_objects_nested_too_deep_are_skipped_not_fatal(hostile_server: str) -> None:
    """At the limit decodes; beyond it (and at 10,000 and 2,000 on the watch) is skipped."""
    client = await KubeClient.connect(hostile_server)
    informer = Informer(client, POD)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        await eventually(lambda: asyncio.sleep(0, informer.store.get("default", "late")))
        names = sorted(o["metadata"]["name"] for o in informer.store.list())
        assert names == ["at-limit", "late", "late-at-limit", "plain"]
        assert informer.decode_errors == 4  # beyond, huge (list); late-beyond, late-huge
        assert not task.done() and informer.failure is None
    finally:
        task.cancel()
        await client.close()


async def test_watch_lines_are_split_once_whatever_the_chunking() -> None:
    """Lines split across many chunks come out whole (the splitter joins each line once)."""
    from controller.transport import split_lines

    big = b'{"x":"' + b"a" * 3_000_000 + b'"}'
    stream = big + b"\n" + b'{"y":1}\n\n' + big

    async def chunks(size: int) -> AsyncIterator[bytes]:
        for i in range(0, len(stream), size):
            yield stream[i : i + size]

    for size in (7, 65_536, len(stream)):
        lines = [line async for line in split_lines(chunks(size))]
        assert lines == [big, b'{"y":1}', b"", big], size
