"""A Model's delivery status, from what its loaders reported (the controller fetches nothing).

Every loader (the init container of a serving pod, or the prefetch Job's container)
writes a JSON termination message (reconcilers/sources/loader.py). The Model's status follows
the pods labelled with the Model: Ready once a loader reported the files of the current
cacheKey (and, with spec.sha256, that digest), Failed when one reported a mismatch or a
failed download, Downloading while one runs, Pending before any ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from api import ModelSpec
from api import conditions as c
from objtypes import Obj
from reconcilers.sources.loader import LOADER_NAME


@dataclass(frozen=True)
class Delivery:
    phase: str  # Pending, Downloading, Ready, Failed
    reason: str
    message: str
    status: Obj = field(default_factory=dict)  # the status fields the report gives


def _loader_statuses(pod: Obj) -> Iterator[Obj]:
    status = pod.get("status") or {}
    for s in (
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    ):
        if s.get("name") == LOADER_NAME:
            yield s


def _report(terminated: Obj | None) -> tuple[int, Obj] | None:
    if not terminated:
        return None
    try:
        message = json.loads(terminated.get("message") or "")
    except ValueError:
        message = {}
    if not isinstance(message, dict):
        message = {}
    return int(terminated.get("exitCode") or 0), message


def delivery(model: ModelSpec, pods: Iterable[Obj]) -> Delivery:
    key = model.cache_key
    running = False
    failure: Obj | None = None
    for pod in pods:
        for s in _loader_statuses(pod):
            state, last = s.get("state") or {}, s.get("lastState") or {}
            if "running" in state:
                running = True
            for found in (_report(state.get("terminated")), _report(last.get("terminated"))):
                if found is None:
                    continue
                code, msg = found
                if msg.get("cacheKey") != key:
                    continue  # a pod of an older spec
                if code == 0 and "error" not in msg:
                    if model.sha256 and msg.get("sha256") != model.sha256:
                        continue  # staged before spec.sha256 said otherwise
                    return _ready(msg)
                failure = failure or msg
    if failure is not None:
        return _failed(failure)
    if running:
        return Delivery("Downloading", c.DOWNLOAD_STARTED, "a loader is staging the files")
    return Delivery(
        "Pending",
        c.DOWNLOAD_PENDING,
        "the files are staged by the loader of the first pod (or prefetch Job) using this Model",
    )


def _ready(msg: Obj) -> Delivery:
    status: Obj = {
        "cacheKey": str(msg.get("cacheKey") or ""),
        "path": str(msg.get("path") or ""),
        "size": str(msg.get("size") or ""),
        "sha256": str(msg.get("sha256") or ""),
        "stagedFiles": [str(f) for f in msg.get("stagedFiles") or []],
    }
    if msg.get("sourceETag"):
        status["sourceETag"] = str(msg["sourceETag"])
    files = ", ".join(status["stagedFiles"])
    return Delivery("Ready", c.MODEL_CACHED, f"staged {files} at {status['path']}", status)


def _failed(msg: Obj) -> Delivery:
    file = msg.get("file", "")
    if msg.get("error") == "Sha256Mismatch":
        return Delivery(
            "Failed",
            c.INTEGRITY_CHECK_FAILED,
            f"spec.sha256: {file} has sha256 {msg.get('actual')}, expected "
            f"{msg.get('expected')}; the file was not used",
            {"cacheKey": str(msg.get("cacheKey") or "")},
        )
    if msg.get("error") in ("BadSource", "BadTarget"):  # what parse_model lets through never is
        return Delivery(
            "Failed",
            c.INVALID_SPEC,
            f"the loader refused {file!r}: it takes one http(s) URL per file, and a file "
            "inside the Model's folder (relative, no '..', no name starting with '.')",
            {"cacheKey": str(msg.get("cacheKey") or "")},
        )
    return Delivery(
        "Failed",
        c.DOWNLOAD_FAILED,
        f"the loader could not download {file or 'the model'} from spec.source",
        {"cacheKey": str(msg.get("cacheKey") or "")},
    )
