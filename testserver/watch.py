"""Watch streams: replay from a resourceVersion, follow live writes, bookmarks, 410 Gone.

Each event's object is serialized once (WatchEvent.raw) and the bytes are shared by every
watcher it is sent to; nothing is copied per watcher. Events queued while a watcher was
writing go out together in one write.

A watch from a resourceVersion the server has not reached (a client of the server before
`restart_empty`) is accepted and sends nothing at or below it, bookmarks included, as
kube-apiserver's cache watcher does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from aiohttp import web

from objtypes import Obj

from .errors import status_body
from .faults import FaultRule
from .kinds import ResourceType
from .selectors import field_matcher, label_matcher
from .storage import Storage, StorageError, WatchEvent

_MAX_BATCH = 256  # events per write when many are queued


def _frame(type_: str, raw_obj: bytes) -> bytes:
    return b'{"type":"' + type_.encode() + b'","object":' + raw_obj + b"}\n"


async def _send(resp: web.StreamResponse, type_: str, obj: Obj) -> None:
    await resp.write(_frame(type_, json.dumps(obj, separators=(",", ":")).encode()))


async def _open_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    return resp


def _cut(request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
    """Drop the connection mid-stream, without the chunked terminator."""
    if request.transport is not None:
        request.transport.abort()
    return resp


def _event_frame(
    storage: Storage,
    e: WatchEvent,
    namespace: str | None,
    matches: Callable[[Obj], bool],
) -> bytes | None:
    """The event's line as a watcher with this selector sees it; None if it sees nothing."""
    ns = e.obj.get("metadata", {}).get("namespace", "")
    if namespace is not None and ns != namespace:
        return None
    now, before = matches(e.obj), e.old is not None and matches(e.old)
    if e.type == "MODIFIED" and now and not before:
        type_ = "ADDED"
    elif e.type == "MODIFIED" and before and not now:
        type_ = "DELETED"
    elif now:
        type_ = e.type
    else:
        return None
    return _frame(type_, storage.event_raw(e))


def _bookmark(storage: Storage, rt: ResourceType) -> Obj:
    return {
        "kind": rt.kind,
        "apiVersion": rt.api_version,
        "metadata": {"resourceVersion": str(storage.rv)},
    }


def _initial_events_end(rt: ResourceType, rv: int) -> Obj:
    return {
        "kind": rt.kind,
        "apiVersion": rt.api_version,
        "metadata": {
            "resourceVersion": str(rv),
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }


_FORBIDDEN_MATCH = (
    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
)
# kube-apiserver's 422 for sendInitialEvents without resourceVersionMatch=NotOlderThan.
_INITIAL_EVENTS_NEED_MATCH: tuple[str, Obj] = (
    f'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: {_FORBIDDEN_MATCH}',
    {
        "name": "",
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": _FORBIDDEN_MATCH,
                "field": "resourceVersionMatch",
            }
        ],
    },
)


async def watch(
    request: web.Request,
    storage: Storage,
    rt: ResourceType,
    namespace: str | None,
    fault: FaultRule | None,
    bookmark_interval: float,
) -> web.StreamResponse:
    lm = label_matcher(request.query.get("labelSelector"))
    fm = field_matcher(request.query.get("fieldSelector"))

    def matches(o: Obj) -> bool:
        return lm(o) and fm(o)

    rv_param = request.query.get("resourceVersion", "")
    send_initial = request.query.get("sendInitialEvents")
    if send_initial is not None and request.query.get("resourceVersionMatch") != "NotOlderThan":
        raise StorageError(422, "Invalid", *_INITIAL_EVENTS_NEED_MATCH)
    # The state first, as ADDED events: a watch without a resourceVersion (or from "0"),
    # or one that asks for it with sendInitialEvents=true (from any resourceVersion).
    with_initial = rv_param in ("", "0") if send_initial is None else send_initial in ("true", "1")
    initial: list[Obj] = []
    if with_initial or rv_param in ("", "0"):
        initial = storage.select_view(rt, namespace, matches) if with_initial else []
        since = storage.rv
    else:
        try:
            since = int(rv_param)
        except ValueError as e:
            raise StorageError(400, "BadRequest", f"invalid resourceVersion {rv_param}") from e
    try:
        watcher, replay = storage.subscribe(rt, namespace, since, matches)
    except StorageError as e:
        if e.code != 410:
            raise
        # The apiserver reports an expired resourceVersion as an ERROR event.
        resp = await _open_stream(request)
        await _send(resp, "ERROR", status_body(410, "Expired", e.message))
        return resp
    bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
    timeout = float(request.query.get("timeoutSeconds") or 1800)
    resp = await _open_stream(request)
    sent = 0
    cut_after = fault.cut_after if fault else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        for obj in initial:
            await resp.write(_frame("ADDED", storage.raw(obj)))
        if with_initial and bookmarks:
            # kube-apiserver marks the end of the initial events (the state at `since`).
            await _send(resp, "BOOKMARK", _initial_events_end(rt, since))
        for event in replay:
            if (frame := _event_frame(storage, event, namespace, matches)) is not None:
                await resp.write(frame)
                sent += 1
                if cut_after is not None and sent >= cut_after:
                    return _cut(request, resp)
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wait = min(remaining, bookmark_interval) if bookmarks else remaining
            live: WatchEvent | None
            try:
                async with asyncio.timeout(wait):  # no task per wait, unlike wait_for
                    live = await watcher.queue.get()
            except TimeoutError:
                # As kube-apiserver's cache watcher: nothing at or below the watch's
                # resourceVersion, bookmarks included (a watch from a resourceVersion the
                # server has not reached stays silent until it gets there).
                if bookmarks and storage.rv > since and loop.time() < deadline:
                    await _send(resp, "BOOKMARK", _bookmark(storage, rt))
                continue
            # Everything already queued goes out in one write (one chunk, one send):
            # a burst costs a syscall per batch, not per event. Never more than the
            # events a cut fault allows.
            frames: list[bytes] = []
            expired = False
            while True:
                if live is None:
                    expired = True
                    break
                # (events at or below `since` reach a watch from a resourceVersion ahead
                # of the server's: kube-apiserver sends none of them)
                if (
                    live.rv > since
                    and (frame := _event_frame(storage, live, namespace, matches)) is not None
                ):
                    frames.append(frame)
                    if cut_after is not None and sent + len(frames) >= cut_after:
                        break
                if watcher.queue.empty() or len(frames) >= _MAX_BATCH:
                    break
                live = watcher.queue.get_nowait()
            if frames:
                await resp.write(b"".join(frames))
                sent += len(frames)
                if cut_after is not None and sent >= cut_after:
                    return _cut(request, resp)
            if expired:
                await _send(
                    resp,
                    "ERROR",
                    status_body(410, "Expired", "too old resource version: history compacted"),
                )
                break
    except ConnectionError:
        # The client went away: a reset, a broken pipe, or (from aiohttp, when the peer
        # resets while a write waits on a full buffer) a plain "Connection lost".
        pass
    # A cancellation (the server shutting down) propagates: aiohttp expects it, and a
    # handler that returned instead races its shutdown ("InvalidStateError").
    finally:
        storage.unsubscribe(watcher)
    return resp
