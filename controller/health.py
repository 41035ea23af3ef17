"""HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz and /metrics."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler


def make_app(
    registry: CollectorRegistry, *, alive: Callable[[], bool], ready: Callable[[], bool]
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if alive() else web.Response(status=500, text="unhealthy")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="informer caches not synced")

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
