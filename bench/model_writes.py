"""What the product writes for a bench Model, for the comparators that write the same.

bench.ceiling and bench/kopf_operator.py write, for each new Model, the status and the
Events the product's Model reconciler writes for it. They are learnt from the product
itself: its ModelReconciler runs in the comparator's process on a prototype Model (the
DeviceClasses, Nodes and ResourceSlices as listed at start), against a client that
records instead of sending (bench.recording), once per distinct spec (spec_key: an
http(s) source counts by its scheme and file extension). What differs between Models of
one such spec is kept as the prototype has it: the source's `cacheKey` (the same
length). The conditions' time is made the current one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from controller.resources import DEVICE_CLASS, MODEL, NODE, RESOURCE_SLICE, ResourceType
from objtypes import Obj
from reconcilers.model.reconciler import ModelReconciler

from .recording import list_items, record_reconcile

NAME = "llmkube-prototype-model"
NS = "llmkube-prototype-ns"
UID = "6f0e2a7c-1d3b-4e5f-9a80-prototype001"
# What the Model reconciler reads besides the Model itself.
READ: tuple[ResourceType, ...] = (DEVICE_CLASS, NODE, RESOURCE_SLICE)
# A URL's file name that no check of the product refuses or names.
_PLAIN_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")


@dataclass(frozen=True)
class ModelWrites:
    body: str  # the status merge patch the product sends, as it sends it
    stamp: str  # the conditions' time in `body` when it was recorded ("" if none)
    events: tuple[tuple[str, str, str], ...]  # type, reason, message

    def body_now(self, now: str) -> str:
        return self.body.replace(self.stamp, now) if self.stamp else self.body

    def status_now(self, now: str) -> Obj:
        status: Obj = json.loads(self.body_now(now))["status"]
        return status


async def server_objects(session: aiohttp.ClientSession) -> list[tuple[ResourceType, Obj]]:
    """What the Model reconciler reads of the server, listed once."""
    return [(rt, obj) for rt in READ for obj in await list_items(session, rt)]


def spec_key(model: Obj) -> str:
    """Models with the same key get the same writes, but for their cacheKey.

    An http(s) source reaches the status only through its cacheKey (and its file's
    extension through the checks), so the rest of its URL is left out; any other source
    (a path, a claim, a hub id) is kept whole, as its refusals name it. A Model with
    resourceClaims reads claims in its own namespace, which the prototype does not hold:
    not a bench Model, refused."""
    spec = dict(model.get("spec") or {})
    if ((spec.get("hardware") or {}).get("gpu") or {}).get("resourceClaims"):
        raise ValueError("bench.model_writes: a Model with resourceClaims is not a bench Model")
    source = str(spec.pop("source", ""))
    parts = urlsplit(source)
    file = parts.path.rsplit("/", 1)[-1]
    if parts.scheme in ("http", "https") and _PLAIN_FILE.fullmatch(file):
        source = f"{parts.scheme}:*.{file.rsplit('.', 1)[-1] if '.' in file else ''}"
    generation = model["metadata"].get("generation", 1)
    return json.dumps([source, generation, spec], sort_keys=True)


async def record(model: Obj, objects: list[tuple[ResourceType, Obj]]) -> ModelWrites:
    """The product's status write and Events for `model` (as on the watch, no status)."""
    proto: Obj = {
        "apiVersion": MODEL.api_version,
        "kind": MODEL.kind,
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "uid": UID,
            "generation": model["metadata"].get("generation", 1),
            "resourceVersion": "1",
        },
        "spec": model.get("spec"),
    }
    done = await record_reconcile(ModelReconciler, NS, NAME, [(MODEL, proto), *objects])
    if len(done.writes) != 1 or not done.writes[0].path.endswith("/status"):
        raise RuntimeError(f"the product wrote {done.writes} for a bench Model, not a status")
    return ModelWrites(done.writes[0].body, done.stamp, done.events)


class ModelWriter:
    """Each Model's writes, recorded once per spec_key."""

    def __init__(self, objects: list[tuple[ResourceType, Obj]]) -> None:
        self.objects = objects
        self._known: dict[str, ModelWrites] = {}

    async def writes(self, model: Obj) -> ModelWrites:
        key = spec_key(model)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = await record(model, self.objects)
        return known
