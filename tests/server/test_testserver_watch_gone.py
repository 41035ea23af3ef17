"""A watcher that goes away while the test server is blocked writing to it ends its
watch quietly: no handler error, no traceback in the server's log.

aiohttp fails a write that waits on a full send buffer with a plain ConnectionError
("Connection lost") when the peer resets the connection, not a ConnectionResetError.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import aiohttp
import pytest

from testserver.process import ApiServerProcess

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.mark.server  # starts the server itself, to read its stderr
async def test_a_watcher_reset_mid_write_ends_its_watch_without_an_error() -> None:
    server = await ApiServerProcess.start(capture_stderr=True)
    url, port = server.url, server.port
    try:
        # A watcher with a tiny receive buffer that never reads: the server's writes
        # back up until aiohttp pauses the handler in drain().
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(f"GET {CMS}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        padding = "x" * 200_000
        async with aiohttp.ClientSession(url) as session:
            for i in range(40):
                body = {"metadata": {"name": f"cm-{i}"}, "data": {"pad": padding}}
                async with session.post(CMS, json=body) as r:
                    assert r.status == 201, await r.text()
            await asyncio.sleep(0.5)  # the handler is waiting on the full buffer
            # Reset, not a clean close: connection_lost sees an error.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            await asyncio.sleep(0.5)
            async with session.get(CMS) as r:  # the server is still serving
                assert r.status == 200
    finally:
        log = await server.stop_and_read_log()
    assert "Error handling request" not in log, log
    assert "Traceback" not in log, log
