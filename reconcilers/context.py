"""What every reconciler is given: the API client, the informer cache, Events, status,
and the operator's settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.cache import Cache
from controller.events import EventRecorder
from controller.kube import KubeClient
from reconcilers.settings import Settings
from reconcilers.writes.status import StatusWriter


@dataclass
class Context:
    client: KubeClient
    cache: Cache
    recorder: EventRecorder
    status: StatusWriter
    settings: Settings = field(default_factory=Settings)

    @classmethod
    def create(
        cls,
        client: KubeClient,
        cache: Cache,
        recorder: EventRecorder | None = None,
        settings: Settings | None = None,
    ) -> Context:
        recorder = recorder or EventRecorder(client)
        return cls(client, cache, recorder, StatusWriter(client, recorder), settings or Settings())
