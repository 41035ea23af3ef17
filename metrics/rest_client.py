"""client-go's REST client metrics: what the controller asks of the API server.

- `rest_client_requests_total{code,method,host}`: every attempt sent, watches and
  retries included (client-go counts each try); `code` is the HTTP status as a string,
  "<error>" when no answer came (connection refused or reset, timeout, cancelled).
- `rest_client_request_duration_seconds{verb,host}`: a short request's time, from its
  first attempt to its answer read whole (retries after a Retry-After included, as
  client-go's Do); watches are not timed (their answer is a stream).

`host` is the API server's host[:port] as written in its URL (client-go's URL.Host),
`method` and `verb` the upper-case HTTP method.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram

# client-go's (component-base restclient) buckets for rest_client_request_duration_seconds.
DURATION_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
NO_ANSWER = "<error>"  # client-go's code when the request got no HTTP answer

_R = TypeVar("_R")


class RestClientMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"),
            registry=registry,
        )
        self.duration = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ("verb", "host"),
            buckets=DURATION_BUCKETS,
            registry=registry,
        )

    def recorder(self, host: str) -> RestClientRecorder:
        return RestClientRecorder(self, host)


class RestClientRecorder:
    """One client's requests to one API server; label children are looked up once each
    (labels() costs more than the increment)."""

    def __init__(self, metrics: RestClientMetrics, host: str) -> None:
        self.metrics = metrics
        self.host = host
        self._results: dict[tuple[str, str], Counter] = {}
        self._durations: dict[str, Histogram] = {}

    def result(self, method: str, code: str) -> None:
        child = self._results.get((method, code))
        if child is None:
            child = self.metrics.requests.labels(code, method, self.host)
            self._results[(method, code)] = child
        child.inc()

    def duration(self, verb: str, seconds: float) -> None:
        child = self._durations.get(verb)
        if child is None:
            child = self._durations[verb] = self.metrics.duration.labels(verb, self.host)
        child.observe(seconds)

    async def attempt(
        self,
        method: str,
        send: Callable[[], Awaitable[_R]],
        status: Callable[[_R], int],
        unsent: type[BaseException] | tuple[type[BaseException], ...] = (),
    ) -> _R:
        """send() once, counted by its answer's status; an exception of type `unsent`
        is a request refused before it left (not counted)."""
        try:
            response = await send()
        except unsent:
            raise
        except BaseException:  # no answer: refused, reset, timed out or cancelled
            self.result(method, NO_ANSWER)
            raise
        self.result(method, str(status(response)))
        return response

    async def timed(self, verb: str, request: Awaitable[_R]) -> _R:
        """The request's time, answer or not (client-go observes it deferred)."""
        started = time.monotonic()
        try:
            return await request
        finally:
            self.duration(verb, time.monotonic() - started)
