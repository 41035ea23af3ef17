"""Reconcile and leader-election metrics under controller-runtime's names."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# controller-runtime's values of the `result` label.
RESULTS = ("error", "requeue", "requeue_after", "success")

RECONCILE_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5,
    6,
    7,
    8,
    9,
    10,
    15,
    20,
    25,
    30,
    40,
    50,
    60,
)


class ReconcileMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ("controller", "result"),
            registry=registry,
        )
        self.errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ("controller",),
            registry=registry,
        )
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            ("controller",),
            registry=registry,
        )
        self.timeouts = Counter(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            ("controller",),
            registry=registry,
        )
        self.panics = Counter(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            ("controller",),
            registry=registry,
        )
        self.duration = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ("controller",),
            buckets=RECONCILE_BUCKETS,
            registry=registry,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ("controller",),
            registry=registry,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ("controller",),
            registry=registry,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ("name",),
            registry=registry,
        )

    def init_controller(self, name: str) -> None:
        for result in RESULTS:
            self.total.labels(name, result)
        for counter in (self.errors, self.terminal_errors, self.timeouts, self.panics):
            counter.labels(name)
        self.duration.labels(name)
        self.active_workers.labels(name)
