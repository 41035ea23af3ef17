"""What every reconciler is given: the API client, the informer cache, Events, status."""

from __future__ import annotations

from dataclasses import dataclass

from controller.cache import Cache
from controller.events import EventRecorder
from controller.kube import KubeClient

from .status import StatusWriter


@dataclass
class Context:
    client: KubeClient
    cache: Cache
    recorder: EventRecorder
    status: StatusWriter

    @classmethod
    def create(
        cls, client: KubeClient, cache: Cache, recorder: EventRecorder | None = None
    ) -> Context:
        recorder = recorder or EventRecorder(client)
        return cls(client, cache, recorder, StatusWriter(client, recorder))
