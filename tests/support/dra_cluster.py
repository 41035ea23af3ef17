"""A simulated DRA-only cluster (test server process) with the controller running on it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from api.source import HF_ENDPOINT
from app.controllers import reconcilers
from app.manifests import EXAMPLES, install_crds
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE
from objtypes import Obj
from reconcilers.devices.kueue import KueueSettings
from reconcilers.settings import CacheSettings, Settings
from testserver.process import ApiServerProcess

from .waiting import eventually


@asynccontextmanager
async def dra_cluster(
    gpus: int = 4,
    plugin: int = 0,
    kueue: dict[str, str] | None = None,
    model_cache: CacheSettings | None = None,
    hf_endpoint: str = HF_ENDPOINT,
    managed_claims: bool = True,
) -> AsyncIterator[tuple[KubeClient, Manager, ApiServerProcess]]:
    server = await ApiServerProcess.start("--simulate-cluster", f"dra={gpus},plugin={plugin}")
    client = await KubeClient.connect(server.url)
    await install_crds(client)
    config = ManagerConfig(http_port=None, workers=2, watch_timeout=30)
    settings = Settings(
        model_cache=model_cache or CacheSettings(),
        kueue=KueueSettings(kueue or {}),
        hf_endpoint=hf_endpoint,
        managed_claims=managed_claims,
    )
    manager = Manager(client, config, reconcilers=reconcilers(settings))
    await manager.start()
    try:
        await manager.wait_synced()
        yield client, manager, server
    finally:
        await manager.stop()
        await client.close()
        await server.stop()


def without_count(example: str) -> str:
    """A seed example with the Model's `count` removed (the template's stays)."""
    text = (EXAMPLES / example).read_text()
    return re.sub(r"^      count: \d+\n", "", text, flags=re.M)


async def deployment(kube: KubeClient, name: str) -> Obj:
    async def probe() -> Obj | None:
        return await kube.get(DEPLOYMENT, "default", name)

    return await eventually(probe, what=f"Deployment {name}")


def args_of(dep: Obj) -> list[str]:
    args: list[str] = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


async def allocation(kube: KubeClient, name: str, summary: str, timeout: float = 15.0) -> Obj:
    """Wait until status.allocation.summary of the service reads `summary`."""

    async def probe() -> Obj | None:
        isvc = await kube.get(INFERENCE_SERVICE, "default", name)
        found: Obj | None = ((isvc or {}).get("status") or {}).get("allocation")
        return found if found and found.get("summary") == summary else None

    return await eventually(probe, timeout, what=f"{name} allocation {summary}")
