"""A Model's delivery status, from what its loaders reported (the controller fetches nothing).

Every loader (the init container of a serving pod, or the prefetch Job's container)
writes a JSON termination message (reconcilers/sources/loader.py). The Model's status follows
the pods labelled with the Model: Ready once a loader given the current pins (spec.sha256,
spec.fileDigests) reported the files of the current cacheKey, with each file's digest and
its source in status.files; Failed when one reported a mismatch or a failed download,
Downloading while one runs, Pending before any ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from api import ModelSpec
from api import conditions as c
from api.model import DIGEST_SOURCES
from controller.informer import MODIFIED, Event
from objtypes import Obj
from reconcilers.sources.loader import LOADER_NAME, staged_names


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


def loader_changed(event: Event) -> bool:
    """A pod event a Model's delivery may read: its arrival or departure, a change of its
    labels or spec (the loader's pins), or of its loader's status. The rest of a pod's
    status (conditions, phase, the runtime's container) moves no Model."""
    old, new = event.old, event.obj
    if event.type != MODIFIED or old is None:
        return True
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        return True
    if old.get("spec") != new.get("spec"):
        return True
    return list(_loader_statuses(old)) != list(_loader_statuses(new))


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
                    if not _pins_hold(model, pod, msg):
                        continue  # staged before spec.sha256 / fileDigests said otherwise
                    return _ready(model, msg)
                failure = failure or msg
    if failure is not None:
        return _failed(model, failure)
    if running:
        return Delivery("Downloading", c.DOWNLOAD_STARTED, "a loader is staging the files")
    return Delivery(
        "Pending",
        c.DOWNLOAD_PENDING,
        "the files are staged by the loader of the first pod (or prefetch Job) using this Model",
    )


def _reported_files(msg: Obj) -> list[Obj]:
    """The loader's per-file report, each entry checked for shape (it is a pod's word)."""
    out = []
    for f in msg.get("files") or []:
        if not isinstance(f, dict):
            continue
        source = f.get("digestSource")
        out.append(
            {
                "name": str(f.get("name") or ""),
                "size": int(f["size"]) if isinstance(f.get("size"), int) else 0,
                "sha256": str(f.get("sha256") or ""),
                "digestSource": source if source in DIGEST_SOURCES else "computed",
            }
        )
    return out


def _loader_pins(pod: Obj) -> dict[int, str]:
    """The digests a pod's loader was given (LOADER_SHA256_<i>), by file index."""
    containers = (pod.get("spec") or {}).get("initContainers") or []
    containers = [*containers, *((pod.get("spec") or {}).get("containers") or [])]
    pins = {}
    for container in containers:
        if container.get("name") != LOADER_NAME:
            continue
        for e in container.get("env") or []:
            name = str(e.get("name") or "")
            # LOADER_SHA256: the primary file's pin, as loaders before per-file pins took it
            index = "0" if name == "LOADER_SHA256" else name.removeprefix("LOADER_SHA256_")
            if index.isdigit() and isinstance(e.get("value"), str):
                pins[int(index)] = e["value"]
    return pins


def _pins_hold(model: ModelSpec, pod: Obj, msg: Obj) -> bool:
    """The report is of the current pins: files[0]'s digest is the pinned one, and the
    loader was given every digest the spec pins now (it refuses any file that differs)."""
    if model.pinned_sha256(0) and msg.get("sha256") != model.pinned_sha256(0):
        return False
    count = len(staged_names(model))
    wanted = {i: model.pinned_sha256(i) for i in range(count)}
    return _loader_pins(pod) == {i: pin for i, pin in wanted.items() if pin}


def _ready(model: ModelSpec, msg: Obj) -> Delivery:
    status: Obj = {
        "cacheKey": str(msg.get("cacheKey") or ""),
        "path": str(msg.get("path") or ""),
        "size": str(msg.get("size") or ""),
        "sha256": str(msg.get("sha256") or ""),
        "stagedFiles": [str(f) for f in msg.get("stagedFiles") or []],
    }
    if msg.get("stagedOmitted"):  # a long list the loader cut: it staged the spec's files
        status["stagedFiles"] = list(staged_names(model))
    if msg.get("sourceETag"):
        status["sourceETag"] = str(msg["sourceETag"])
    reported = _reported_files(msg)
    if reported:
        status["files"] = reported
    omitted = msg.get("filesOmitted")
    if isinstance(omitted, int) and omitted > 0:
        status["filesOmitted"] = omitted
    message = f"staged {', '.join(status['stagedFiles'])} at {status['path']}"
    if model.location.kind in ("hub", "hub-file"):
        unvouched = [f["name"] for f in reported if f["digestSource"] == "computed"]
        if unvouched:
            message += (
                f"; the hub published no digest for {', '.join(unvouched)} (not LFS files): "
                "their sha256 in status.files is the loader's own, checked against nothing "
                "(pin them in spec.fileDigests)"
            )
    return Delivery("Ready", c.MODEL_CACHED, message, status)


def _failed(model: ModelSpec, msg: Obj) -> Delivery:
    file = msg.get("file", "")
    if msg.get("error") == "Sha256Mismatch":
        whose = (
            "the hub's digest (X-Linked-Etag)"
            if msg.get("expectedFrom") == "hub"
            else "spec.fileDigests"
            if msg.get("expectedFrom") == "spec" and file in dict(model.file_digests)
            else "spec.sha256"
        )
        return Delivery(
            "Failed",
            c.INTEGRITY_CHECK_FAILED,
            f"{whose}: {file} has sha256 {msg.get('actual')}, expected "
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
