"""LLMKube's domain gauges, computed at scrape time from the controller's cache, and the
workqueue series as upstream kubebuilder dashboards query them."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from app.cli import manager_for as cli_manager_for
from app.cli import parse
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE
from metrics import ControllerMetrics
from metrics.domain import DomainCollector, DomainObjects

from .conftest import eventually, isvc_yaml, model_yaml

CONTROLLERS = {"model", "inferenceservice", "gpuquota"}
Samples = list[tuple[str, dict[str, str], float]]


def isvc(name: str, phase: str | None = None, **status: Any) -> dict[str, Any]:
    if phase:
        status["phase"] = phase
    return {
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"modelRef": "m", "runtime": "vllm"},
        "status": status,
    }


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(v for _, v in sorted(s.labels.items())): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == name
    }


def test_gauges_follow_the_objects_at_each_scrape() -> None:
    registry = CollectorRegistry()
    collector = DomainCollector(registry)
    model = {
        "metadata": {"name": "m", "namespace": "team-a"},
        "spec": {"hardware": {"accelerator": "cuda"}},
        "status": {"phase": "Ready"},
    }
    quota = {
        "metadata": {"name": "gpus", "namespace": "team-a"},
        "spec": {"gpuCount": 4},
        "status": {"usedGPUCount": 3},
    }
    h100 = {"driver": "gpu.nvidia.com", "productName": "NVIDIA H100 80GB HBM3"}
    allocation = {
        "expectedDevices": 4,
        "allocatedDevices": 3,
        "allocatedPods": 1,
        "pods": [
            {"name": "big-0", "devices": [h100, h100, {"driver": "gpu.example.com"}]},
            {"name": "big-1", "devices": []},
        ],
    }
    objects = DomainObjects(
        models=[model],
        services=[
            isvc("chat", "Ready", readyReplicas=1, desiredReplicas=1),
            isvc("big", "WaitingForGPU", desiredReplicas=2, allocation=allocation),
            isvc("new"),  # no status yet
        ],
        quotas=[quota, {"metadata": {"name": "fresh", "namespace": "team-b"}, "spec": {}}],
    )
    collector.bind(lambda: objects)

    assert samples(registry, "llmkube_gpuquota_used_gpus") == {
        ("gpus", "team-a"): 3,
        ("fresh", "team-b"): 0,  # before its first status: present, at zero
    }
    # The old name, deprecated for one release, carries the same samples.
    assert samples(registry, "llmkube_gpuquota_used_gpu_count") == samples(
        registry, "llmkube_gpuquota_used_gpus"
    )
    assert samples(registry, "llmkube_gpuquota_gpu_count_limit") == {
        ("gpus", "team-a"): 4,
        ("fresh", "team-b"): 0,
    }
    assert samples(registry, "llmkube_inferenceservice_phase") == {
        ("chat", "team-a", "Ready"): 1,
        ("big", "team-a", "WaitingForGPU"): 1,
    }
    assert samples(registry, "llmkube_inferenceservice_devices") == {
        ("big", "team-a", "allocated"): 3,
        ("big", "team-a", "expected"): 4,
    }
    # The product name its ResourceSlice gives each allocated device.
    assert samples(registry, "llmkube_inferenceservice_device_products") == {
        ("big", "team-a", "NVIDIA H100 80GB HBM3"): 2,
        ("big", "team-a", "unknown"): 1,
    }
    replicas = samples(registry, "llmkube_inferenceservice_replicas")
    assert replicas[("big", "team-a", "desired")] == 2 and replicas[("new", "team-a", "ready")] == 0
    assert samples(registry, "llmkube_gpu_queue_depth") == {("team-a",): 1}
    info = samples(registry, "llmkube_inferenceservice_info")
    assert info[("cuda", "chat", "team-a", "vllm")] == 1
    assert samples(registry, "llmkube_model_status") == {("m", "team-a", "Ready"): 1}

    # A phase change leaves one phase; a deleted object leaves no series.
    objects.services = [isvc("chat", "Progressing")]
    objects.quotas = []
    assert samples(registry, "llmkube_inferenceservice_phase") == {
        ("chat", "team-a", "Progressing"): 1
    }
    assert samples(registry, "llmkube_gpuquota_used_gpus") == {}
    assert samples(registry, "llmkube_gpuquota_used_gpu_count") == {}
    assert samples(registry, "llmkube_inferenceservice_devices") == {}
    assert samples(registry, "llmkube_inferenceservice_device_products") == {}
    assert samples(registry, "llmkube_gpu_queue_depth") == {("team-a",): 0}


def test_malformed_status_counts_zero_and_unbound_families_are_exported() -> None:
    registry = CollectorRegistry()
    collector = DomainCollector(registry)
    names = {f.name for f in registry.collect()}
    assert {"llmkube_gpuquota_used_gpus", "llmkube_inferenceservice_phase"} <= names
    bad = isvc("x", "Ready", readyReplicas="3", allocation={"allocatedDevices": True})
    collector.bind(lambda: DomainObjects(services=[bad]))
    assert samples(registry, "llmkube_inferenceservice_replicas")[("x", "team-a", "ready")] == 0
    assert samples(registry, "llmkube_inferenceservice_devices")[("x", "team-a", "allocated")] == 0


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


def test_controller_metrics_carry_the_domain_collector() -> None:
    metrics = ControllerMetrics()
    assert isinstance(metrics.domain, DomainCollector)
    names = {f.name for f in metrics.registry.collect()}
    assert "llmkube_gpuquota_gpu_count_limit" in names


def test_the_deprecated_quota_gauge_says_so_in_its_help() -> None:
    families = {f.name: f for f in ControllerMetrics().registry.collect()}
    old = families["llmkube_gpuquota_used_gpu_count"].documentation
    assert old.startswith("Deprecated: renamed llmkube_gpuquota_used_gpus")
    assert "Deprecated" not in families["llmkube_gpuquota_used_gpus"].documentation
