"""Metrics of the asynchronous Event recorder: what it wrote and what it had to drop."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

# Why an Event was not written: the buffer was full (the apiserver is slower than the
# reconciles), the object exceeded its spam budget, or the write itself failed.
DROP_REASONS = ("buffer_full", "spam", "write_error")


class EventMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.written = Counter(
            "llmkube_events_written",
            "Events written to the apiserver, by action (create a new Event or patch a "
            "folded one's count)",
            ("action",),
            registry=registry,
        )
        self.dropped = Counter(
            "llmkube_events_dropped",
            "Events not written, by reason (buffer_full, spam, write_error)",
            ("reason",),
            registry=registry,
        )
        self.queued = Gauge(
            "llmkube_events_queued",
            "Events waiting in the recorder's buffer",
            registry=registry,
        )
        for reason in DROP_REASONS:  # present at 0, so alerts and rate() see the series
            self.dropped.labels(reason)
        for action in ("create", "patch"):
            self.written.labels(action)
