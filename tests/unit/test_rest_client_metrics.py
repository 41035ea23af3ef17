"""client-go's rest_client_* metrics, recorded by both transports of the KubeClient.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_rest_client_metrics.py.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from controller.errors import TRANSIENT
from controller.kube import KubeClient
from controller.resources import LEASE
from metrics import RestClientMetrics


async def test_no_answer_from_a_closed_port_is_an_error_code() -> None:
    client = await KubeClient.connect("http://127.0.0.1:1", timeout=5)
    registry = CollectorRegistry()
    client.record_metrics_in(RestClientMetrics(registry))
    try:
        with pytest.raises(TRANSIENT):
            await client.get(LEASE, "default", "x")
    finally:
        await client.close()
    labels = {"code": "<error>", "method": "GET", "host": "127.0.0.1:1"}
    assert registry.get_sample_value("rest_client_requests_total", labels) == 1
