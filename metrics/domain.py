"""LLMKube's own gauges, under the names and labels LLMKube's operator exports.

They are computed at scrape time from the objects the controller already holds (its
informer cache): a GPUQuota's spec and status, an InferenceService's status (phase,
replicas, `status.allocation`), a Model's phase. Nothing is published from reconcilers,
so a gauge can never be stale: a deleted object, or a service that left a phase, simply
has no series at the next scrape. Until a source is bound (the composition root binds
the cache), the families are exported without samples.

Series (LLMKube's names and labels, plus the two `llmkube_inferenceservice_device*`
families, ours):

- `llmkube_gpuquota_used_gpus{gpuquota,namespace}`: status.usedGPUCount (0 until set);
  also under its old name `llmkube_gpuquota_used_gpu_count`, deprecated (a gauge must not
  end in `_count`, promtool says), for one release
- `llmkube_gpuquota_gpu_count_limit{gpuquota,namespace}`: spec.gpuCount (0: no cap)
- `llmkube_inferenceservice_phase{inferenceservice,namespace,phase}`: 1 for the one phase
- `llmkube_inferenceservice_info{inferenceservice,namespace,accelerator,runtime}`: 1
- `llmkube_inferenceservice_replicas{inferenceservice,namespace,state=ready|desired}`
- `llmkube_inferenceservice_ready{inferenceservice,namespace}`: 1 while the service's
  Ready condition is True, else 0, for every service; ours (the availability indicator
  of spec.slo's ServiceLevelObjective reads it)
- `llmkube_gpu_queue_depth{namespace}`: services in phase WaitingForGPU, 0 for every
  namespace that has services
- `llmkube_inferenceservice_devices{inferenceservice,namespace,state=allocated|expected}`:
  DRA devices from status.allocation (services whose Model has claims)
- `llmkube_inferenceservice_device_products{inferenceservice,namespace,product}`: the
  allocated DRA devices of status.allocation by productName (`unknown` where the
  device's ResourceSlice publishes none), ours
- `llmkube_model_status{model,namespace,phase}`: 1 for the Model's one phase
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

Obj = Mapping[str, Any]
DEVICE_STATES = ("allocated", "expected")
REPLICA_STATES = ("ready", "desired")
WAITING_FOR_GPU = "WaitingForGPU"
ISVC = ("inferenceservice", "namespace")
QUOTA = ("gpuquota", "namespace")
READY_METRIC = "llmkube_inferenceservice_ready"
# The old name of llmkube_gpuquota_used_gpus, still exported (same samples) for one release.
DEPRECATED_USED = "llmkube_gpuquota_used_gpu_count"


@dataclass
class DomainObjects:
    """What the gauges are computed from: objects as the API server returns them."""

    models: Iterable[Obj] = field(default_factory=list)
    services: Iterable[Obj] = field(default_factory=list)
    quotas: Iterable[Obj] = field(default_factory=list)


DomainSource = Callable[[], DomainObjects]


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _number(value: Any) -> float:
    """A count from an object; anything else (absent, malformed) counts 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def _products(allocation: Mapping[str, Any]) -> Counter[str]:
    """Allocated devices per productName in a status.allocation."""
    found: Counter[str] = Counter()
    for pod in allocation.get("pods") or []:
        for device in (pod.get("devices") if isinstance(pod, Mapping) else None) or []:
            if isinstance(device, Mapping):
                found[str(device.get("productName") or "unknown")] += 1
    return found


def _ready(status: Any) -> bool:
    """The status's Ready condition is True."""
    conditions = _get(status, "conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def _key(obj: Obj) -> tuple[str, str]:
    return str(_get(obj, "metadata", "name") or ""), str(_get(obj, "metadata", "namespace") or "")


class DomainCollector(Collector):
    """A prometheus_client collector over the objects `bind` gives it."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._source: DomainSource | None = None
        if registry is not None:
            registry.register(self)

    def bind(self, source: DomainSource) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return list(self._families().values())

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        if self._source is not None:
            objects = self._source()
            models = list(objects.models)
            self._quotas(objects.quotas, families)
            self._services(objects.services, models, families)
            self._models(models, families)
        return list(families.values())

    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily]:
        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        return {
            "used": gauge(
                "llmkube_gpuquota_used_gpus",
                "GPUs currently used by InferenceServices in a GPUQuota's scope.",
                QUOTA,
            ),
            "used_deprecated": gauge(
                DEPRECATED_USED,
                "Deprecated: renamed llmkube_gpuquota_used_gpus (a gauge must not end in "
                "_count); this name goes in the next release. GPUs currently used by "
                "InferenceServices in a GPUQuota's scope.",
                QUOTA,
            ),
            "limit": gauge(
                "llmkube_gpuquota_gpu_count_limit",
                "The GPU cap (spec.gpuCount) declared by a GPUQuota. 0 means no cap.",
                QUOTA,
            ),
            "phase": gauge(
                "llmkube_inferenceservice_phase",
                "Current phase of inference services. Value is always 1; use the phase "
                "label for filtering.",
                (*ISVC, "phase"),
            ),
            "info": gauge(
                "llmkube_inferenceservice_info",
                "Information about inference services. Value is always 1; use accelerator "
                "and runtime labels for grouping.",
                (*ISVC, "accelerator", "runtime"),
            ),
            "replicas": gauge(
                "llmkube_inferenceservice_replicas",
                "InferenceService replica counts. Use the state label: ready, desired.",
                (*ISVC, "state"),
            ),
            "ready": gauge(
                READY_METRIC,
                "1 while the InferenceService's Ready condition is True, else 0.",
                ISVC,
            ),
            "queue": gauge(
                "llmkube_gpu_queue_depth",
                "Number of InferenceServices waiting for GPU resources, per namespace.",
                ("namespace",),
            ),
            "devices": gauge(
                "llmkube_inferenceservice_devices",
                "DRA devices of an InferenceService's pods (status.allocation): "
                "state=expected is what its claims ask for, state=allocated what the "
                "DRA driver has allocated.",
                (*ISVC, "state"),
            ),
            "products": gauge(
                "llmkube_inferenceservice_device_products",
                "DRA devices allocated to an InferenceService's pods, by the productName "
                "their ResourceSlice publishes (unknown: it publishes none).",
                (*ISVC, "product"),
            ),
            "model": gauge(
                "llmkube_model_status",
                "Current phase of models. Value is always 1; use the phase label for filtering.",
                ("model", "namespace", "phase"),
            ),
        }

    @staticmethod
    def _quotas(quotas: Iterable[Obj], families: dict[str, GaugeMetricFamily]) -> None:
        for quota in quotas:
            labels = list(_key(quota))
            used = _number(_get(quota, "status", "usedGPUCount"))
            families["used"].add_metric(labels, used)
            families["used_deprecated"].add_metric(labels, used)
            families["limit"].add_metric(labels, _number(_get(quota, "spec", "gpuCount")))

    @staticmethod
    def _services(
        services: Iterable[Obj], models: Iterable[Obj], families: dict[str, GaugeMetricFamily]
    ) -> None:
        accelerators = {
            (ns, name): str(_get(m, "spec", "hardware", "accelerator") or "cpu")
            for m in models
            for name, ns in [_key(m)]
        }
        waiting: Counter[str] = Counter()
        for service in services:
            name, ns = _key(service)
            status = _get(service, "status") or {}
            phase = _get(status, "phase")
            waiting[ns] += phase == WAITING_FOR_GPU
            if isinstance(phase, str) and phase:
                families["phase"].add_metric([name, ns, phase], 1)
            model = str(_get(service, "spec", "modelRef") or "")
            runtime = str(_get(service, "spec", "runtime") or "llamacpp")
            accelerator = accelerators.get((ns, model), "")
            families["info"].add_metric([name, ns, accelerator, runtime], 1)
            families["replicas"].add_metric(
                [name, ns, "ready"], _number(_get(status, "readyReplicas"))
            )
            families["replicas"].add_metric(
                [name, ns, "desired"], _number(_get(status, "desiredReplicas"))
            )
            families["ready"].add_metric([name, ns], 1.0 if _ready(status) else 0.0)
            allocation = _get(status, "allocation")
            if isinstance(allocation, Mapping):
                for state in DEVICE_STATES:
                    value = _number(allocation.get(f"{state}Devices"))
                    families["devices"].add_metric([name, ns, state], value)
                for product, n in sorted(_products(allocation).items()):
                    families["products"].add_metric([name, ns, product], n)
        for ns, count in sorted(waiting.items()):
            families["queue"].add_metric([ns], count)

    @staticmethod
    def _models(models: Iterable[Obj], families: dict[str, GaugeMetricFamily]) -> None:
        for model in models:
            phase = _get(model, "status", "phase")
            if isinstance(phase, str) and phase:
                families["model"].add_metric([*_key(model), phase], 1)
