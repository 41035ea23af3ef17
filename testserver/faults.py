"""Injected faults and a request log, driven by tests over HTTP."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class FaultRule:
    """Match requests by method, path regex and whether they watch; then misbehave.

    status: answer with this HTTP error instead of serving the request.
    delay: sleep this many seconds first (a slow apiserver; past a client's timeout, a timeout).
    cut_after: on a watch, close the stream after this many events (a cut connection).
    retry_after: with status, send this Retry-After header (seconds), as a 429 from
        priority-and-fairness or a 503 from an overloaded apiserver does.
    disconnect: read the request, then drop the connection without an answer (a proxy
        or load balancer in front of the apiserver cutting it).
    agent: only requests whose User-Agent contains this (one client among several).
    times: how many matching requests to affect; -1 for all.
    """

    path: str = ".*"
    method: str | None = None
    watch: bool | None = None
    status: int | None = None
    delay: float = 0.0
    cut_after: int | None = None
    retry_after: int | None = None
    disconnect: bool = False
    agent: str | None = None
    times: int = 1
    hits: int = 0
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.path)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultRule:
        allowed = {"path", "method", "watch", "status", "delay", "cut_after", "retry_after"}
        allowed |= {"agent", "times", "disconnect"}
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"unknown fault fields: {sorted(unknown)}")
        return cls(**data)

    def response(self) -> web.Response:
        """The injected error answer, a Status body as the apiserver sends."""
        code = int(self.status or 500)
        reason = {429: "TooManyRequests", 503: "ServiceUnavailable"}.get(code, "InternalError")
        headers = {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f"injected fault {code}",
            "reason": reason,
            "code": code,
        }
        return web.json_response(body, status=code, headers=headers)

    def matches(self, method: str, path: str, watch: bool, agent: str = "") -> bool:
        if self.times == 0:
            return False
        if self.agent and self.agent not in agent:
            return False
        if self.method and self.method.upper() != method:
            return False
        if self.watch is not None and self.watch != watch:
            return False
        return bool(self._regex.search(path))


class FaultBook:
    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        self.requests: Counter[str] = Counter()

    def record(self, method: str, path: str, watch: bool) -> None:
        verb = "WATCH" if watch else method
        self.requests[f"{verb} {path}"] += 1

    def take(self, method: str, path: str, watch: bool, agent: str = "") -> FaultRule | None:
        """The first matching rule, spending one of its uses."""
        for rule in self.rules:
            if rule.matches(method, path, watch, agent):
                rule.hits += 1
                if rule.times > 0:
                    rule.times -= 1
                return rule
        return None
