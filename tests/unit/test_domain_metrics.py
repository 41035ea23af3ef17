"""LLMKube's domain gauges, computed at scrape time from the controller's cache, and the
workqueue series as upstream kubebuilder dashboards query them.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_domain_metrics.py.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from metrics import ControllerMetrics
from metrics.domain import DomainCollector, DomainObjects


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
