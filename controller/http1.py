"""Keep-alive HTTP/1.1 connections for the apiserver's short requests.

A reconcile's status PATCH is most of its cost, and aiohttp's client spends about as
much CPU on one request (tracing hooks, cookie jar, redirects, URL and multidict
objects, a task per body write) as the rest of the reconcile. An apiserver answer needs
none of that: one request at a time per connection, a Content-Length or chunked body,
read whole. This module does only that, on asyncio protocols; watches (long streams)
and proxied set-ups stay on aiohttp.

Failures surface as aiohttp's exception types (ClientOSError for a connection that
could not be made, ServerDisconnectedError for one that closed mid-answer) so callers
handle both transports alike. As Go's net/http and aiohttp do, a request that finds its
kept-alive connection closed under it is sent again on a new connection only when its
method is idempotent.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_HEAD = 64 * 1024  # status line + headers; the apiserver sends a few hundred bytes
IDLE_SECONDS = 30.0  # a connection idle longer is closed rather than reused


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes


def _find(buf: bytearray, separator: bytes, what: str) -> int:
    """Where separator starts in buf; -1 while it has not arrived. A line that grows past
    MAX_HEAD without one is refused: a peer could otherwise fill our memory with it."""
    end = buf.find(separator)
    if end < 0 and len(buf) > MAX_HEAD:
        raise ValueError(f"{what} too large")
    return end


class _Disconnected(aiohttp.ServerDisconnectedError):
    """Closed before any byte of the answer: safe to resend an idempotent request."""


class _Connection(asyncio.Protocol):
    """One socket; parses the answer to the single request in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._buf = bytearray()
        self._waiter: asyncio.Future[Reply] | None = None
        self._no_body = False  # HEAD: the answer's headers describe a body never sent
        self._state = "idle"  # idle, head, length, chunk-size, chunk-data, until-close
        self._status = 0
        self._headers: dict[str, str] = {}
        self._remaining = 0
        self._chunks: list[bytes] = []
        self._trailer_bytes = 0
        self.reusable = True

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._waiter is None:
            if self._buf.strip():  # bytes nobody asked for: never reuse this socket
                self._close()
            else:
                self._buf.clear()
            return
        try:
            self._parse()
        except ValueError as e:
            self._fail(aiohttp.ClientPayloadError(f"malformed answer from the server: {e}"))
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if self._state == "until-close" and exc is None:
            self._finish(bytes(self._buf))
        elif self._state == "until-close":  # reset, not closed: the body may be cut short
            error = aiohttp.ClientPayloadError(f"answer cut short: {exc}")
            error.__cause__ = exc
            self._fail(error)
        elif self._state == "head" and not self._buf:
            self._fail(_Disconnected("connection closed before an answer"))
        else:
            self._fail(aiohttp.ServerDisconnectedError("connection closed mid-answer"))

    # -- one exchange --------------------------------------------------------------

    def send(self, head: bytes, body: bytes | None, no_body: bool) -> asyncio.Future[Reply]:
        assert self.transport is not None and self._state == "idle"
        self._waiter = asyncio.get_running_loop().create_future()
        self._state, self._no_body, self._buf = "head", no_body, bytearray()
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

    def _finish(self, body: bytes) -> None:
        waiter, self._waiter = self._waiter, None
        self._state = "idle"
        if self._buf:  # more than the answer: the stream is out of step
            self.reusable = False
        if waiter is not None and not waiter.done():
            waiter.set_result(Reply(self._status, self._headers, body))

    def _parse(self) -> None:
        buf = self._buf
        while self._waiter is not None:
            state = self._state
            if state == "head":
                end = _find(buf, b"\r\n\r\n", "header section")
                if end < 0:
                    return
                head = bytes(buf[:end])
                del buf[: end + 4]
                self._read_head(head)
            elif state == "length":
                if len(buf) < self._remaining:
                    return
                body = bytes(buf[: self._remaining])
                del buf[: self._remaining]
                self._finish(body)
            elif state == "chunk-size":
                end = _find(buf, b"\r\n", "chunk size line")
                if end < 0:
                    return
                size = int(bytes(buf[:end]).split(b";", 1)[0].strip(), 16)
                if size < 0:
                    raise ValueError("negative chunk size")
                del buf[: end + 2]
                if size:
                    self._state, self._remaining = "chunk-data", size
                else:
                    self._state = "trailers"
            elif state == "chunk-data":
                if len(buf) < self._remaining + 2:
                    return
                if buf[self._remaining : self._remaining + 2] != b"\r\n":
                    raise ValueError("chunk not followed by CRLF")
                self._chunks.append(bytes(buf[: self._remaining]))
                del buf[: self._remaining + 2]
                self._state = "chunk-size"
            elif state == "trailers":  # none or more header lines, then an empty one
                end = _find(buf, b"\r\n", "trailer section")
                if end < 0:
                    return
                self._trailer_bytes += end + 2
                if self._trailer_bytes > MAX_HEAD:
                    raise ValueError("trailer section too large")
                del buf[: end + 2]
                if end == 0:
                    body, self._chunks = b"".join(self._chunks), []
                    self._finish(body)
            else:  # until-close: the body ends with the connection
                return

    def _read_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        status = int(rest[:3])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"malformed header line: {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            return
        self._status, self._headers = status, headers
        connection = headers.get("connection", "").lower()
        if "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection):
            self.reusable = False
        if self._no_body or status in (204, 304):
            self._finish(b"")
        elif "transfer-encoding" in headers:
            # We ask for no compression, so chunked is the only coding that may come.
            if headers["transfer-encoding"].strip().lower() != "chunked":
                raise ValueError(f"unsupported Transfer-Encoding {headers['transfer-encoding']}")
            self._state, self._chunks, self._trailer_bytes = "chunk-size", [], 0
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length < 0:
                raise ValueError("negative Content-Length")
            self._state, self._remaining = "length", length
        else:
            self._state, self.reusable = "until-close", False


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
    ) -> None:
        self.host, self.port = host, port
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
        try:
            _, conn = await asyncio.get_running_loop().create_connection(
                _Connection,
                self.host,
                self.port,
                ssl=self.ssl_context,
                server_hostname=self.server_hostname if self.ssl_context else None,
            )
        except OSError as e:
            raise aiohttp.ClientOSError(
                e.errno, f"cannot connect to {self.host}:{self.port}: {e.strerror or e}"
            ) from e
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
