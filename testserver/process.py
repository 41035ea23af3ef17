"""Start the test API server as a real process (tests, demo, benchmarks) and drive its controls."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp


class ApiServerProcess:
    def __init__(self, proc: asyncio.subprocess.Process, url: str) -> None:
        self.proc = proc
        self.url = url

    @classmethod
    async def start(cls, *args: str) -> ApiServerProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "testserver",
            "--port",
            "0",
            *args,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        if not line.startswith("LISTENING "):
            proc.kill()
            raise RuntimeError(f"test API server did not start: {line!r}")
        return cls(proc, line.split(" ", 1)[1])

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 5)
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def control(self, method: str, action: str, body: Any = None) -> Any:
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, f"{self.url}/_testserver/{action}", json=body) as resp,
        ):
            resp.raise_for_status()
            return await resp.json()

    async def fault(self, **rule: Any) -> None:
        await self.control("POST", "faults", rule)

    async def requests(self) -> dict[str, int]:
        result: dict[str, int] = await self.control("GET", "requests")
        return result


@contextlib.asynccontextmanager
async def api_server(*args: str) -> AsyncIterator[ApiServerProcess]:
    server = await ApiServerProcess.start(*args)
    try:
        yield server
    finally:
        await server.stop()
