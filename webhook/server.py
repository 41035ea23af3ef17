"""HTTPS server for the validating webhook, with its certificate reloaded when it changes.

The certificate and key come from a Secret mounted as files (tls.crt, tls.key), the
layout cert-manager writes; a rotated certificate is picked up for new connections
without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path

import structlog
from aiohttp import web

from .admission import BadReview, ModelLookup, review

log = structlog.get_logger("webhook")
PATH = "/validate-inference-llmkube-dev-v1alpha1"
MAX_BODY = 3 * 1024 * 1024  # the apiserver's own request limit for objects


class CertificateReloader:
    def __init__(self, cert_dir: str) -> None:
        self.cert = Path(cert_dir) / "tls.crt"
        self.key = Path(cert_dir) / "tls.key"
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp = (0.0, 0.0)
        self.reload()

    def _mtimes(self) -> tuple[float, float]:
        return self.cert.stat().st_mtime, self.key.stat().st_mtime

    def reload(self) -> bool:
        stamp = self._mtimes()
        if stamp == self._stamp:
            return False
        self.context.load_cert_chain(self.cert, self.key)
        self._stamp = stamp
        return True

    async def watch(self, interval: float = 30.0) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                if self.reload():
                    log.info("webhook certificate reloaded", cert=str(self.cert))
            except (OSError, ssl.SSLError) as e:
                log.warning("webhook certificate reload failed", error=str(e))


def make_app(lookup: ModelLookup | None = None) -> web.Application:
    async def validate(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return web.json_response({"error": "Content-Type must be application/json"}, status=415)
        try:
            return web.json_response(review(await request.read(), lookup))
        except BadReview as e:
            return web.json_response({"error": str(e)}, status=400)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(PATH, validate)
    app.router.add_get("/healthz", healthz)
    return app


class WebhookServer:
    def __init__(self, runner: web.AppRunner, reloader: CertificateReloader, port: int) -> None:
        self.runner = runner
        self.reloader = reloader
        self.port = port
        self._watch = asyncio.create_task(reloader.watch())

    async def cleanup(self) -> None:
        self._watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watch
        await self.runner.cleanup()


async def start_webhook(
    cert_dir: str, port: int, host: str = "0.0.0.0", lookup: ModelLookup | None = None
) -> WebhookServer:
    """lookup finds Models for the rules that span an InferenceService and its Model."""
    reloader = CertificateReloader(cert_dir)
    runner = web.AppRunner(make_app(lookup), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=reloader.context)
    await site.start()
    bound = int(runner.addresses[0][1])
    log.info("webhook serving", port=bound, path=PATH)
    return WebhookServer(runner, reloader, bound)
