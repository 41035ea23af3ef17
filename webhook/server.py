"""HTTPS server for the validating webhook, with its certificate reloaded when it changes.

The certificate and key come from a Secret mounted as files (tls.crt, tls.key), the
layout cert-manager writes; a rotated certificate is picked up for new connections
without a restart.

The server faces the network, so every connection is bounded: a TLS handshake must end
within HANDSHAKE_TIMEOUT, a request's headers within HEADER_TIMEOUT of the connection
(or of the previous response: this doubles as the idle timeout), its body within
BODY_TIMEOUT, and at most MAX_CONNECTIONS are open at once (more are closed at
accept). Bodies over MAX_BODY get 413, JSON nested too deep 400. When a flood of
connections has drained, freed memory is handed back to the OS (glibc keeps it
otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from controller import jsondepth

from .admission import BadReview, ModelLookup, review

log = structlog.get_logger("webhook")
PATH = "/validate-inference-llmkube-dev-v1alpha1"
MAX_BODY = 3 * 1024 * 1024  # the apiserver's own request limit for objects
HANDSHAKE_TIMEOUT = 5.0
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 10.0
MAX_CONNECTIONS = 256


@dataclass
class Limits:
    handshake_timeout: float = HANDSHAKE_TIMEOUT
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    max_connections: int = MAX_CONNECTIONS


@dataclass
class ConnectionStats:
    open: int = 0
    refused: int = 0  # closed at accept: over the connection cap
    timed_out: int = 0  # closed for a slow handshake-less request, headers or idleness
    peak: int = 0
    guards: dict[Any, _Guard] = field(default_factory=dict)  # transport -> its guard


def _trim_memory() -> None:
    """Return freed heap to the OS; a no-op where there is no glibc."""
    name = ctypes.util.find_library("c")
    if not name:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name).malloc_trim(0)


class _Guard(asyncio.Protocol):
    """Wraps aiohttp's protocol: counts the connection and closes it when it dawdles."""

    def __init__(self, inner: asyncio.Protocol, limits: Limits, stats: ConnectionStats) -> None:
        self.inner = inner
        self.limits = limits
        self.stats = stats
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.stats.open >= self.limits.max_connections:
            self.stats.refused += 1
            transport.abort()
            return
        self.counted = True
        self.stats.open += 1
        self.stats.peak = max(self.stats.peak, self.stats.open)
        self.stats.guards[transport] = self
        self.inner.connection_made(transport)
        self.arm()

    def arm(self) -> None:
        """Until the next request's handler starts, the peer has header_timeout."""
        self.disarm()
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.limits.header_timeout, self._expire)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.stats.timed_out += 1
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        if self.counted:
            self.counted = False
            self.stats.open -= 1
            self.stats.guards.pop(self.transport, None)
            self.inner.connection_lost(exc)
            if self.stats.open == 0 and self.stats.peak >= 32:
                self.stats.peak = 0  # a flood drained: give its buffers back
                _trim_memory()


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


def make_app(
    limits: Limits | None = None,
    stats: ConnectionStats | None = None,
    lookup: ModelLookup | None = None,
    roots: tuple[str, ...] = (),
    any_host_path: bool = False,
) -> web.Application:
    """roots: the operator's --allowed-host-path-roots; any_host_path:
    --allow-any-extra-volume-host-path."""
    limits = limits or Limits()
    stats = stats or ConnectionStats()

    @web.middleware
    async def in_handler(request: web.Request, handler: Any) -> web.StreamResponse:
        # Headers are in: stop the header clock while the handler runs, restart it after.
        guard = stats.guards.get(request.transport)
        if guard is not None:
            guard.disarm()
        try:
            response: web.StreamResponse = await handler(request)
            return response
        finally:
            if guard and guard.transport and not guard.transport.is_closing():
                guard.arm()

    async def validate(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return web.json_response({"error": "Content-Type must be application/json"}, status=415)
        try:
            body = await asyncio.wait_for(request.read(), limits.body_timeout)
        except TimeoutError:
            return web.json_response({"error": "request body not received in time"}, status=408)
        if jsondepth.depth(body) > jsondepth.MAX_DEPTH:
            limit = jsondepth.MAX_DEPTH
            return web.json_response({"error": f"JSON nested deeper than {limit}"}, status=400)
        try:
            return web.json_response(review(body, lookup, roots, any_host_path))
        except BadReview as e:
            return web.json_response({"error": str(e)}, status=400)
        except RecursionError:
            return web.json_response({"error": "JSON nested too deep"}, status=400)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=MAX_BODY, middlewares=[in_handler])
    app.router.add_post(PATH, validate)
    app.router.add_get("/healthz", healthz)
    return app


class WebhookServer:
    def __init__(
        self,
        runner: web.AppRunner,
        server: asyncio.Server,
        reloader: CertificateReloader,
        port: int,
        stats: ConnectionStats,
    ) -> None:
        self.runner = runner
        self.server = server
        self.reloader = reloader
        self.port = port
        self.stats = stats
        self._watch = asyncio.create_task(reloader.watch())

    async def cleanup(self) -> None:
        self._watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watch
        self.server.close()
        for guard in list(self.stats.guards.values()):
            if guard.transport is not None:
                guard.transport.abort()
        await self.runner.cleanup()


async def start_webhook(
    cert_dir: str,
    port: int,
    host: str = "0.0.0.0",
    limits: Limits | None = None,
    lookup: ModelLookup | None = None,
    roots: tuple[str, ...] = (),
    any_host_path: bool = False,
) -> WebhookServer:
    """lookup finds Models for the rules that span an InferenceService and its Model;
    roots: the operator's --allowed-host-path-roots; any_host_path:
    --allow-any-extra-volume-host-path."""
    limits = limits or Limits()
    stats = ConnectionStats()
    reloader = CertificateReloader(cert_dir)
    # keepalive_timeout: aiohttp's own idle close, backed by the guard's header clock.
    runner = web.AppRunner(
        make_app(limits, stats, lookup, roots, any_host_path),
        access_log=None,
        keepalive_timeout=limits.header_timeout,
        max_field_size=16 * 1024,
        max_line_size=16 * 1024,
    )
    await runner.setup()
    factory = runner.server
    assert factory is not None
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Guard(factory(), limits, stats),
        host,
        port,
        ssl=reloader.context,
        ssl_handshake_timeout=limits.handshake_timeout,
        backlog=limits.max_connections,
    )
    bound = int(server.sockets[0].getsockname()[1])
    log.info("webhook serving", port=bound, path=PATH)
    return WebhookServer(runner, server, reloader, bound, stats)
