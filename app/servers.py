"""Servers the manager runs beside its controllers: the webhook, a separate /metrics."""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from controller import health
from controller.manager import Runnable
from webhook.admission import ModelLookup
from webhook.server import start_webhook

log = structlog.get_logger("app")


def webhook_runnable(
    cert_dir: str, port: int, host: str = "0.0.0.0", lookup: ModelLookup | None = None
) -> Runnable:
    """Serve until cancelled by the manager's stop(); a failure to start (no certificate)
    ends the runnable, which /healthz then reports. lookup finds Models for the rules that
    span an InferenceService and its Model."""

    async def run() -> None:
        try:
            server = await start_webhook(cert_dir, port, host, lookup=lookup)
        except Exception:
            log.exception("webhook server did not start", cert_dir=cert_dir, port=port)
            raise
        try:
            await asyncio.Event().wait()
        finally:
            await server.cleanup()

    return run


def metrics_runnable(registry: CollectorRegistry, host: str, port: int) -> Runnable:
    """/metrics on its own address (--metrics-bind-address), apart from the probes."""

    async def run() -> None:
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(registry))
        runner, bound = await health.serve(app, host, port)
        log.info("metrics serving", port=bound)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    return run
