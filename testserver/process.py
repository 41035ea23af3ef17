"""Start the test API server as a real process (tests, demo, benchmarks) and drive its controls."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp


class ApiServerProcess:
    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        url: str,
        args: tuple[str, ...],
        capture_stderr: bool = False,
    ) -> None:
        self.proc = proc
        self.url = url
        self.args = args
        self.capture_stderr = capture_stderr

    @staticmethod
    async def _spawn(
        port: int, args: tuple[str, ...], capture_stderr: bool = False
    ) -> tuple[asyncio.subprocess.Process, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "testserver",
            *args,
            "--port",
            str(port),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if capture_stderr else None,
        )
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        if not line.startswith("LISTENING "):
            proc.kill()
            raise RuntimeError(f"test API server did not start: {line!r}")
        return proc, line.split(" ", 1)[1]

    @classmethod
    async def start(cls, *args: str, capture_stderr: bool = False) -> ApiServerProcess:
        """capture_stderr: the server's log is kept for stop_and_read_log()."""
        proc, url = await cls._spawn(0, args, capture_stderr)
        return cls(proc, url, args, capture_stderr)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    async def restart_empty(self) -> None:
        """Kill the server (SIGKILL) and start a fresh one on the same port.

        Its storage starts empty and its resourceVersions start over, as an apiserver
        whose etcd was restored or replaced; clients keep the same URL.
        """
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        last: Exception | None = None
        for _ in range(50):  # the port may linger for a moment after the kill
            try:
                self.proc, _url = await self._spawn(self.port, self.args, self.capture_stderr)
                return
            except RuntimeError as e:
                last = e
                await asyncio.sleep(0.1)
        raise RuntimeError(f"test API server did not restart on port {self.port}: {last}")

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 5)
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def stop_and_read_log(self) -> str:
        """Stop a server started with capture_stderr and return what it wrote to stderr."""
        assert self.capture_stderr, "started without capture_stderr"
        self.proc.terminate()
        _, stderr = await asyncio.wait_for(self.proc.communicate(), 10)
        return stderr.decode()

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
