"""A simulated CPU cluster with the controller running and the model cache configured."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import MODEL, POD
from objtypes import Obj
from reconcilers.settings import CacheSettings
from testserver.process import ApiServerProcess

from .dra_cluster import dra_cluster
from .waiting import eventually


@asynccontextmanager
async def cluster_with_cache(
    cache: CacheSettings | None = None,
) -> AsyncIterator[tuple[KubeClient, Manager, ApiServerProcess]]:
    settings = cache if cache is not None else CacheSettings(enabled=True)
    async with dra_cluster(gpus=0, plugin=0, model_cache=settings) as cluster:
        yield cluster


async def model_phase(kube: KubeClient, name: str, phase: str) -> Obj:
    async def probe() -> Obj | None:
        m = await kube.get(MODEL, "default", name)
        return m if m and (m.get("status") or {}).get("phase") == phase else None

    return await eventually(probe, timeout=20, what=f"Model {name} phase {phase}")


async def loader_reports(kube: KubeClient, service: str, count: int) -> list[Obj]:
    """The termination messages of the loaders of `count` pods of the service."""

    async def probe() -> list[Obj] | None:
        pods, _ = await kube.list(POD, "default")
        found = []
        for p in pods:
            if p["metadata"]["labels"].get("inference.llmkube.dev/inferenceservice") != service:
                continue
            for s in (p.get("status") or {}).get("initContainerStatuses") or []:
                term = (s.get("state") or {}).get("terminated")
                if s["name"] == "model-loader" and term:
                    found.append(json.loads(term["message"]))
        return found if len(found) == count else None

    return await eventually(probe, timeout=20, what=f"{count} loader reports of {service}")
