"""Prometheus metrics of the controller, under the names controller-runtime uses."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from .events import EventMetrics
from .reconcile import ReconcileMetrics
from .workqueue import WorkqueueMetrics


class ControllerMetrics:
    """All metrics of one controller process, in a registry of its own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.workqueue = WorkqueueMetrics(self.registry)
        self.reconcile = ReconcileMetrics(self.registry)
        self.events = EventMetrics(self.registry)


__all__ = ["ControllerMetrics", "EventMetrics", "ReconcileMetrics", "WorkqueueMetrics"]
