"""client-go's rest_client_* metrics, recorded by both transports of the KubeClient.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_rest_client_metrics.py.
"""

from __future__ import annotations

import urllib.parse

import pytest
from prometheus_client import CollectorRegistry

from controller.errors import TRANSIENT
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import LEASE
from metrics import RestClientMetrics
from testserver.process import ApiServerProcess

LEASE_OBJ = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "made", "namespace": "default"},
    "spec": {},
}


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "aiohttp"])
async def test_each_attempt_is_counted_by_code_method_and_host(
    apiserver: ApiServerProcess, lean: bool
) -> None:
    client = await KubeClient.connect(apiserver.url)
    # The aiohttp path is taken through an https:// proxy; here it is chosen directly.
    client.lean = lean
    registry = CollectorRegistry()
    client.record_metrics_in(RestClientMetrics(registry))
    host = urllib.parse.urlsplit(apiserver.url).netloc  # 127.0.0.1:<port>, as client-go

    def requests(code: str, method: str) -> float:
        labels = {"code": code, "method": method, "host": host}
        return registry.get_sample_value("rest_client_requests_total", labels) or 0.0

    def timed(verb: str) -> float:
        labels = {"verb": verb, "host": host}
        return registry.get_sample_value("rest_client_request_duration_seconds_count", labels) or 0

    try:
        # Two 429s with Retry-After: three attempts counted, one request timed.
        await apiserver.fault(path="/leases/x$", method="GET", status=429, retry_after=0, times=2)
        assert await client.get(LEASE, "default", "x") is None
        assert (requests("429", "GET"), requests("404", "GET"), timed("GET")) == (2, 1, 1)
        # No answer at all: client-go's "<error>", and still timed.
        await apiserver.fault(path="/leases/y$", method="GET", disconnect=True, times=-1)
        with pytest.raises(TRANSIENT):
            await client.get(LEASE, "default", "y")
        assert (requests("<error>", "GET"), timed("GET")) == (1, 2)
        created = await client.create(LEASE, LEASE_OBJ)
        assert (requests("201", "POST"), timed("POST")) == (1, 1)
        # A watch is counted when its answer starts, and not timed (its answer is a stream).
        rv = created["metadata"]["resourceVersion"]
        async for _ in client.watch(LEASE, rv, "default", timeout_seconds=1):
            pass
        assert (requests("200", "GET"), timed("GET")) == (1, 2)
    finally:
        await client.close()


async def test_the_managers_client_records_into_its_registry(
    apiserver: ApiServerProcess, controller: Manager
) -> None:
    host = urllib.parse.urlsplit(apiserver.url).netloc
    registry = controller.metrics.registry
    # The informers' lists, at least, went through it.
    listed = registry.get_sample_value(
        "rest_client_requests_total", {"code": "200", "method": "GET", "host": host}
    )
    assert listed and listed >= len(controller.cache.informers)
    timed = registry.get_sample_value(
        "rest_client_request_duration_seconds_count", {"verb": "GET", "host": host}
    )
    assert timed and timed >= len(controller.cache.informers)
