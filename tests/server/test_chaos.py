"""Chaos: a few hundred services churned through every fault we know, then checked.

The controller runs as a real process (`llmkube-controller run --server ...`) against
the test API server. While services are created, scaled and deleted, the server
answers 500s, 503s and 429s with Retry-After, cuts watch streams, compacts its history
(410 Gone), the controller is killed with SIGKILL and started again, and finally the
API server itself restarts empty (resourceVersions start over) and the objects are
restored, as from a backup. Then every service that should exist does, its status has
observed its latest generation, its Deployment and Service match its spec, and no
Deployment or Service is left without its service.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.manifests import install_crds
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, MODEL, SERVICE
from objtypes import Obj
from reconcilers.ownership import SERVICE_LABEL
from testserver.process import ApiServerProcess

NS = "default"
SERVICES = int(os.environ.get("LLMKUBE_CHAOS_SERVICES", "300"))
MODELS = 5
CONTROLLER_AGENT = "llmkube-controller"


def model(i: int) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": f"m{i}", "namespace": NS},
        "spec": {
            "source": "https://example.invalid/tiny.gguf",
            "format": "gguf",
            "hardware": {"accelerator": "cpu"},
        },
    }


def service(name: str, replicas: int) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "modelRef": f"m{int(name[1:]) % MODELS}",
            "runtime": "llamacpp",
            "replicas": replicas,
        },
    }


class Controller:
    """The controller as a process; kill() is SIGKILL: no lease release, no cleanup."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self) -> None:
        self.starts += 1
        out = self.log.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from app.cli import main; main()",
            "run",
            "--server",
            self.url,
            "--http-port",
            "0",
            "--workers",
            "8",
            "--identity",
            f"chaos-{self.starts}",
            "--log-level",
            "warning",
            stdout=out,
            stderr=out,
        )
        out.close()

    async def kill(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def retrying(call: Any, *args: Any) -> Any:
    """The test's own writes, retried through the chaos (they are not under test)."""
    for attempt in range(100):
        try:
            return await call(*args)
        except ApiError as e:
            if e.status in (404, 409) and attempt > 0:
                return None  # done by an earlier try that lost its answer
            if e.status in (404, 409):
                raise
        except (OSError, TimeoutError):
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{call.__name__}{args[1:]} kept failing")


async def apply(kube: KubeClient, desired: dict[str, int]) -> None:
    """Create or scale every service in desired, 25 at a time."""

    async def one(name: str, replicas: int) -> None:
        live = await retrying(kube.get, INFERENCE_SERVICE, NS, name)
        if live is None:
            try:
                await retrying(kube.create, INFERENCE_SERVICE, service(name, replicas))
            except ApiError as e:
                if e.status != 409:
                    raise
        elif live["spec"].get("replicas") != replicas:
            patch = {"spec": {"replicas": replicas}}
            await retrying(kube.patch, INFERENCE_SERVICE, NS, name, patch)

    names = list(desired)
    for i in range(0, len(names), 25):
        await asyncio.gather(*(one(n, desired[n]) for n in names[i : i + 25]))


async def problems(kube: KubeClient, desired: dict[str, int]) -> list[str]:
    """What still differs from the desired state (empty when converged)."""
    services, _ = await kube.list(INFERENCE_SERVICE, NS)
    deployments, _ = await kube.list(DEPLOYMENT, NS, label_selector=SERVICE_LABEL)
    svcs, _ = await kube.list(SERVICE, NS, label_selector=SERVICE_LABEL)
    found: list[str] = []
    by_name = {s["metadata"]["name"]: s for s in services}
    deploy_of = {d["metadata"]["labels"][SERVICE_LABEL]: d for d in deployments}
    svc_of = {s["metadata"]["labels"][SERVICE_LABEL]: s for s in svcs}
    for name, replicas in desired.items():
        isvc = by_name.get(name)
        if isvc is None:
            found.append(f"{name}: lost")
            continue
        status = isvc.get("status") or {}
        if status.get("observedGeneration") != isvc["metadata"].get("generation"):
            found.append(f"{name}: status not observed")
        d = deploy_of.get(name)
        if d is None or d["spec"].get("replicas") != replicas:
            found.append(f"{name}: deployment {d and d['spec'].get('replicas')} != {replicas}")
        if name not in svc_of:
            found.append(f"{name}: no Service")
    for name in (set(deploy_of) | set(svc_of)) - set(desired):
        found.append(f"{name}: orphaned workload")
    for name in set(by_name) - set(desired):
        found.append(f"{name}: should have been deleted")
    return found


async def converge(kube: KubeClient, desired: dict[str, int], timeout: float) -> float:
    started = time.monotonic()
    last: list[str] = []
    while time.monotonic() - started < timeout:
        try:
            last = await problems(kube, desired)
        except (ApiError, OSError, TimeoutError) as e:
            last = [repr(e)]
        if not last:
            return time.monotonic() - started
        await asyncio.sleep(0.5)
    raise AssertionError(f"{len(last)} problems after {timeout} s, e.g. {last[:8]}")


async def inject_faults(server: ApiServerProcess) -> None:
    """Faults for the controller's requests only (the test's own client is spared)."""
    agent = CONTROLLER_AGENT
    # Owned objects are created and updated by server-side apply (PATCH).
    await server.fault(path="/deployments/", method="PATCH", status=500, times=60, agent=agent)
    await server.fault(path="/status$", status=503, retry_after=1, times=30, agent=agent)
    await server.fault(path="/services/", method="PATCH", status=429, retry_after=1, times=30)
    await server.fault(watch=True, cut_after=40, times=12, agent=agent)


@pytest.fixture
async def chaos_server() -> AsyncIterator[ApiServerProcess]:
    server = await ApiServerProcess.start("--bookmark-interval", "0.5", "--history", "2000")
    yield server
    await server.stop()


async def setup_cluster(kube: KubeClient) -> None:
    await install_crds(kube)
    for i in range(MODELS):
        await retrying(kube.create, MODEL, model(i))


async def test_chaos_converges_and_loses_nothing(
    chaos_server: ApiServerProcess, tmp_path: Path
) -> None:
    rng = random.Random(10)
    kube = await KubeClient.connect(chaos_server.url, user_agent="chaos-test", timeout=10)
    controller = Controller(chaos_server.url, tmp_path / "controller.log")
    figures: dict[str, float] = {}
    began = time.monotonic()
    try:
        await setup_cluster(kube)
        await inject_faults(chaos_server)
        await controller.start()
        desired = {f"s{i}": 1 for i in range(SERVICES)}
        await apply(kube, desired)

        # Churn: scale a third, delete a tenth, all while the faults fire.
        for name in rng.sample(sorted(desired), SERVICES // 3):
            desired[name] = rng.randint(0, 3)
        await apply(kube, desired)
        for name in rng.sample(sorted(desired), SERVICES // 10):
            del desired[name]
            await retrying(kube.delete, INFERENCE_SERVICE, NS, name)

        # History compacted under open watches: every watch ends with 410 Gone.
        await chaos_server.control("POST", "expire-watches")

        # SIGKILL mid-work; changes land while no controller runs; a new one starts.
        await asyncio.sleep(rng.uniform(0.5, 1.5))
        await controller.kill()
        for name in rng.sample(sorted(desired), SERVICES // 10):
            desired[name] = rng.randint(0, 3)
        for i in range(SERVICES, SERVICES + 20):
            desired[f"s{i}"] = 1
        await apply(kube, desired)
        await controller.start()
        figures["converge_after_kill_s"] = await converge(kube, desired, timeout=90)

        # The API server restarts empty; the objects are restored from "backup" while
        # the controller reconnects; a few services are no longer wanted.
        await chaos_server.restart_empty()
        await setup_cluster(kube)
        await inject_faults(chaos_server)
        for name in rng.sample(sorted(desired), 10):
            del desired[name]
        await apply(kube, desired)
        figures["converge_after_restart_s"] = await converge(kube, desired, timeout=90)
        figures["services"] = len(desired)
    except BaseException:
        log = (tmp_path / "controller.log").read_text(errors="replace")
        print("controller log tail:\n" + "\n".join(log.splitlines()[-40:]))
        raise
    finally:
        await controller.kill()
        await kube.close()
    figures["total_s"] = time.monotonic() - began
    print("chaos figures:", {k: round(v, 1) for k, v in figures.items()})
