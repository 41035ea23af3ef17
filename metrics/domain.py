"""LLMKube's own gauges, under the names and labels LLMKube's operator exports.

The reconcilers publish through these methods; each `publish_*` makes its value the
only series of that object, and `forget_*` drops them when the object is deleted, so
a dashboard never shows a deleted quota or a service in two phases at once.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Gauge

DEVICE_STATES = ("allocated", "expected")


class DomainMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.quota_used = Gauge(
            "llmkube_gpuquota_used_gpu_count",
            "GPUs currently used by InferenceServices in a GPUQuota's scope.",
            ("gpuquota", "namespace"),
            registry=registry,
        )
        self.quota_limit = Gauge(
            "llmkube_gpuquota_gpu_count_limit",
            "The GPU cap (spec.gpuCount) declared by a GPUQuota. 0 means no cap.",
            ("gpuquota", "namespace"),
            registry=registry,
        )
        self.service_phase = Gauge(
            "llmkube_inferenceservice_phase",
            "Current phase of inference services. Value is always 1; use the phase label "
            "for filtering.",
            ("inferenceservice", "namespace", "phase"),
            registry=registry,
        )
        self.service_devices = Gauge(
            "llmkube_inferenceservice_devices",
            "DRA devices of an InferenceService's pods: state=expected is what its claims "
            "ask for, state=allocated what the scheduler's driver has allocated.",
            ("inferenceservice", "namespace", "state"),
            registry=registry,
        )
        self._phases: dict[tuple[str, str], str] = {}

    # -- GPUQuota ---------------------------------------------------------------

    def publish_quota(self, namespace: str, name: str, used: int, limit: int) -> None:
        self.quota_used.labels(name, namespace).set(used)
        self.quota_limit.labels(name, namespace).set(limit)

    def forget_quota(self, namespace: str, name: str) -> None:
        for gauge in (self.quota_used, self.quota_limit):
            _remove(gauge, name, namespace)

    # -- InferenceService -------------------------------------------------------

    def publish_service_phase(self, namespace: str, name: str, phase: str) -> None:
        if not phase:
            return
        previous = self._phases.get((namespace, name))
        if previous is not None and previous != phase:
            _remove(self.service_phase, name, namespace, previous)
        self._phases[(namespace, name)] = phase
        self.service_phase.labels(name, namespace, phase).set(1)

    def publish_service_devices(
        self, namespace: str, name: str, *, allocated: int, expected: int
    ) -> None:
        self.service_devices.labels(name, namespace, "allocated").set(allocated)
        self.service_devices.labels(name, namespace, "expected").set(expected)

    def forget_service(self, namespace: str, name: str) -> None:
        phase = self._phases.pop((namespace, name), None)
        if phase is not None:
            _remove(self.service_phase, name, namespace, phase)
        for state in DEVICE_STATES:
            _remove(self.service_devices, name, namespace, state)


def _remove(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never published: nothing to drop
        gauge.remove(*labels)
