"""End to end: objects created on the test API server -> watch -> queue -> reconcile -> status.

The API server runs as its own process; the controller and the load generator share
this one. Latency is from just before an object's create request to the moment a
separate watcher sees its status written.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from app.controllers import reconcilers
from app.manifests import install_crds
from controller.informer import Event, Informer
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import MODEL
from testserver.process import ApiServerProcess

CONCURRENCY = 64


@dataclass
class PipelineResult:
    objects: int
    seconds: float
    events: int  # watch events the controller's informers handled
    reconciles: float
    p50_ms: float
    p99_ms: float
    bytes_per_object: float
    rss_per_object: float

    @property
    def objects_per_second(self) -> float:
        return self.objects / self.seconds

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds


def deep_size(value: Any, seen: set[int] | None = None) -> int:
    """Bytes held by a JSON-like value, counting shared objects once."""
    seen = seen if seen is not None else set()
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple):
        size += sum(deep_size(v, seen) for v in value)
    return size


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def model(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": f"model-{i:06d}", "namespace": f"team-{i % 20}"},
        "spec": {
            "source": f"https://models.example/qwen3-{i}.gguf",
            "format": "gguf",
            "hardware": {
                "accelerator": "cuda",
                "gpu": {"enabled": True, "vendor": "nvidia", "count": 1 + i % 4},
            },
        },
    }


async def run(objects: int, workers: int = 4) -> PipelineResult:
    server = await ApiServerProcess.start("--history", str(objects * 6 + 1000))
    client = await KubeClient.connect(server.url, timeout=120)
    observer_client = await KubeClient.connect(server.url, timeout=120)
    try:
        await install_crds(client)
        manager = Manager(
            client, ManagerConfig(http_port=None, workers=workers), reconcilers=reconcilers()
        )
        await manager.start()
        await manager.wait_synced()
        created: dict[str, float] = {}
        written: dict[str, float] = {}
        done = asyncio.Event()

        def on_status(event: Event) -> None:
            name = event.obj["metadata"]["name"]
            if name not in written and (event.obj.get("status") or {}).get("conditions"):
                written[name] = time.perf_counter()
                if len(written) == objects:
                    done.set()

        observer = Informer(observer_client, MODEL)
        observer.add_handler(on_status)
        observer_task = asyncio.create_task(observer.run())
        await observer.synced.wait()

        gc.collect()
        rss_before = rss_bytes()
        start = time.perf_counter()
        next_index = iter(range(objects))

        async def load() -> None:
            for i in next_index:
                obj = model(i)
                created[obj["metadata"]["name"]] = time.perf_counter()
                await client.create(MODEL, obj)

        await asyncio.gather(*(load() for _ in range(CONCURRENCY)))
        await asyncio.wait_for(done.wait(), timeout=max(120, objects / 50))
        seconds = time.perf_counter() - start
        await manager.wait_idle(timeout=120)
        gc.collect()
        rss_after = rss_bytes()

        store = manager.cache.informers[MODEL].store
        cached = store.list()
        latencies = sorted((written[n] - created[n]) * 1000 for n in created)
        reconciles = (
            manager.metrics.registry.get_sample_value(
                "controller_runtime_reconcile_total", {"controller": "model", "result": "success"}
            )
            or 0.0
        )
        events = sum(i.events for i in manager.cache.informers.values())
        observer_task.cancel()
        await manager.stop()
        return PipelineResult(
            objects=objects,
            seconds=seconds,
            events=events,
            reconciles=reconciles,
            p50_ms=statistics.median(latencies),
            p99_ms=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
            bytes_per_object=sum(deep_size(o) for o in cached) / len(cached),
            # Includes the observer's copy and the load generator's garbage: an upper bound.
            rss_per_object=(rss_after - rss_before) / objects,
        )
    finally:
        await client.close()
        await observer_client.close()
        await server.stop()
