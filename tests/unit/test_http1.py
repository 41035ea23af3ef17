"""The lean HTTP/1.1 transport (controller.http1) against real sockets.

Every other test already sends the controller's short requests through it to the test
API server; these cover what that server never does: chunked answers, interim answers,
closes at the worst moment, garbage, silence, TLS with a named server, and the pool's
bounds. The peer is a scripted HTTP server on a real socket, so each case is exact.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_http1.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest

from controller.errors import Fenced
from controller.http1 import ConnectionPool
from tests.support.waiting import eventually

Answer = Callable[[int, bytes, asyncio.StreamWriter], Awaitable[bool]]
HEAD_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"  # describes a body never sent


@dataclass
class Scripted:
    """Reads requests; answer(n, request, writer) writes the nth answer (False: hang up)."""

    answer: Answer
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    in_flight: int = 0
    most_in_flight: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode().split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
                try:
                    keep = await self.answer(len(self.requests), request, writer)
                finally:
                    self.in_flight -= 1
                await writer.drain()
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client hung up
        finally:
            writer.close()


Pool = tuple["Scripted", ConnectionPool]


@contextlib.asynccontextmanager
async def scripted(answer: Answer, limit: int = 4) -> AsyncIterator[Pool]:
    peer = Scripted(answer)
    server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool("127.0.0.1", port, ssl_context=None, limit=limit)
    try:
        yield peer, pool
    finally:
        pool.close()
        server.close()


def head(method: str = "GET", path: str = "/x") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode()


def ok(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


async def test_a_chunked_answer_is_joined_and_its_connection_kept() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        w.write(b'4;ext=1\r\n{"a"\r\n')  # a chunk extension, then the next chunk later
        await w.drain()
        await asyncio.sleep(0.01)
        w.write(f"3\r\n:{n}}}\r\n0\r\nX-Trailer: t\r\n\r\n".encode())
        return True

    async with scripted(answer) as (peer, pool):
        first = await pool.request("GET", head(), None, 5)
        second = await pool.request("GET", head(), None, 5)
    assert json.loads(first.body) == {"a": 1} and json.loads(second.body) == {"a": 2}
    assert (pool.opened, peer.connections) == (1, 1)


async def test_connection_close_and_http10_answers_are_not_reused() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        if n == 1:
            w.write(ok(b"one", "Connection: close\r\n"))
            return False
        w.write(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")  # no length: the body ends at close
        return False

    async with scripted(answer) as (peer, pool):
        first = await pool.request("GET", head(), None, 5)
        second = await pool.request("GET", head(), None, 5)
    assert (first.body, second.body) == (b"one", b"until the end")
    assert peer.connections == 2
    assert pool.opened == 2


async def test_an_interim_answer_is_skipped() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"final", "Retry-After: 3\r\n"))
        return True

    async with scripted(answer) as (_, pool):
        reply = await pool.request("POST", head("POST"), b"", 5)
    assert (reply.status, reply.body, reply.headers["retry-after"]) == (200, b"final", "3")


async def test_no_body_for_head_and_204() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(HEAD_ANSWER if n == 1 else b"HTTP/1.1 204 No Content\r\n\r\n")
        return True

    async with scripted(answer) as (_, pool):
        assert (await pool.request("HEAD", head("HEAD"), None, 5)).body == b""
        assert (await pool.request("DELETE", head("DELETE"), None, 5)).status == 204
        assert pool.opened == 1


def hang_up_on_second(body: bytes = b"{}") -> Answer:
    """Answer the first request, then drop the kept-alive connection on the next one."""

    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        if n == 2:
            return False  # read it, answer nothing, close: an idle timeout racing a send
        w.write(ok(body))
        return True

    return answer


async def test_an_idempotent_request_is_resent_when_its_kept_connection_dies() -> None:
    async with scripted(hang_up_on_second()) as (peer, pool):
        await pool.request("GET", head(), None, 5)
        reply = await pool.request("GET", head(), None, 5)
    assert reply.status == 200
    assert (len(peer.requests), pool.opened) == (3, 2)


async def test_a_patch_is_not_resent_when_its_kept_connection_dies() -> None:
    async with scripted(hang_up_on_second()) as (peer, pool):
        await pool.request("PATCH", head("PATCH"), b"", 5)
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await pool.request("PATCH", head("PATCH"), b"", 5)
    assert len(peer.requests) == 2  # the server may have applied it: not sent twice


async def test_a_close_mid_answer_is_an_error_even_for_get() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        return False

    async with scripted(answer) as (peer, pool):
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await pool.request("GET", head(), None, 5)
    assert len(peer.requests) == 1


@pytest.mark.parametrize(
    "garbage",
    [
        b"SPDY/3 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: "
        + b"t" * 70_000
        + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"h" * 70_000,  # headers that never end
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 70_000,
    ],
)
async def test_a_malformed_answer_is_an_error_and_the_socket_is_dropped(garbage: bytes) -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(garbage if n == 1 else ok(b"fine"))
        return True

    async with scripted(answer) as (_, pool):
        with pytest.raises(aiohttp.ClientPayloadError):
            await pool.request("GET", head(), None, 5)
        assert (await pool.request("GET", head(), None, 5)).body == b"fine"
    assert pool.opened == 2


async def test_a_silent_server_times_out_and_the_socket_is_closed() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        if n == 1:
            await asyncio.sleep(30)
        w.write(ok(b"late"))
        return True

    async with scripted(answer) as (_, pool):
        with pytest.raises(TimeoutError):
            await pool.request("GET", head(), None, 0.2)
        # The late answer must not be read as the next request's: a new socket serves it.
        assert (await pool.request("GET", head(), None, 5)).body == b"late"
    assert pool.opened == 2


async def test_an_unreachable_server_is_a_client_os_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
    pool = ConnectionPool("127.0.0.1", port, ssl_context=None, limit=1)
    with pytest.raises(aiohttp.ClientOSError) as raised:
        await pool.request("GET", head(), None, 5)
    assert f"127.0.0.1:{port}" in str(raised.value)


async def test_requests_in_flight_are_bounded_by_the_limit() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        w.write(ok(b"x"))
        return True

    async with scripted(answer, limit=2) as (peer, pool):
        await asyncio.gather(*(pool.request("GET", head(), None, 5) for _ in range(6)))
    assert peer.most_in_flight == 2 and pool.opened == 2 and len(peer.requests) == 6


async def test_unsolicited_bytes_retire_an_idle_connection() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(ok(b"x") + (b"HTTP/1.1 200 OK\r\n" if n == 1 else b""))  # one answer too many
        return True

    async with scripted(answer) as (_, pool):
        await pool.request("GET", head(), None, 5)
        assert (await pool.request("GET", head(), None, 5)).body == b"x"
    assert pool.opened == 2


async def test_a_reset_cuts_short_an_until_close_body() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.0 200 OK\r\n\r\npartial")
        await w.drain()
        await asyncio.sleep(0.05)
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.transport.abort()  # with no linger: a reset, not an orderly end
        return False

    async with scripted(answer) as (_, pool):
        with pytest.raises(aiohttp.ClientPayloadError):
            await pool.request("GET", head(), None, 5)


async def test_a_timed_out_request_keeps_no_unsent_bytes() -> None:
    """A server that stops reading: the timed-out request's socket is reset, not left
    to drain its 16 MiB for as long as the server does not read."""
    seen: dict[str, int] = {}

    async def stuck(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.5)  # not reading while the client gives up
        received = 0
        try:
            while chunk := await reader.read(1 << 20):
                received += len(chunk)
        except ConnectionError:
            seen["reset"] = 1
        seen["received"] = received
        writer.close()

    server = await asyncio.start_server(stuck, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool("127.0.0.1", port, ssl_context=None, limit=1)
    body = b"x" * (16 << 20)
    try:
        with pytest.raises(TimeoutError):
            await pool.request("PUT", head("PUT"), body, 0.2)
        await eventually(lambda: asyncio.sleep(0, "received" in seen), 10, what="the server")
    finally:
        pool.close()
        server.close()
    assert seen.get("reset") or seen["received"] < len(body)


async def test_before_send_can_stop_a_request_and_frees_its_slot() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(ok(b"sent"))
        return True

    def refuse() -> None:
        raise Fenced("/x")

    async with scripted(answer, limit=1) as (peer, pool):
        with pytest.raises(Fenced):
            await pool.request("PATCH", head("PATCH"), b"", 5, refuse)
        assert peer.requests == []
        assert (await pool.request("PATCH", head("PATCH"), b"", 5, lambda: None)).body == b"sent"


# -- what a loose parser let through (issue 22): llhttp refuses it ------------------


@pytest.mark.parametrize(
    "answer_bytes",
    [
        # Python's int(x, 16) took all three as chunk sizes; HTTP allows hex digits only.
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x1a\r\n"
        + b"a" * 26
        + b"\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n"
        + b"a" * 16
        + b"\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\naaaaa\r\n0\r\n\r\n",
        # Two lengths: which one frames the body is anyone's guess (request smuggling).
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 4\r\n\r\nabcd",
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nContent-Type: c/d\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: +4\r\n\r\nabcd",
        b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=[
        "0x1a",
        "1_0",
        "+5",
        "two-lengths",
        "same-length-twice",
        "length-and-chunked",
        "two-content-types",
        "+length",
        "http2",
    ],
)
async def test_loose_framing_is_refused(answer_bytes: bytes) -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(answer_bytes if n == 1 else ok(b"fine"))
        return True

    async with scripted(answer) as (_, pool):
        with pytest.raises(aiohttp.ClientPayloadError, match="malformed"):
            await pool.request("GET", head(), None, 5)
        assert (await pool.request("GET", head(), None, 5)).body == b"fine"
    assert pool.opened == 2


async def test_repeated_list_headers_are_kept_and_trailers_ignored() -> None:
    async def answer(n: int, _: bytes, w: asyncio.StreamWriter) -> bool:
        w.write(
            b'HTTP/1.1 200 OK\r\nWarning: 299 - "first"\r\nSet-Cookie: a=1\r\n'
            b'Warning: 299 - "second"\r\nSet-Cookie: b=2\r\nTransfer-Encoding: chunked\r\n\r\n'
            b"2\r\nok\r\n0\r\nWarning: trailer\r\nContent-Type: x/y\r\n\r\n"
        )
        return True

    async with scripted(answer) as (_, pool):
        reply = await pool.request("GET", head(), None, 5)
        assert reply.headers["warning"] == '299 - "first", 299 - "second"'
        assert reply.headers["set-cookie"] == "a=1, b=2"
        assert "content-type" not in reply.headers and reply.body == b"ok"
        await pool.request("GET", head(), None, 5)  # the connection stays in step
    assert pool.opened == 1
