"""The real llama-server (llama.cpp's own server at the release our images pin, b10068,
built CPU-only by scripts/build-llama-server.sh and cached), and a running one on a free
local port with a tiny random GGUF (devcluster/tiny_gguf.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-llama-server.sh"
START_DEADLINE = 120.0  # s until /health answers 200 (a loaded CI machine is slow)


def build_llama_server() -> Path:
    """The cached binary, built on first use; skip (with the reason) where it cannot be."""
    env = {**os.environ, "PYTHON": sys.executable}
    try:
        done = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, timeout=3300
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"llama-server could not be built: {e}")
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-5:])
        pytest.skip(f"llama-server could not be built ({BUILD_SCRIPT.name}): {tail}")
    return Path(done.stdout.strip().splitlines()[-1])


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    host: str
    port: int
    proc: asyncio.subprocess.Process

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


async def _healthy(server: LlamaServer) -> bool:
    deadline = time.monotonic() + START_DEADLINE
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if server.proc.returncode is not None:
                return False
            try:
                async with session.get(f"{server.url}/health") as r:
                    if r.status == 200:
                        return True
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    return False


@asynccontextmanager
async def running_llama_server(
    binary: Path, model: Path, *args: str, host: str = "127.0.0.1"
) -> AsyncIterator[LlamaServer]:
    """llama-server on model with args, on a free port of host, healthy; killed after."""
    port = free_port(host)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_ARG_", "AIP_"))}
    proc = await asyncio.create_subprocess_exec(
        str(binary),
        *("--model", str(model), "--host", host, "--port", str(port), *args),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    server = LlamaServer(host, port, proc)
    try:
        assert await _healthy(server), f"llama-server {args} did not answer /health"
        yield server
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
