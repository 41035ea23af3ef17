"""Kubernetes Events for the objects the controller manages (core/v1, as kubectl shows them).

Repeats of the same reason and message on the same object are folded into one Event
whose count goes up, as client-go's recorder does, so a retrying reconcile does not
flood the namespace.
"""

from __future__ import annotations

import hashlib
import socket
from datetime import UTC, datetime
from typing import Any

import structlog

from .kube import ApiError, KubeClient
from .resources import EVENT

Obj = dict[str, Any]
NORMAL, WARNING = "Normal", "Warning"
log = structlog.get_logger("events")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, client: KubeClient, component: str = "llmkube-controller") -> None:
        self.client = client
        self.component = component
        self.host = socket.gethostname()
        self._counts: dict[str, int] = {}

    async def record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        """Best effort: failing to write an Event never fails a reconcile."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        digest = hashlib.sha1(f"{meta.get('uid')}/{type_}/{reason}/{message}".encode()).hexdigest()[
            :10
        ]
        name = f"{meta.get('name')}.{digest}"
        now = _now()
        if len(self._counts) > 4096:  # bound memory; a lost count only restarts folding
            self._counts.clear()
        count = self._counts.get(name, 0) + 1
        try:
            if count > 1:
                try:
                    await self.client.patch(
                        EVENT, namespace, name, {"count": count, "lastTimestamp": now}
                    )
                except ApiError as e:
                    if not e.not_found:
                        raise
                    count = 1  # the folded Event expired: start a new one
            if count == 1:
                await self._create(obj, namespace, name, type_, reason, message, now)
            self._counts[name] = count
        except ApiError as e:
            if e.conflict:  # created by an earlier process: count from here
                self._counts[name] = 1
                return
            log.warning("could not record event", reason=reason, error=str(e))
        except Exception as e:
            log.warning("could not record event", reason=reason, error=repr(e))

    async def _create(
        self,
        obj: Obj,
        namespace: str,
        name: str,
        type_: str,
        reason: str,
        message: str,
        now: str,
    ) -> None:
        meta = obj.get("metadata") or {}
        await self.client.create(
            EVENT,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": meta.get("name"),
                    "namespace": meta.get("namespace"),
                    "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "type": type_,
                "reason": reason,
                "message": message[:1024],
                "source": {"component": self.component, "host": self.host},
                "reportingComponent": self.component,
                "reportingInstance": self.host,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            },
        )
