"""Drive one system under test (SUT) against an empty API server, from outside.

Three processes, as in production: the API server, the SUT (product, ceiling or kopf)
and this one, which creates the objects and watches for the SUT's writes with a client
of its own. The server is a fresh test API server process per run (TEST_SERVER), or the
real kube-apiserver of bench.kube (its namespaces made for the run and deleted after).
A burst run creates N objects at once (64 in flight) and times until every object is
handled; a steady run creates objects at a fixed rate and reports latency from just
before each create to the moment the watcher sees it handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from app.manifests import install_crds
from controller.informer import Event, Informer
from controller.kube import KubeClient
from controller.resources import ResourceType
from objtypes import Obj
from testserver.process import ApiServerProcess

from .workload import Workload

CONCURRENCY = 64
WARM_UP = 10_000_000  # the index of the object that shows the SUT handles at all
KOPF_OPERATOR = Path(__file__).with_name("kopf_operator.py")
REPO = Path(__file__).resolve().parent.parent  # so `python -m bench.sut` imports this tree


def kopf_installed() -> bool:
    try:
        import kopf  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class RunResult:
    sut: str
    objects: int
    seconds: float
    latencies_ms: list[float]
    stats: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0  # wall clock, to compare with the SUT's busy_until
    # CPU seconds each process spent during the run: "sut", "server", "bench"
    cpu: dict[str, float] = field(default_factory=dict)

    def cpu_ms_per_object(self, process: str) -> float:
        return self.cpu.get(process, 0.0) * 1000 / max(1, self.objects)

    @property
    def per_second(self) -> float:
        return self.objects / self.seconds

    @property
    def drained_seconds(self) -> float:
        """Until every write (status and Events) was done: the SUT's own account."""
        busy_until = self.stats.get("busy_until")
        return max(self.seconds, busy_until - self.started_at) if busy_until else self.seconds

    @property
    def drained_per_second(self) -> float:
        return self.objects / self.drained_seconds

    def percentile(self, q: float) -> float:
        xs = self.latencies_ms
        return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else 0.0

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else 0.0

    @property
    def p99_ms(self) -> float:
        return self.percentile(0.99)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime


def _cpu(pids: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(cpu_seconds(pid) for pid in group) for name, group in pids.items()}


@dataclass(frozen=True)
class Target:
    """How one run's SUT and the bench reach the API server: a plain URL (the test
    server), or a kubeconfig with the server's CA and a client certificate (kube)."""

    url: str
    kubeconfig: str | None
    pids: list[int]  # the server's processes: their CPU counts as "server"

    async def connect(self, *, timeout: float = 120, pool_size: int = 32) -> KubeClient:
        if self.kubeconfig is not None:
            return await KubeClient.connect(
                None, self.kubeconfig, timeout=timeout, pool_size=pool_size
            )
        return await KubeClient.connect(self.url, timeout=timeout, pool_size=pool_size)

    def sut_args(self) -> list[str]:
        """bench.sut's server arguments."""
        return ["--kubeconfig", self.kubeconfig] if self.kubeconfig else [self.url]

    def sut_env(self) -> dict[str, str]:
        """What bench/kopf_operator.py logs in with."""
        if self.kubeconfig is not None:
            return {"KUBECONFIG": self.kubeconfig}
        return {"BENCH_SERVER": self.url}


class Server(Protocol):
    """An API server the bench runs on."""

    name: str  # in the tables

    def fresh(
        self, workload: Workload, count: int
    ) -> contextlib.AbstractAsyncContextManager[Target]:
        """The server for one run: our CRDs installed, nothing of an earlier run left."""
        ...

    async def settle(self, client: KubeClient, created: list[tuple[ResourceType, Obj]]) -> None:
        """Wait until the workload's setup objects are as a cluster would hold them."""
        ...


class FreshTestServer:
    """A fresh test API server process per run (testserver/)."""

    name = "test server"

    @contextlib.asynccontextmanager
    async def fresh(self, workload: Workload, count: int) -> AsyncIterator[Target]:
        server = await ApiServerProcess.start("--history", str(count * 8 + 1000))
        try:
            assert server.proc.pid is not None
            target = Target(server.url, None, [server.proc.pid])
            client = await target.connect()
            try:
                await install_crds(client)
            finally:
                await client.close()
            yield target
        finally:
            await server.stop()

    async def settle(self, client: KubeClient, created: list[tuple[ResourceType, Obj]]) -> None:
        """Nothing runs pods here: a pod stays as created."""


TEST_SERVER = FreshTestServer()


def namespaces_of(workload: Workload, count: int) -> list[str]:
    """Every namespace a run of `count` objects writes to (the setup's, the objects',
    the warm-up object's)."""
    objs: Iterable[Obj] = (
        *(obj for _, obj in workload.setup(count)),
        *(workload.make(i) for i in (*range(count), WARM_UP)),
    )
    return sorted({obj["metadata"]["namespace"] for obj in objs})


def _command(sut: str, target: Target, workers: int, workload: Workload) -> list[str]:
    if sut == "kopf":
        return [
            sys.executable,
            "-m",
            "kopf",
            "run",
            "--standalone",
            "--all-namespaces",
            "--quiet",
            str(KOPF_OPERATOR),
        ]
    kind, _, quiet = sut.partition("-")  # "product-quiet": the product without Events
    events = "0" if quiet else "2"
    return [
        sys.executable,
        "-m",
        "bench.sut",
        kind,
        *target.sut_args(),
        "--workers",
        str(workers),
        "--events",
        events,
        "--resource",
        workload.resource.plural,
        "--controller",
        workload.controller,
    ]


class _Sut:
    """The SUT's process; READY on its stdout (kopf: the first object handled) means it runs.
    Its stderr goes to a file, whose end an error about the SUT quotes."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: IO[bytes]) -> None:
        self.proc = proc
        self.stderr = stderr

    @classmethod
    async def start(cls, sut: str, target: Target, workers: int, workload: Workload) -> _Sut:
        env = {**os.environ, **target.sut_env()}
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 (unlinked; lives as long as the _Sut)
        proc = await asyncio.create_subprocess_exec(
            *_command(sut, target, workers, workload),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=REPO,
        )
        self = cls(proc, stderr)
        if sut != "kopf":
            assert proc.stdout is not None
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
            if line != "READY":
                await self.stop()
                raise RuntimeError(f"{sut} did not start: {line!r}{self.stderr_tail()}")
        return self

    def stderr_tail(self, chars: int = 2000) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip()
        return f"; its stderr ends:\n{text[-chars:]}" if text else ""

    async def stop(self) -> dict[str, Any]:
        stats: dict[str, Any] = {}
        if self.proc.returncode is None:
            self.proc.terminate()
        assert self.proc.stdout is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(120):
                async for raw in self.proc.stdout:
                    line = raw.decode()
                    if line.startswith("STATS "):
                        stats = json.loads(line[6:])
                await self.proc.wait()
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        return stats

    async def until_handled(self, watcher: _Watcher, name: str) -> None:
        try:
            await watcher.until(name)
        except TimeoutError as e:
            raise TimeoutError(f"{e}{self.stderr_tail()}") from None


class _Watcher:
    """When each object was first seen handled, from this process's own watch."""

    def __init__(self, client: KubeClient, workload: Workload) -> None:
        self.workload = workload
        self.handled: dict[str, float] = {}
        self.wanted = 0
        self.all_handled = asyncio.Event()
        self.informer = Informer(client, workload.resource)
        self.informer.add_handler(self._on_event)

    def _on_event(self, event: Event) -> None:
        name = event.obj["metadata"]["name"]
        if name not in self.handled and self.workload.handled(event.obj):
            self.handled[name] = time.perf_counter()
            if self.wanted and len(self.handled) >= self.wanted:
                self.all_handled.set()

    async def until(self, name: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while name not in self.handled:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} was not handled")
            await asyncio.sleep(0.01)


async def run(
    sut: str,
    workload: Workload,
    *,
    objects: int = 0,
    rate: float = 0.0,
    seconds: float = 0.0,
    workers: int = 16,
    server: Server = TEST_SERVER,
) -> RunResult:
    """A burst of `objects`, or (rate > 0) `rate` objects per second for `seconds`."""
    count = int(rate * seconds) if rate > 0 else objects
    warm = workload.make(WARM_UP)
    async with server.fresh(workload, count) as target:
        return await _run_on(target, server, sut, workload, count, rate, warm, workers)


async def _run_on(
    target: Target,
    server: Server,
    sut: str,
    workload: Workload,
    count: int,
    rate: float,
    warm: Obj,
    workers: int,
) -> RunResult:
    client = await target.connect()
    watcher_client = await target.connect()
    # The load generator shares the CPUs with the system under test: it uses the
    # product's lean client (kept-alive connections, no per-request proxy lookups).
    loader = await target.connect(pool_size=CONCURRENCY + 8)
    sut_proc: _Sut | None = None
    watch_task: asyncio.Task[None] | None = None
    try:
        setup = workload.setup(count)
        for rt, obj in setup:
            await client.create(rt, obj)
        await server.settle(client, setup)
        watcher = _Watcher(watcher_client, workload)
        watch_task = asyncio.create_task(watcher.informer.run())
        await watcher.informer.synced.wait()
        sut_proc = await _Sut.start(sut, target, workers, workload)
        # Warm up: the SUT has listed, watches and handles (and kopf has started at all).
        await client.create(workload.resource, warm)
        await sut_proc.until_handled(watcher, warm["metadata"]["name"])
        watcher.wanted = count + 1
        created: dict[str, float] = {}

        async def create(i: int) -> None:
            obj = workload.make(i)
            created[obj["metadata"]["name"]] = time.perf_counter()
            await loader.create(workload.resource, obj)

        pids = {"sut": [sut_proc.proc.pid], "server": target.pids, "bench": [os.getpid()]}
        cpu_before = _cpu(pids)
        started_at = time.time()
        start = time.perf_counter()
        if rate > 0:
            tasks = []
            for i in range(count):
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(create(i)))
            await asyncio.gather(*tasks)
        else:
            indexes = iter(range(count))

            async def load() -> None:
                for i in indexes:
                    await create(i)

            await asyncio.gather(*(load() for _ in range(CONCURRENCY)))
        await asyncio.wait_for(watcher.all_handled.wait(), timeout=max(120, count / 20))
        elapsed = time.perf_counter() - start
        cpu = {k: v - cpu_before[k] for k, v in _cpu(pids).items()}
        latencies = sorted((watcher.handled[n] - t) * 1000 for n, t in created.items())
        stats = await sut_proc.stop()
        sut_proc = None
        return RunResult(sut, count, elapsed, latencies, stats, started_at, cpu)
    finally:
        if sut_proc is not None:
            await sut_proc.stop()
        if watch_task is not None:
            watch_task.cancel()
        await loader.close()
        await client.close()
        await watcher_client.close()
