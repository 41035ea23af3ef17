"""Prometheus metrics of the controller, under the names controller-runtime uses."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from .domain import DomainCollector, DomainObjects, DomainSource
from .events import EventMetrics
from .informer import InformerMetrics
from .reconcile import ReconcileMetrics
from .rest_client import RestClientMetrics
from .workqueue import WorkqueueMetrics


class ControllerMetrics:
    """All metrics of one controller process, in a registry of its own.

    Besides controller-runtime's and LLMKube's series, the registry carries the
    process_* (CPU, memory, file descriptors), python_info and python_gc_* collectors,
    the Python counterparts of the Go collectors controller-runtime registers.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # No `*_created` series beside counters and histograms: controller-runtime's
        # client_golang has none, and they double the series a scrape stores.
        # prometheus_client's switch is process-wide (read at each collect).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.workqueue = WorkqueueMetrics(self.registry)
        self.reconcile = ReconcileMetrics(self.registry)
        # LLMKube's gauges, from objects the composition root binds (domain.bind).
        self.domain = DomainCollector(self.registry)
        self.informer = InformerMetrics(self.registry)
        self.events = EventMetrics(self.registry)
        # client-go's rest_client_*: the Manager points its KubeClient here.
        self.rest_client = RestClientMetrics(self.registry)

    def init_controller(self, name: str) -> None:
        """Create a controller's series at zero, as controller-runtime does at start-up,
        so rate() and absent() work before its first reconcile."""
        self.reconcile.init_controller(name)
        self.workqueue.init_controller(name)


__all__ = [
    "ControllerMetrics",
    "DomainCollector",
    "DomainObjects",
    "DomainSource",
    "EventMetrics",
    "InformerMetrics",
    "ReconcileMetrics",
    "RestClientMetrics",
    "WorkqueueMetrics",
]
