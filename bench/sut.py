"""A system under test, in its own process as it would run: `python -m bench.sut KIND URL`
(the test server) or `python -m bench.sut KIND --kubeconfig PATH` (a real apiserver, TLS
and a client certificate).

KIND is `product` (the controller's Manager) or `ceiling` (bench.ceiling; for
`--resource inferenceservices`, bench.services_ceiling); with
`--events 0` neither writes Events (the product's recorder has no room: each Event is
dropped and counted), for the comparison with kopf, which writes none. It prints
READY once it watches, runs until SIGTERM, then prints one `STATS {json}` line: what it
did and the memory it holds per cached object (product only).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from app.controllers import reconcilers
from controller import logging as log_setup
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import INFERENCE_SERVICE, MODEL

from . import ceiling, services_ceiling
from .workload import deep_size, rss_bytes


def _track_busy(owner: object, method: str, stats: dict[str, Any]) -> None:
    """Record the wall-clock time a unit of work last ended (owner.method returned) as
    stats["busy_until"]. Told by the work itself, not polled: a 5 ms poll cost the
    system under test about 20 ms of CPU per second of the run, counted as its own."""
    finish: Callable[..., Any] = getattr(owner, method)

    def finished(*args: Any) -> Any:
        result = finish(*args)
        stats["busy_until"] = time.time()
        return result

    setattr(owner, method, finished)


class GcClock:
    """Time spent in the cyclic garbage collector, by generation (gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._started


async def _until_sigterm() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()


async def product(
    url: str | None,
    kubeconfig: str | None,
    workers: int,
    events: int,
    resource: str,
    controller: str,
) -> dict[str, Any]:
    client = await KubeClient.connect(url, kubeconfig, timeout=120)
    manager = Manager(
        client, ManagerConfig(http_port=None, workers=workers), reconcilers=reconcilers()
    )
    if not events:
        manager.recorder.buffer = 0
    await manager.start()
    await manager.wait_synced()
    gc.collect()
    rss_before = rss_bytes()
    stats: dict[str, Any] = {}

    # Work ends when a reconcile is done with its key or an Event writer with its Event.
    for queue in manager.queue:
        _track_busy(queue, "done", stats)
    for written in manager.recorder._queues:  # the Event writers' queues
        _track_busy(written, "task_done", stats)
    gc_clock = GcClock()
    print("READY", flush=True)
    await _until_sigterm()
    await manager.wait_idle(timeout=60)
    stats["gc_seconds"] = gc_clock.seconds
    gc.collect()
    rss = rss_bytes() - rss_before
    rt = next(rt for rt in manager.cache.informers if rt.plural == resource)
    cached = manager.cache.informers[rt].store.list()
    n = max(1, len(cached))
    memo = manager.reconcilers[controller].ctx.status._written  # type: ignore[attr-defined]
    sample = manager.metrics.registry.get_sample_value

    def metric(name: str, **labels: str) -> float:
        return sample(name, labels) or 0.0

    stats |= {
        "objects": len(cached),
        # Every reconcile, whatever its result: one that asked to be requeued counts too.
        "reconciles": sum(
            metric("controller_runtime_reconcile_total", controller=controller, result=r)
            for r in ("success", "requeue_after", "error")
        ),
        "events_written": metric("llmkube_events_written_total", action="create")
        + metric("llmkube_events_written_total", action="patch"),
        "events_dropped": sum(
            metric("llmkube_events_dropped_total", reason=r)
            for r in ("buffer_full", "spam", "write_error")
        ),
        # What the cache holds: a string or value shared by many objects counts once.
        "cache_bytes_per_object": deep_size(cached) / n,
        "memo_bytes_per_object": deep_size(memo) / n,
        "rss_bytes_per_object": rss / n,
    }
    await manager.stop()
    await client.close()
    return stats


async def run_ceiling(
    url: str | None, kubeconfig: str | None, workers: int, events: int, resource: str
) -> dict[str, Any]:
    """bench.ceiling for Models, bench.services_ceiling for InferenceServices."""
    ready, busy = asyncio.Event(), ceiling.Busy()
    stats: dict[str, Any] = {}
    server = await ceiling.connection(url, kubeconfig)
    loop = services_ceiling.run if resource == INFERENCE_SERVICE.plural else ceiling.run
    task = asyncio.create_task(loop(server, workers, events, ready, busy))
    await ready.wait()
    print("READY", flush=True)
    await _until_sigterm()
    for _ in range(6000):  # its queued Events, for up to a minute
        if busy.idle:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    if busy.until:
        stats["busy_until"] = busy.until
    return stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["product", "ceiling"])
    parser.add_argument("url", nargs="?", help="the test server's plain http:// URL")
    parser.add_argument("--kubeconfig", help="instead of URL: server, CA, client certificate")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--events", type=int, default=2, help="Events per object; 0: none")
    parser.add_argument("--resource", default=MODEL.plural, help="the objects created")
    parser.add_argument("--controller", default="model", help="their reconciler")
    args = parser.parse_args()
    if (args.url is None) == (args.kubeconfig is None):
        parser.error("give the URL or --kubeconfig")
    log_setup.configure("error")
    profile = cProfile.Profile() if os.environ.get("BENCH_PROFILE") else None
    if profile is not None:  # BENCH_PROFILE=dir: a pstats file per SUT process
        profile.enable()
    if args.kind == "product":
        stats = asyncio.run(
            product(
                args.url,
                args.kubeconfig,
                args.workers,
                args.events,
                args.resource,
                args.controller,
            )
        )
    else:
        stats = asyncio.run(
            run_ceiling(args.url, args.kubeconfig, args.workers, args.events, args.resource)
        )
    if profile is not None:
        profile.disable()
        profile.dump_stats(f"{os.environ['BENCH_PROFILE']}/{args.kind}-{os.getpid()}.pstats")
    print("STATS " + json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
