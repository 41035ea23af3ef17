"""Probes, Prometheus metrics under controller-runtime's names, retries, and log lines."""

from __future__ import annotations

import io
import json

import aiohttp

from app.manifests import apply_text
from controller import logging as log_setup
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import MODEL
from testserver.process import ApiServerProcess

from .conftest import eventually, manager_for, model_yaml, wait_condition

PLUGIN = "      enabled: true\n      count: 1"


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.text()


async def test_readyz_waits_for_caches_and_healthz_answers(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    await apiserver.fault(path="/models$", method="GET", status=500, times=-1)
    manager = manager_for(kube)
    await manager.start()
    try:
        base = f"http://127.0.0.1:{manager.http_port}"
        assert (await get(f"{base}/healthz"))[0] == 200
        status, body = await get(f"{base}/readyz")
        assert status == 503 and "not synced" in body
        await apiserver.control("DELETE", "faults")

        async def ready() -> bool:
            return (await get(f"{base}/readyz"))[0] == 200

        await eventually(ready, timeout=15, what="readyz 200")
    finally:
        await manager.stop()


async def test_metrics_use_controller_runtime_names(kube: KubeClient, controller: Manager) -> None:
    await apply_text(kube, model_yaml("m", PLUGIN))
    await wait_condition(kube, MODEL, "m", "AcceleratorReady", "True")
    await controller.wait_idle()
    status, text = await get(f"http://127.0.0.1:{controller.http_port}/metrics")
    assert status == 200
    for line in (
        'workqueue_depth{controller="model",name="llmkube"} 0.0',
        'workqueue_adds_total{controller="model",name="llmkube"}',
        'workqueue_queue_duration_seconds_bucket{controller="model",le="1e-08",name="llmkube"}',
        'workqueue_work_duration_seconds_count{controller="model",name="llmkube"}',
        'workqueue_unfinished_work_seconds{controller="model",name="llmkube"}',
        'workqueue_longest_running_processor_seconds{controller="model",name="llmkube"}',
        'controller_runtime_reconcile_total{controller="model",result="success"}',
        'controller_runtime_reconcile_time_seconds_bucket{controller="model",le="0.005"}',
        'controller_runtime_max_concurrent_reconciles{controller="model"} 2.0',
        'controller_runtime_active_workers{controller="model"} 0.0',
    ):
        assert line in text, line


async def test_api_errors_are_retried_with_backoff_and_counted(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    stream = io.StringIO()
    log_setup.configure("info", stream=stream)
    # The first three status writes fail: the reconcile errors, retries, then succeeds.
    await apiserver.fault(path="/models/m/status$", method="PATCH", status=500, times=3)
    manager = manager_for(kube)
    await manager.start()
    try:
        await manager.wait_synced()
        await apply_text(kube, model_yaml("m", PLUGIN))
        await wait_condition(kube, MODEL, "m", "AcceleratorReady", "True")
        registry = manager.metrics.registry

        def value(metric: str, **labels: str) -> float:
            return registry.get_sample_value(metric, labels) or 0.0

        assert value("controller_runtime_reconcile_errors_total", controller="model") == 3
        assert value("controller_runtime_reconcile_total", controller="model", result="error") == 3
        assert value("workqueue_retries_total", controller="model", name="llmkube") == 3
        assert value("controller_runtime_reconcile_panics_total", controller="model") == 0
    finally:
        await manager.stop()
        log_setup.configure("warning")
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    retries = [line for line in lines if line["event"] == "reconcile failed, retrying"]
    assert len(retries) == 3
    for line in retries:
        assert (line["controller"], line["namespace"], line["name"]) == ("model", "default", "m")
        assert line["level"] == "warning" and "500" in line["error"]
    assert [r["retries"] for r in retries] == [0, 1, 2]
