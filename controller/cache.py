"""Read access to the informers' stores, by resource type."""

from __future__ import annotations

from typing import Any

from .informer import Informer
from .resources import ResourceType

Obj = dict[str, Any]


class Cache:
    def __init__(self) -> None:
        self.informers: dict[ResourceType, Informer] = {}

    def add(self, informer: Informer) -> None:
        self.informers[informer.rt] = informer

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.informers[rt].store.get(namespace, name)

    def list(self, rt: ResourceType, namespace: str | None = None) -> list[Obj]:
        return self.informers[rt].store.list(namespace)

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())
