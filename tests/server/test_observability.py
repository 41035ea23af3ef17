"""Probes, Prometheus metrics under controller-runtime's names, retries, and log lines."""

from __future__ import annotations

import asyncio
import io
import json

import aiohttp
import pytest

from app.manifests import apply_text
from controller import logging as log_setup
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.reconcile import Request, Result, TerminalError, Watch
from controller.resources import MODEL
from tests.support.manager import manager_for
from tests.support.manifests import model_yaml
from tests.support.waiting import eventually, wait_condition
from testserver.process import ApiServerProcess

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
        'workqueue_depth{controller="model",name="model"} 0.0',
        'workqueue_adds_total{controller="model",name="model"}',
        'workqueue_queue_duration_seconds_bucket{controller="model",le="1e-08",name="model"}',
        'workqueue_work_duration_seconds_count{controller="model",name="model"}',
        'workqueue_unfinished_work_seconds{controller="model",name="model"}',
        'workqueue_longest_running_processor_seconds{controller="model",name="model"}',
        'controller_runtime_reconcile_total{controller="model",result="success"}',
        'controller_runtime_reconcile_time_seconds_bucket{controller="model",le="0.005"}',
        'controller_runtime_max_concurrent_reconciles{controller="model"} 2.0',
        'controller_runtime_active_workers{controller="model"} 0.0',
    ):
        assert line in text, line


async def test_leader_status_without_leader_election_is_1_while_the_workers_run(
    kube: KubeClient,
) -> None:
    # The chart's default (one replica, no election): the Leader panel and the
    # LLMKubeLeaderAbsent alert read this series.
    manager = manager_for(kube)
    lease = {"name": "llmkube-controller"}

    def status() -> float | None:
        return manager.metrics.registry.get_sample_value("leader_election_master_status", lease)

    assert status() == 0  # present from the start: not reconciling yet
    await manager.start()
    try:
        await eventually(lambda: asyncio.sleep(0, manager._workers), what="workers running")
        assert status() == 1
    finally:
        await manager.stop()
    assert status() == 0


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
        assert value("workqueue_retries_total", controller="model", name="model") == 3
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


async def test_workqueue_series_are_one_per_controller_and_pre_initialised(
    kube: KubeClient, controller: Manager
) -> None:
    # Upstream kubebuilder dashboards group workqueue_* by `name`: one series per controller,
    # present at zero before the first event (as controller-runtime creates them at start).
    registry = controller.metrics.registry
    for name in ("model", "inferenceservice", "gpuquota"):
        labels = {"name": name, "controller": name}
        assert registry.get_sample_value("workqueue_depth", labels) is not None, name
        for result in ("error", "requeue", "requeue_after", "success"):
            labels = {"controller": name, "result": result}
            assert registry.get_sample_value("controller_runtime_reconcile_total", labels) == 0
        for counter in (
            "controller_runtime_reconcile_errors_total",
            "controller_runtime_terminal_reconcile_errors_total",
            "controller_runtime_reconcile_timeouts_total",
            "controller_runtime_reconcile_panics_total",
        ):
            assert registry.get_sample_value(counter, {"controller": name}) == 0, counter
    names = {
        s.labels["name"]
        for metric in registry.collect()
        if metric.name == "workqueue_adds"
        for s in metric.samples
    }
    assert names == {"model", "inferenceservice", "gpuquota"}
    # Each informer's error and restart counters too, so increase() sees the first one.
    for informer in controller.cache.informers:
        for counter in (
            "llmkube_informer_handler_errors_total",
            "llmkube_informer_decode_errors_total",
            "llmkube_informer_restarts_total",
        ):
            labels = {"resource": informer.plural}
            assert registry.get_sample_value(counter, labels) == 0, (counter, labels)


async def test_metrics_endpoint_has_process_collectors_and_speaks_openmetrics(
    controller: Manager,
) -> None:
    url = f"http://127.0.0.1:{controller.http_port}/metrics"
    status, text = await get(url)
    assert status == 200
    for family in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"):
        assert f"\n{family}" in text, family
    assert "python_gc_collections_total" in text
    headers = {"Accept": "application/openmetrics-text; version=1.0.0"}
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        assert (await r.text()).endswith("# EOF\n")


class _Failing:
    """A reconciler whose reconcile fails in the way it is told to."""

    name = "failing"
    primary = MODEL

    def __init__(self, error: str) -> None:
        self.error = error

    def watches(self) -> list[Watch]:
        return []

    async def reconcile(self, request: Request) -> Result:
        if self.error == "terminal":
            raise TerminalError("spec can never work")
        await asyncio.sleep(10)  # longer than the manager's reconcile timeout
        return Result()


async def test_terminal_errors_are_counted_and_not_requeued(kube: KubeClient) -> None:
    manager = Manager(
        kube,
        ManagerConfig(http_port=None, workers=1),
        reconcilers=lambda *_: [_Failing("terminal")],
    )
    request = Request("failing", "default", "x")
    await manager.process(request)
    registry = manager.metrics.registry
    labels = {"controller": "failing"}
    assert registry.get_sample_value("controller_runtime_terminal_reconcile_errors_total", labels)
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", labels) == 1
    assert manager.queue.waiting == 0 and len(manager.queue) == 0  # not retried
    assert registry.get_sample_value("controller_runtime_reconcile_timeouts_total", labels) == 0


async def test_reconcile_timeouts_are_counted_and_retried(kube: KubeClient) -> None:
    manager = Manager(
        kube,
        ManagerConfig(http_port=None, workers=1, reconcile_timeout=0.05),
        reconcilers=lambda *_: [_Failing("slow")],
    )
    request = Request("failing", "default", "x")
    await manager.process(request)
    registry = manager.metrics.registry
    labels = {"controller": "failing"}
    assert registry.get_sample_value("controller_runtime_reconcile_timeouts_total", labels) == 1
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", labels) == 1
    assert manager.queue.waiting == 1  # rate-limited retry
    manager.queue.shutdown()


class _WritesMissing:
    """A reconciler whose write answers 404: the status of its own Model, which the server
    does not hold (as after a delete the cache has not seen yet), or of another one; or
    a subresource the Model's CRD does not serve (the 404 names the Model, which exists)."""

    name = "writes-missing"
    primary = MODEL

    def __init__(self, kube: KubeClient, target: str) -> None:
        self.kube = kube
        self.target = target

    def watches(self) -> list[Watch]:
        return []

    async def reconcile(self, request: Request) -> Result:
        name = "other" if self.target == "other" else request.name
        sub = "scale" if self.target == "unserved" else "status"
        await self.kube.patch(MODEL, "default", name, {"status": {}}, subresource=sub)
        return Result()


async def test_a_404_about_the_reconciled_object_ends_the_reconcile_without_retry(
    kube: KubeClient,
) -> None:
    stream = io.StringIO()
    log_setup.configure("info", stream=stream)
    try:
        manager = Manager(
            kube,
            ManagerConfig(http_port=None, workers=1),
            reconcilers=lambda *_: [_WritesMissing(kube, "own")],
        )
        await manager.process(Request("writes-missing", "default", "deleted"))
    finally:
        log_setup.configure("warning")
    registry = manager.metrics.registry
    labels = {"controller": "writes-missing"}
    assert registry.get_sample_value("controller_runtime_reconcile_errors_total", labels) == 0
    success = {**labels, "result": "success"}
    assert registry.get_sample_value("controller_runtime_reconcile_total", success) == 1
    assert manager.queue.waiting == 0 and len(manager.queue) == 0  # not retried
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("object gone during reconcile, not retrying", "info")
    ]
    assert '"deleted" not found' in lines[0]["error"]


@pytest.mark.parametrize("target", ["other", "unserved"])
async def test_a_404_about_another_or_an_existing_object_is_retried(
    kube: KubeClient, target: str
) -> None:
    await apply_text(kube, model_yaml("m", PLUGIN))
    manager = Manager(
        kube,
        ManagerConfig(http_port=None, workers=1),
        reconcilers=lambda *_: [_WritesMissing(kube, target)],
    )
    await manager.process(Request("writes-missing", "default", "m"))
    labels = {"controller": "writes-missing"}
    errors = manager.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_errors_total", labels
    )
    assert errors == 1
    assert manager.queue.waiting == 1  # rate-limited retry
    manager.queue.shutdown()
