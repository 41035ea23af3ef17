"""Informer health: the errors an informer survived and the times it had to start over."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class InformerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.handler_errors = Counter(
            "llmkube_informer_handler_errors_total",
            "Event handlers that raised; the event was skipped for that handler only",
            ["resource"],
            registry=registry,
        )
        self.decode_errors = Counter(
            "llmkube_informer_decode_errors_total",
            "Objects the informer refused to decode (too deeply nested or malformed)",
            ["resource"],
            registry=registry,
        )
        self.restarts = Counter(
            "llmkube_informer_restarts_total",
            "Times an informer loop failed unexpectedly and was restarted after backoff",
            ["resource"],
            registry=registry,
        )
        self.relists = Counter(
            "llmkube_informer_relists_total",
            "Full relists, by why (initial, expired, server_reset, unreachable, unverified, "
            "restart)",
            ["resource", "reason"],
            registry=registry,
        )

    def init_resource(self, resource: str) -> None:
        """A resource's error and restart counters at 0 from its informer's creation, so
        rate() and increase() see the first error (a series born at 1 shows no increase)."""
        for counter in (self.handler_errors, self.decode_errors, self.restarts):
            counter.labels(resource)
