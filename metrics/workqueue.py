"""Work queue metrics under the names controller-runtime registers (client-go's workqueue)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# client-go's buckets: 10 ns up to 100 s, one decade each.
DURATION_BUCKETS = tuple(10.0**exp for exp in range(-8, 3))


class WorkqueueMetrics:
    """Labelled as controller-runtime labels them: `name` and `controller` are both the
    controller's name, so upstream dashboards show one series per controller."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("name", "controller")
        self.depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", labels, registry=registry
        )
        self.adds = Counter(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            labels,
            registry=registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            labels,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration",
            labels,
            registry=registry,
        )
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            labels,
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            labels,
            registry=registry,
        )

    def init_controller(self, name: str) -> None:
        for metric in (self.depth, self.adds, self.queue_duration, self.work_duration):
            metric.labels(name, name)
        for metric in (self.unfinished_work, self.longest_running, self.retries):
            metric.labels(name, name)
