"""HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz and /metrics.

/healthz answers 500 naming what is broken: a background task that ended, or an
informer whose loop failed and has not recovered yet (it restarts itself with
backoff). /readyz answers 503 naming what is not ready yet: the informers whose caches
have not synced and the named checks that fail (the webhook before it listens), so no
Service sends traffic to a pod that cannot answer it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from .informer import Informer


def problems(informers: Iterable[Informer], tasks: Iterable[asyncio.Task[None]] = ()) -> list[str]:
    """One line per failed informer or ended task, for /healthz."""
    found = [f"informer {i.rt.plural}: {i.failure}" for i in informers if i.failure]
    for task in tasks:
        if task.done() and task.get_name() != "workers":
            error = None if task.cancelled() else task.exception()
            found.append(f"task {task.get_name()} ended: {error!r}")
    return found


def unsynced(informers: Iterable[Informer]) -> list[str]:
    return sorted(i.rt.plural for i in informers if not i.synced.is_set())


def not_ready(informers: Iterable[Informer], checks: dict[str, Callable[[], bool]]) -> list[str]:
    """One line per reason /readyz answers 503."""
    found = [f"check {name}: not ready" for name, check in sorted(checks.items()) if not check()]
    names = unsynced(informers)
    if names:
        found.insert(0, f"informer caches not synced: {', '.join(names)}")
    return found


def make_app(
    registry: CollectorRegistry,
    *,
    alive: Callable[[], bool],
    ready: Callable[[], bool],
    problems: Callable[[], list[str]] = list,
    waiting_for: Callable[[], list[str]] = list,
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        found = problems()
        if alive() and not found:
            return web.Response(text="ok")
        return web.Response(status=500, text="\n".join(["unhealthy", *found]))

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="\n".join(["not ready", *waiting_for()]))

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    # prometheus_client's own handler: content negotiation (OpenMetrics) and gzip.
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    return app


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving; the runner (to clean up) and the bound port (port 0 picks one)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, int(runner.addresses[0][1])
