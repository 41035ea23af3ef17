"""LLMKube's domain gauges, computed at scrape time from the controller's cache, and the
workqueue series as upstream kubebuilder dashboards query them.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_domain_metrics.py.
"""

from __future__ import annotations

from collections import defaultdict

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from app.cli import manager_for as cli_manager_for
from app.cli import parse
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE
from tests.support.manifests import isvc_yaml, model_yaml
from tests.support.waiting import eventually

CONTROLLERS = {"model", "inferenceservice", "gpuquota"}
Samples = list[tuple[str, dict[str, str], float]]


async def scrape(manager: Manager) -> Samples:
    url = f"http://127.0.0.1:{manager.http_port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200
        text = await response.text()
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def series(scraped: Samples, name: str, **match: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(labels[k] for k in sorted(labels) if k not in match): value
        for n, labels, value in scraped
        if n == name and all(labels.get(k) == v for k, v in match.items())
    }


async def test_metrics_endpoint_serves_the_gauges_from_the_cache(kube: KubeClient) -> None:
    # The controller as `llmkube-controller run` builds it: probes and /metrics together.
    address = "--health-probe-bind-address=127.0.0.1:0"
    manager = cli_manager_for(kube, parse([address, "--metrics-bind-address=127.0.0.1:0"]))
    await manager.start()
    try:
        await manager.wait_synced()
        await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
        await apply_text(kube, isvc_yaml("chat", "m"))
        quota = "apiVersion: inference.llmkube.dev/v1alpha1\nkind: GPUQuota\n"
        quota += "metadata: {name: q}\nspec: {gpuCount: 3, namespaceRef: default}\n"
        await apply_text(kube, quota)

        async def quota_counted() -> bool:
            q = await kube.get(GPU_QUOTA, "default", "q")
            return bool((q or {}).get("status", {}).get("usedGPUCount") == 1)

        await eventually(quota_counted, what="GPUQuota usedGPUCount 1")
        await manager.wait_idle()
        scraped = await scrape(manager)
        assert series(scraped, "llmkube_gpuquota_gpu_count_limit") == {("q", "default"): 3}
        assert series(scraped, "llmkube_gpuquota_used_gpus") == {("q", "default"): 1}
        assert series(scraped, "llmkube_gpuquota_used_gpu_count") == {("q", "default"): 1}
        live = await kube.get(INFERENCE_SERVICE, "default", "chat")
        phase = live["status"]["phase"]  # type: ignore[index]
        assert series(scraped, "llmkube_inferenceservice_phase") == {("chat", "default", phase): 1}

        await kube.delete(INFERENCE_SERVICE, "default", "chat")

        async def gone() -> bool:
            return not series(await scrape(manager), "llmkube_inferenceservice_phase")

        await eventually(gone, what="the deleted service's phase series gone")
    finally:
        await manager.stop()


async def test_kubebuilder_dashboard_workqueue_queries_give_one_series_per_controller(
    kube: KubeClient, controller: Manager
) -> None:
    """The queries of kubebuilder's grafana/controller-runtime-metrics.json, evaluated on
    a scrape of /metrics: each groups by `name` and must show the three controllers."""
    await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await controller.wait_idle()
    scraped = await scrape(controller)
    # workqueue_depth{...}: the raw series, legend {{name}}.
    depth = [labels for n, labels, _ in scraped if n == "workqueue_depth"]
    assert sorted(d["name"] for d in depth) == sorted(CONTROLLERS)
    # sum(rate(X{...}[5m])) by (instance, name), and histograms by (instance, name, le).
    for metric, by in [
        ("workqueue_adds_total", ("name",)),
        ("workqueue_retries_total", ("name",)),
        ("workqueue_unfinished_work_seconds", ("name",)),
        ("workqueue_longest_running_processor_seconds", ("name",)),
        ("workqueue_queue_duration_seconds_bucket", ("name", "le")),
        ("workqueue_work_duration_seconds_bucket", ("name", "le")),
    ]:
        groups: dict[tuple[str, ...], int] = defaultdict(int)
        for n, labels, _ in scraped:
            if n == metric:
                groups[tuple(labels[k] for k in by)] += 1
        names = {g[0] for g in groups}
        assert names == CONTROLLERS, (metric, names)
    # The model controller did work, and its queue counts it under its own name.
    adds = series(scraped, "workqueue_adds_total")
    assert adds[("model", "model")] >= 1 and ("llmkube", "llmkube") not in adds
