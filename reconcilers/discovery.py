"""Whether the apiserver serves another project's resource types (Pyrra, Envoy AI Gateway).

Those CRDs may be missing, installed later or removed: the controller never watches them
(an informer of a type the apiserver does not serve fails), it asks discovery
(`/apis/<group>/<version>`, readable by every authenticated user) before it writes one.
A type found served is believed until a write to it answers 404 (`forget`); a type not
found is asked again after ABSENT_RECHECK seconds, so installing the CRD is noticed
without a restart and a missing one costs one request per group and interval, not one
per reconcile.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.clock import REAL, Clock
from controller.errors import NotFound
from controller.kube import KubeClient
from controller.resources import ResourceType

ABSENT_RECHECK = 30.0


def crd_name(rt: ResourceType) -> str:
    """The CustomResourceDefinition that serves rt (`<plural>.<group>`)."""
    return f"{rt.plural}.{rt.group}"


class ServedTypes:
    def __init__(self, client: KubeClient, clock: Clock = REAL) -> None:
        self._client = client
        self._clock = clock
        # group/version -> (the resources it served, when that was asked)
        self._known: dict[str, tuple[frozenset[str], float]] = {}

    async def missing(self, types: Iterable[ResourceType]) -> list[ResourceType]:
        """The types of `types` the apiserver does not serve, in their order."""
        return [rt for rt in types if not await self._served(rt)]

    def forget(self, rt: ResourceType) -> None:
        """A write to rt answered 404: its CRD may be gone, ask again next time."""
        self._known.pop(rt.api_version, None)

    async def _served(self, rt: ResourceType) -> bool:
        known = self._known.get(rt.api_version)
        now = self._clock.monotonic()
        if known is not None and (rt.plural in known[0] or now < known[1] + ABSENT_RECHECK):
            return rt.plural in known[0]
        try:
            found = await self._client.request("GET", f"/apis/{rt.api_version}")
        except NotFound:
            found = {}
        names = frozenset(
            str(r.get("name"))
            for r in found.get("resources") or []
            if isinstance(r, dict) and "/" not in str(r.get("name"))
        )
        self._known[rt.api_version] = (names, now)
        return rt.plural in names
