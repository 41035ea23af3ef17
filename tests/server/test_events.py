"""The asynchronous Event recorder: queued off the reconcile path, folded, rate limited.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_events.py.
"""

from __future__ import annotations

import io
import json

from controller import logging as log_setup
from controller.events import NORMAL, WARNING
from controller.kube import KubeClient
from controller.resources import EVENT
from objtypes import Obj
from tests.support.events import dropped, obj, recorder


async def events(kube: KubeClient) -> list[Obj]:
    items, _ = await kube.list(EVENT, "default")
    return items


async def test_record_only_queues_and_the_writer_creates_the_event(kube: KubeClient) -> None:
    rec, metrics = recorder(kube)
    await rec.record(obj("m"), NORMAL, "Ready", "model can be served")
    # Nothing was awaited: the Event waits in the buffer, the caller went on.
    assert rec.queued == 1
    await rec.flush()
    assert rec.queued == 0
    [event] = await events(kube)
    assert (event["type"], event["reason"], event["count"]) == (NORMAL, "Ready", 1)
    assert event["involvedObject"]["name"] == "m"
    assert event["involvedObject"]["kind"] == "Model"
    assert metrics.written.labels("create")._value.get() == 1
    await rec.stop()


async def test_repeats_fold_into_one_event_with_a_count(kube: KubeClient) -> None:
    rec, metrics = recorder(kube)
    # Repeats still in the buffer merge there: one request for three records.
    for _ in range(3):
        await rec.record(obj("m"), WARNING, "NotFound", "claim 'gpu' not found")
    await rec.flush()
    [event] = await events(kube)
    assert event["count"] == 3
    assert metrics.written.labels("create")._value.get() == 1
    assert metrics.written.labels("patch")._value.get() == 0
    # A repeat after the write patches the same Event.
    await rec.record(obj("m"), WARNING, "NotFound", "claim 'gpu' not found")
    await rec.flush()
    [event] = await events(kube)
    assert event["count"] == 4
    assert metrics.written.labels("patch")._value.get() == 1
    # Another message is another Event.
    await rec.record(obj("m"), NORMAL, "Ready", "model can be served")
    await rec.flush()
    assert len(await events(kube)) == 2
    await rec.stop()


async def test_a_deleted_folded_event_is_created_again(kube: KubeClient) -> None:
    rec, _ = recorder(kube)
    await rec.record(obj("m"), NORMAL, "Ready", "ok")
    await rec.flush()
    [event] = await events(kube)
    await kube.delete(EVENT, "default", event["metadata"]["name"])
    await rec.record(obj("m"), NORMAL, "Ready", "ok")
    await rec.flush()
    [event] = await events(kube)
    assert event["count"] == 1
    await rec.stop()


async def test_a_new_process_continues_the_count_of_an_existing_event(kube: KubeClient) -> None:
    first, _ = recorder(kube)
    await first.record(obj("m"), NORMAL, "Ready", "ok")
    await first.stop()
    second, metrics = recorder(kube)
    await second.record(obj("m"), NORMAL, "Ready", "ok")
    await second.flush()
    [event] = await events(kube)
    assert event["count"] == 2
    assert dropped(metrics, "write_error") == 0
    await second.stop()


async def test_spam_budget_is_per_object(kube: KubeClient) -> None:
    rec, metrics = recorder(kube, spam_burst=3, spam_qps=0.0)
    for i in range(10):
        await rec.record(obj("noisy"), WARNING, "Flapping", f"attempt {i}")
    await rec.record(obj("quiet"), NORMAL, "Ready", "ok")
    await rec.flush()
    written = await events(kube)
    by_object = [e["involvedObject"]["name"] for e in written]
    assert by_object.count("noisy") == 3
    assert by_object.count("quiet") == 1
    assert dropped(metrics, "spam") == 7
    assert rec.dropped == 7
    await rec.stop()


async def test_a_full_buffer_drops_and_counts(kube: KubeClient) -> None:
    rec, metrics = recorder(kube, buffer=2)
    for i in range(5):
        await rec.record(obj(f"m{i}"), NORMAL, "Ready", "ok")
    assert rec.queued == 2
    assert dropped(metrics, "buffer_full") == 3
    await rec.flush()
    assert len(await events(kube)) == 2
    await rec.stop()


async def test_drops_are_logged_at_debug_level_only(kube: KubeClient) -> None:
    rec, metrics = recorder(kube, buffer=0)
    lines: dict[str, list[Obj]] = {}
    for level in ("debug", "info"):
        stream = io.StringIO()
        log_setup.configure(level, stream=stream)
        try:
            await rec.record(obj(f"m-{level}"), WARNING, "Failed", "no")
        finally:
            log_setup.configure("warning")
        lines[level] = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert dropped(metrics, "buffer_full") == 2
    assert [(x["event"], x["why"], x["reason"]) for x in lines["debug"]] == [
        ("event dropped", "buffer_full", "Failed")
    ]
    assert lines["info"] == []
    await rec.stop()


async def test_stop_writes_what_is_queued(kube: KubeClient) -> None:
    rec, _ = recorder(kube)
    for i in range(20):
        await rec.record(obj(f"m{i}"), NORMAL, "Ready", "ok")
    await rec.stop()
    assert len(await events(kube)) == 20
