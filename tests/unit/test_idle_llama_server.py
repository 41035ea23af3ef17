"""The llama.cpp idle probe against the real llama-server (b10068, tests/support/llama_server.py):
a request in flight is seen as busy, the server idle again once it ends, and a server
started with --no-slots as one without idle detection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from devcluster.tiny_gguf import write_tiny_gguf
from reconcilers.inferenceservice import idle
from runtimes.idle import BUSY, IDLE, SIGNALS, UNKNOWN, UNSUPPORTED, Reading
from tests.support.llama_server import (
    LlamaServer,
    build_llama_server,
    free_port,
    running_llama_server,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(900)  # the first test may build the binary

SLOTS = SIGNALS["llamacpp"]
# Two slots; context shift lets one generation run until its client goes away.
ARGS = ("--parallel", "2", "--ctx-size", "512", "--context-shift")


@pytest.fixture(scope="module")
def llama_server() -> Path:
    return build_llama_server()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


async def reading(server: LlamaServer) -> Reading:
    found = await idle.probe([idle.Replica("pod-a", server.host, server.port)], SLOTS)
    return found["pod-a"]


@asynccontextmanager
async def generating(server: LlamaServer) -> AsyncIterator[None]:
    """A streamed completion that would run for a million tokens, in flight until the
    block ends (closing the stream cancels it)."""
    body = {"prompt": "hello", "n_predict": 1_000_000, "ignore_eos": True, "stream": True}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.url}/completion", json=body) as response,
    ):
        assert response.status == 200
        await response.content.readline()  # the first token: the slot is processing
        yield


async def test_a_request_in_flight_is_busy_and_idle_after_it(
    llama_server: Path, tiny_gguf: Path
) -> None:
    async with running_llama_server(llama_server, tiny_gguf, *ARGS) as server:
        assert await reading(server) == Reading(IDLE)
        async with generating(server):
            busy = await reading(server)
            assert busy == Reading(BUSY, "1 of 2 slot(s) processing")
            await asyncio.sleep(0.5)  # still generating: still busy
            assert (await reading(server)).state == BUSY

        async def idle_again() -> bool:
            return await reading(server) == Reading(IDLE)

        await eventually(idle_again, timeout=30, what="the slot idle after the client left")


async def test_no_slots_endpoint_is_no_idle_detection(llama_server: Path, tiny_gguf: Path) -> None:
    async with running_llama_server(llama_server, tiny_gguf, "--no-slots") as server:
        assert await reading(server) == Reading(
            UNSUPPORTED, "/slots is turned off (llama.cpp --no-slots)"
        )


async def test_a_port_with_no_server_cannot_tell() -> None:
    found = await idle.probe([idle.Replica("gone", "127.0.0.1", free_port())], SLOTS)
    assert found["gone"].state == UNKNOWN
    assert found["gone"].detail.startswith("GET /slots: ClientConnectorError")
