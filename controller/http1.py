"""Keep-alive HTTP/1.1 connections for the apiserver's short requests.

A reconcile's status PATCH is most of its cost, and aiohttp's client spends about as
much CPU on one request (tracing hooks, cookie jar, redirects, URL and multidict
objects, a task per body write) as the rest of the reconcile. An apiserver answer needs
none of that: one request at a time per connection, a Content-Length or chunked body,
read whole. This module does only that, on asyncio protocols, with llhttp (httptools:
the parser of aiohttp's speedups and uvicorn) reading the answers; watches (long
streams) stay on aiohttp.

Failures surface as aiohttp's exception types (ClientOSError, as its subclass
ConnectFailed, for a connection that could not be made; ServerDisconnectedError for one
that closed mid-answer) so callers handle both transports alike. As Go's net/http and
aiohttp do, a request that finds its kept-alive connection closed under it is sent again
on a new connection only when its method is idempotent.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import httptools


class ConnectFailed(aiohttp.ClientOSError):
    """No connection to the server could be made (refused, unreachable, the proxy's
    CONNECT or the TLS handshake failed): nothing was sent."""


IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
# Status line + headers (or a chunk-size line, or trailers); the apiserver sends a few
# hundred bytes. llhttp keeps no limit of its own.
MAX_HEAD = 64 * 1024
IDLE_SECONDS = 30.0  # a connection idle longer is closed rather than reused


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    # Lower-case names. A repeated header's values are joined with ", " (RFC 9110 5.3:
    # Warning, Set-Cookie); one that must be single (Content-Length...) is refused.
    headers: dict[str, str]
    body: bytes


# Headers whose repetition makes the answer ambiguous: refused rather than guessed at.
# (llhttp itself refuses a repeated Content-Length, and one beside Transfer-Encoding.)
_SINGLE = frozenset({"content-length", "content-type", "retry-after"})


class _Disconnected(aiohttp.ServerDisconnectedError):
    """Closed before any byte of the answer: safe to resend an idempotent request."""


class _Connection(asyncio.Protocol):
    """One socket; llhttp (httptools) parses the answer to the single request in flight.

    The parser lives as long as the connection, as llhttp expects of keep-alive; our
    callbacks gather one answer and hand it to the waiting request. What llhttp does not
    bound we do: the bytes a head, chunk-size line or trailer may take (MAX_HEAD).
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.reusable = True
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Reply] | None = None
        self._no_body = False  # HEAD: the answer's headers describe a body never sent
        self._headers: dict[str, str] = {}
        self._chunks: list[bytes] = []
        self._received = False  # a byte of this exchange's answer arrived
        self._until_close = False  # no length: the body ends with the connection
        self._unparsed = 0  # bytes fed since the parser last consumed a body or a head
        self._section = 0  # bytes of the headers (then of the trailers) of this answer
        self._trailers = False  # the headers are complete: what on_header gets are trailers

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            if data.strip():  # bytes nobody asked for: never reuse this socket
                self._close()
            return
        self._received = True
        self._unparsed += len(data)
        try:
            self._parser.feed_data(data)
            if self._unparsed > MAX_HEAD:  # a head, chunk-size line or trailer without end
                raise ValueError("header section, chunk size line or trailer too large")
        except (httptools.HttpParserError, ValueError) as e:
            if self._waiter is None:  # the answer was whole: what followed is garbage
                self._close()
                return
            self._fail(aiohttp.ClientPayloadError(f"malformed answer from the server: {_why(e)}"))
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if self._until_close and exc is None:
            self._finish()
        elif self._until_close:  # reset, not closed: the body may be cut short
            error = aiohttp.ClientPayloadError(f"answer cut short: {exc}")
            error.__cause__ = exc
            self._fail(error)
        elif not self._received:
            self._fail(_Disconnected("connection closed before an answer"))
        else:
            self._fail(aiohttp.ServerDisconnectedError("connection closed mid-answer"))

    # -- llhttp's callbacks (only those defined are wired: each costs a call) -------

    def on_message_begin(self) -> None:
        if self._waiter is None:  # a second answer to one request: out of step
            self.reusable = False
        self._headers, self._chunks, self._until_close = {}, [], False
        self._section, self._trailers = 0, False

    def on_header(self, name: bytes, value: bytes) -> None:
        # Whole sections that arrived at once are counted here (headers, then trailers).
        self._section += len(name) + len(value) + 4
        if self._section > MAX_HEAD:
            raise ValueError("header section or trailers too large")
        if self._trailers:  # after a chunked body: nothing of ours to learn there
            return
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip()
        headers = self._headers
        if key in headers:
            if key in _SINGLE:
                raise ValueError(f"repeated {key} header")
            headers[key] = f"{headers[key]}, {text}"
        else:
            headers[key] = text

    def on_headers_complete(self) -> None:
        self._unparsed = self._section = 0
        self._trailers = True
        parser = self._parser
        if not parser.get_http_version().startswith("1."):
            raise ValueError(f"not an HTTP/1.x answer: HTTP/{parser.get_http_version()}")
        status = parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            return
        if not parser.should_keep_alive():
            self.reusable = False
        headers = self._headers
        coding = headers.get("transfer-encoding")
        # We ask for no compression, so chunked is the only coding that may come.
        if coding is not None and coding.lower() != "chunked":
            raise ValueError(f"unsupported Transfer-Encoding {coding}")
        if self._no_body:
            # llhttp cannot be told that a HEAD's answer has no body: finish here, and
            # the next exchange gets a new parser (send()).
            self._finish()
        elif coding is None and "content-length" not in headers and status not in (204, 304):
            self._until_close, self.reusable = True, False

    def on_body(self, body: bytes) -> None:
        self._unparsed = 0
        if self._waiter is None:  # bytes after a HEAD's answer: the stream is out of step
            self.reusable = False
            return
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        self._unparsed = 0
        if self._waiter is not None and not 100 <= self._parser.get_status_code() < 200:
            self._finish()

    # -- one exchange --------------------------------------------------------------

    def send(self, head: bytes, body: bytes | None, no_body: bool) -> asyncio.Future[Reply]:
        assert self.transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        if self._no_body:  # the last answer was a HEAD's: its parser awaits a body
            self._parser = httptools.HttpResponseParser(self)
        self._no_body, self._received, self._unparsed = no_body, False, 0
        # One write: the transport buffers what the socket does not take at once.
        self.transport.write(head + body if body else head)
        return self._waiter

    def expire(self) -> None:
        """The request's deadline passed: fail it with TimeoutError, drop the socket."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(TimeoutError("no answer from the server in time"))
        self.abandon()

    def abandon(self) -> None:
        """The caller gave up (timeout, cancel, a broken answer): the socket's state is
        unknown. Aborted, not closed: close() would keep the socket and its unsent
        bytes for as long as a stuck server does not read them."""
        self._waiter = None
        self.reusable = False
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def retire(self) -> None:
        """Done with after a complete exchange (or never used): closed gracefully."""
        self._close()

    def _close(self) -> None:
        self.reusable = False
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, error: Exception) -> None:
        self.reusable = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)

    def _finish(self) -> None:
        waiter, self._waiter = self._waiter, None
        chunks, self._chunks = self._chunks, []
        if waiter is not None and not waiter.done():
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            waiter.set_result(Reply(self._parser.get_status_code(), self._headers, body))


def _why(error: Exception) -> str:
    """What was wrong: ours when one of our callbacks refused it, else llhttp's reason."""
    cause = error.__context__ if isinstance(error, httptools.HttpParserCallbackError) else None
    return str(cause or error)


@dataclass(frozen=True, slots=True)
class Tunnel:
    """An HTTP proxy that HTTPS connections are tunnelled through (CONNECT), as Go does."""

    host: str
    port: int
    authorization: str | None = None  # Proxy-Authorization


class _TunnelHandshake(asyncio.Protocol):
    """Reads the proxy's answer to CONNECT: its head, and nothing after it."""

    def __init__(self) -> None:
        self.head: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self._buf += data
        end = self._buf.find(b"\r\n\r\n")
        if self.head.done():
            return
        if end >= 0:
            if len(self._buf) > end + 4:  # the server speaks before our TLS hello: not a tunnel
                self.head.set_exception(ValueError("bytes after the proxy's CONNECT answer"))
            else:
                self.head.set_result(bytes(self._buf[:end]))
        elif len(self._buf) > MAX_HEAD:
            self.head.set_exception(ValueError("proxy's CONNECT answer too large"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.head.done():
            self.head.set_exception(ConnectionResetError("proxy closed the connection"))


class ConnectionPool:
    """Kept-alive connections to one host; at most `limit` requests in flight."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        limit: int,
        idle_seconds: float = IDLE_SECONDS,
        tunnel: Tunnel | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.tunnel = tunnel if ssl_context is not None else None  # https only
        self.tunnels = 0  # CONNECTs made (tests read it)
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname or host  # the name the certificate must carry
        self.idle_seconds = idle_seconds
        self.opened = 0  # connections made over the pool's life (tests read it)
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self._closed = False

    async def request(
        self,
        method: str,
        head: bytes,
        body: bytes | None,
        timeout: float | None,
        before_send: Callable[[], None] | None = None,
    ) -> Reply:
        """Send head (request line and headers, ending in a blank line) and body.

        The timeout covers waiting for a slot, connecting and the answer. The common
        case (a free slot, a kept-alive connection) arms one timer on the answer
        instead of an asyncio.timeout scope, which costs several times more.
        before_send runs right before each send (a resend too); raising stops it.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        if self._slots.locked():  # every slot busy: wait for one, within the deadline
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        else:
            await self._slots.acquire()  # free: returns at once
        try:
            while True:
                conn, reused = self._idle_connection(loop.time())
                if conn is None:
                    async with asyncio.timeout_at(deadline):
                        conn = await self._connect()
                if before_send is not None:
                    try:
                        before_send()
                    except BaseException:
                        self._release(conn)  # unused: as good as it was
                        raise
                waiter = conn.send(head, body, method == "HEAD")
                timer = None if deadline is None else loop.call_at(deadline, conn.expire)
                try:
                    reply = await waiter
                except _Disconnected:
                    if reused and method in IDEMPOTENT:
                        continue  # the server had closed the kept-alive socket: resend once
                    raise
                except BaseException:
                    conn.abandon()
                    raise
                finally:
                    if timer is not None:
                        timer.cancel()
                self._release(conn)
                return reply
        finally:
            self._slots.release()

    def _idle_connection(self, now: float) -> tuple[_Connection | None, bool]:
        if self._closed:
            raise aiohttp.ClientConnectionError("connection pool is closed")
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.idle_seconds:
                return conn, True
            conn.retire()
        return None, False

    async def _connect(self) -> _Connection:
        if self.tunnel is not None:
            return await self._connect_through(self.tunnel)
        try:
            _, conn = await asyncio.get_running_loop().create_connection(
                _Connection,
                self.host,
                self.port,
                ssl=self.ssl_context,
                server_hostname=self.server_hostname if self.ssl_context else None,
            )
        except OSError as e:
            raise ConnectFailed(
                e.errno, f"cannot connect to {self.host}:{self.port}: {e.strerror or e}"
            ) from e
        self.opened += 1
        return conn

    async def _connect_through(self, tunnel: Tunnel) -> _Connection:
        """CONNECT host:port through the proxy, then TLS with the server inside it."""
        assert self.ssl_context is not None
        loop = asyncio.get_running_loop()
        where = f"{self.host}:{self.port} through proxy {tunnel.host}:{tunnel.port}"
        try:
            transport, handshake = await loop.create_connection(
                _TunnelHandshake, tunnel.host, tunnel.port
            )
        except OSError as e:
            raise ConnectFailed(e.errno, f"cannot connect to {where}: {e}") from e
        try:
            authority = (
                f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
            )
            auth = (
                f"Proxy-Authorization: {tunnel.authorization}\r\n" if tunnel.authorization else ""
            )
            transport.write(
                f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n".encode("latin-1")
            )
            try:
                head = await handshake.head
            except (OSError, ValueError) as e:
                raise ConnectFailed(None, f"cannot connect to {where}: {e}") from e
            status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            version, _, rest = status_line.partition(" ")
            if not version.startswith("HTTP/1.") or not rest.startswith("200"):
                raise ConnectFailed(
                    None, f"cannot connect to {where}: the proxy answered {status_line[:100]!r}"
                )
            conn = _Connection()
            try:
                tls = await loop.start_tls(
                    transport, conn, self.ssl_context, server_hostname=self.server_hostname
                )
            except OSError as e:
                raise ConnectFailed(e.errno, f"cannot connect to {where}: {e}") from e
            assert tls is not None
            conn.connection_made(tls)
        except BaseException:
            transport.abort()
            raise
        self.tunnels += 1
        self.opened += 1
        return conn

    def _release(self, conn: _Connection) -> None:
        if self._closed or conn.closed or not conn.reusable:
            conn.retire()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.append(conn)

    def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.retire()
        self._idle.clear()
