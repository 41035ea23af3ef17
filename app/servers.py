"""Servers the manager runs beside its controllers: the webhook, a separate /metrics, and
the objects LLMKube's domain gauges are computed from at each scrape."""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from controller import health
from controller.cache import Cache
from controller.manager import Manager, Runnable
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE, MODEL, ResourceType
from metrics.domain import DomainObjects, DomainSource
from webhook.admission import ModelLookup
from webhook.server import start_webhook

log = structlog.get_logger("app")


class WebhookRunnable:
    """The webhook server as a manager runnable. Serves until cancelled by the manager's
    stop(); a failure to start (no certificate) ends the runnable, which /healthz then
    reports. `listening` is the manager's readiness check: until the server is bound,
    /readyz answers 503, so the Service sends no admission request to this pod yet.
    lookup finds Models for the rules that span an InferenceService and its Model."""

    def __init__(
        self,
        cert_dir: str,
        port: int,
        host: str = "0.0.0.0",
        lookup: ModelLookup | None = None,
        roots: tuple[str, ...] = (),
        any_host_path: bool = False,
    ) -> None:
        self.cert_dir, self.port, self.host = cert_dir, port, host
        self.lookup, self.roots, self.any_host_path = lookup, roots, any_host_path
        self._listening = False

    def listening(self) -> bool:
        return self._listening

    async def __call__(self) -> None:
        try:
            server = await start_webhook(
                self.cert_dir,
                self.port,
                self.host,
                lookup=self.lookup,
                roots=self.roots,
                any_host_path=self.any_host_path,
            )
        except Exception:
            log.exception("webhook server did not start", cert_dir=self.cert_dir, port=self.port)
            raise
        self._listening = True
        try:
            await asyncio.Event().wait()
        finally:
            self._listening = False
            await server.cleanup()


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


def domain_source(cache: Cache) -> DomainSource:
    """The informer cache's Models, InferenceServices and GPUQuotas, as a scrape sees them."""

    def listed(rt: ResourceType) -> list[dict[str, object]]:
        if rt not in cache.informers:  # not watched by this manager
            return []
        return cache.list(rt)

    def objects() -> DomainObjects:
        return DomainObjects(
            models=listed(MODEL), services=listed(INFERENCE_SERVICE), quotas=listed(GPU_QUOTA)
        )

    return objects


def bind_domain_metrics(manager: Manager) -> None:
    """LLMKube's gauges on the manager's /metrics, from its cache (no reconciler publishes)."""
    manager.metrics.domain.bind(domain_source(manager.cache))
