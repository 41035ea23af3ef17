"""The API server's answers as exceptions, one type per answer a caller branches on.

A request ends with an ApiError subclass (NotFound, Conflict, Gone, TooManyRequests,
ServerError) built from the status code and the Status body, or with a connection
failure (aiohttp's ClientError types, OSError, TimeoutError): TRANSIENT lists what
trying again later may fix.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from .credentials import ExecPluginError

MAX_RETRY_AFTER = 60.0  # never sleep longer than this on one answer's word


class ApiError(Exception):
    """A non-2xx answer from the apiserver, with its Status reason and message."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        retry_after: float | None = None,
        causes: tuple[str, ...] = (),
        about: tuple[str, str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.causes = causes  # the Status's details.causes[].reason (metav1.CauseType)
        # The object the Status names in its details: (group, resource plural, name).
        self.about = about

    def names(self, group: str, plural: str, name: str) -> bool:
        """The Status says its answer is about this object (kube-apiserver's NotFound,
        Conflict and AlreadyExists name the object in details; path errors do not)."""
        return self.about == (group, plural, name)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class Gone(ApiError):
    """The resourceVersion asked for was compacted away: relist."""


class Fenced(ApiError):
    """A write refused locally: this replica may no longer be the leader."""

    def __init__(self, path: str) -> None:
        super().__init__(0, "NotLeader", f"write to {path} refused: leadership lost")


class TooManyRequests(ApiError):
    """429: the server is shedding load; retry_after is its requested wait, if it sent one."""


class ServerError(ApiError):
    """5xx: worth retrying, after retry_after when the server said so."""


_BY_STATUS: dict[int, type[ApiError]] = {
    404: NotFound,
    409: Conflict,
    410: Gone,
    429: TooManyRequests,
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (the apiserver sends whole seconds), bounded."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    if seconds != seconds or seconds < 0:  # NaN or negative: ignore the header
        return None
    return min(seconds, MAX_RETRY_AFTER)


def error_from(status: int, text: str, retry_after: float | None = None) -> ApiError:
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    try:
        body = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError("not a Status")
    except (ValueError, RecursionError):
        return cls(status, "", text[:500], retry_after)
    return cls(
        status,
        str(body.get("reason", "")),
        str(body.get("message", text)),
        retry_after,
        status_causes(body),
        status_object(body),
    )


def status_object(status: dict[str, Any]) -> tuple[str, str, str] | None:
    """The object a metav1.Status names in details (group, kind: the resource, name)."""
    details = status.get("details")
    if not isinstance(details, dict) or not details.get("name") or not details.get("kind"):
        return None
    return (str(details.get("group") or ""), str(details["kind"]), str(details["name"]))


def status_causes(status: dict[str, Any]) -> tuple[str, ...]:
    """The cause types (details.causes[].reason) of a metav1.Status, as sent."""
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(causes, list):
        return ()
    return tuple(str(c["reason"]) for c in causes if isinstance(c, dict) and "reason" in c)


# What a request can end with that trying again later may fix: the server's answers
# (ApiError) and the network's failures, as either transport raises them.
# An exec plugin that fails (its identity provider unreachable) is weather too.
TRANSIENT: tuple[type[BaseException], ...] = (
    ApiError,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
    ExecPluginError,
)
