"""Shared by the tests of events in more than one tier."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from controller.events import EventRecorder
from controller.kube import KubeClient
from metrics.events import EventMetrics
from objtypes import Obj


def obj(name: str, uid: str | None = None) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
    }


def dropped(metrics: EventMetrics, reason: str) -> float:
    return float(metrics.dropped.labels(reason)._value.get())


def recorder(kube: KubeClient, **kwargs: Any) -> tuple[EventRecorder, EventMetrics]:
    metrics = EventMetrics(CollectorRegistry())
    return EventRecorder(kube, metrics=metrics, **kwargs), metrics
