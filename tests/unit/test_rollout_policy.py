"""rolloutPolicy and maxPodLifetimeIdleTimeoutSeconds, the pure parts: reading each runtime's
idle signal, the hold-or-go decision, the record of the pod template a held Deployment
keeps, and the spec's fields."""

from __future__ import annotations

import base64
import json
import time
import zlib
from typing import Any

import pytest

from api import conditions as c
from api import parse_inference_service
from api.podfields import DEFAULT_IDLE_TIMEOUT, MAX_SECONDS, RolloutPolicy
from api.unserved import inference_service_fields
from objtypes import Obj
from reconcilers.inferenceservice import idle
from reconcilers.inferenceservice.rollout import (
    CHECK_INTERVAL,
    RUNTIME_ANNOTATION,
    TEMPLATE_ANNOTATION,
    decide,
    encode_record,
    gate,
    held,
    read_record,
    running_runtime,
    settled,
    template_changes,
    unheld,
)
from reconcilers.writes.status import event_type
from runtimes.idle import (
    BUSY,
    IDLE,
    SIGNALS,
    UNKNOWN,
    UNSUPPORTED,
    Reading,
    gauge_sum,
    read_answer,
)

WAIT = RolloutPolicy(wait_for_idle=True, idle_timeout_seconds=300)
NOW = 1_800_000_000.0
HELD_AT = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 3200))


# -- the runtimes' signals -------------------------------------------------------------


def test_gauge_sum_reads_the_samples_of_one_metric() -> None:
    text = "\n".join(
        [
            "# HELP vllm:num_requests_running Number of requests running.",
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{engine="0",model_name="a b {c}"} 2.0',
            'vllm:num_requests_running{model_name="say \\"hi\\" }"} 1 1712345678000',
            "vllm:num_requests_running_total 40",  # another metric sharing the prefix
            'vllm:num_requests_running_bucket{le="1"} 9',
            "vllm:num_requests_running  3e0",
            "vllm:num_requests_running{broken 5",  # no closing brace: not a sample
        ]
    )
    assert gauge_sum(text, "vllm:num_requests_running") == 6.0
    assert gauge_sum("tgi_batch_current_size 0\n", "tgi_batch_current_size") == 0.0
    assert gauge_sum("# TYPE tgi_batch_current_size gauge\n", "tgi_batch_current_size") is None


@pytest.mark.parametrize(
    ("runtime", "status", "body", "expected"),
    [
        ("llamacpp", 200, b'[{"id":0,"is_processing":false}]', Reading(IDLE)),
        (
            "llamacpp",
            200,
            b'[{"id":0,"is_processing":true},{"id":1,"is_processing":false}]',
            Reading(BUSY, "1 of 2 slot(s) processing"),
        ),
        ("llamacpp", 200, b"[]", Reading(IDLE)),
        (
            "llamacpp",
            501,
            b"{}",
            Reading(UNSUPPORTED, "/slots is turned off (llama.cpp --no-slots)"),
        ),
        ("llamacpp", 503, b"loading", Reading(UNKNOWN, "/slots answered HTTP 503")),
        ("llamacpp", 401, b"", Reading(UNKNOWN, "/slots answered HTTP 401")),
        ("llamacpp", 200, b"not json", Reading(UNKNOWN, "/slots is not JSON")),
        ("llamacpp", 200, b"[" * 100_000, Reading(UNKNOWN, "/slots is not JSON")),
        (
            "llamacpp",
            200,
            b'[{"id":0,"is_processing":"no"}]',
            Reading(UNKNOWN, "/slots is not a list of slots with is_processing"),
        ),
        ("vllm", 200, b'vllm:num_requests_running{m="x"} 0.0\n', Reading(IDLE)),
        (
            "vllm",
            200,
            b'vllm:num_requests_running{m="x"} 3.0\n',
            Reading(BUSY, "vllm:num_requests_running 3"),
        ),
        ("tgi", 200, b"tgi_batch_current_size 0\n", Reading(IDLE)),
        ("tgi", 200, b"tgi_batch_current_size 4\n", Reading(BUSY, "tgi_batch_current_size 4")),
        (
            "sglang",
            200,
            b'sglang:num_running_reqs{a="b"} 1\n',
            Reading(BUSY, "sglang:num_running_reqs 1"),
        ),
        (
            "sglang",
            200,
            b"sglang:num_running_reqs NaN\n",
            Reading(UNKNOWN, "sglang:num_running_reqs is NaN"),
        ),
        ("vllm", 500, b"", Reading(UNKNOWN, "/metrics answered HTTP 500")),
        (
            "tgi",
            200,
            b"tgi_request_count 3\n",
            Reading(
                UNSUPPORTED,
                "/metrics has no tgi_batch_current_size (no request has run yet, or its "
                "metrics are off)",
            ),
        ),
    ],
)
def test_each_runtime_answer_reads_as_idle_busy_unknown_or_unsupported(
    runtime: str, status: int, body: bytes, expected: Reading
) -> None:
    assert read_answer(SIGNALS[runtime], status, body) == expected


def test_every_served_runtime_has_a_signal() -> None:
    assert {k: (s.path, s.gauge) for k, s in SIGNALS.items()} == {
        "llamacpp": ("/slots", None),
        "vllm": ("/metrics", "vllm:num_requests_running"),
        "tgi": ("/metrics", "tgi_batch_current_size"),
        "sglang": ("/metrics", "sglang:num_running_reqs"),
    }


# -- which pods are asked ---------------------------------------------------------------


def pod(
    name: str,
    ip: str | None = "10.0.0.5",
    state: str = "running",
    started: bool = True,
    port: int = 8080,
) -> Obj:
    status: Obj = {
        "containerStatuses": [
            {"name": "loader", "state": {"running": {}}, "started": True},
            {"name": "inference", "state": {state: {}}, "started": started},
        ]
    }
    if ip:
        status["podIP"] = ip
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "inference", "ports": [{"name": "http", "containerPort": port}]}
            ]
        },
        "status": status,
    }


def test_only_pods_whose_runtime_serves_are_asked() -> None:
    pods = [
        pod("up"),
        pod("loading", started=False),  # startup probe not passed: the model is loading
        pod("crashing", state="waiting"),
        pod("no-ip", ip=None),
        {"metadata": {"name": "new"}, "spec": {}, "status": {"phase": "Pending"}},
    ]
    assert idle.replicas(pods) == [idle.Replica("up", "10.0.0.5", 8080)]
    assert idle.replica_of(pod("v6", ip="fd00::5", port=9000)) == idle.Replica(
        "v6", "fd00::5", 9000
    )


async def test_a_replica_without_port_or_ip_address_is_unknown_and_not_asked() -> None:
    found = await idle.probe(
        [
            idle.Replica("no-port", "10.0.0.5", None),
            idle.Replica("named", "metadata.internal", 80),
            idle.Replica("none", "", 80),
        ],
        SIGNALS["vllm"],
    )
    assert found == {
        "no-port": Reading(UNKNOWN, "its inference container names no http port"),
        "named": Reading(UNKNOWN, "podIP 'metadata.internal' is not an IP address"),
        "none": Reading(UNKNOWN, "the pod has no IP"),
    }


# -- hold or go ---------------------------------------------------------------------------


def held_since(timestamp: str = HELD_AT, reason: str = c.PODS_BUSY) -> Obj:
    return {
        "type": c.ROLLOUT_DEFERRED,
        "status": "True",
        "reason": reason,
        "message": "m",
        "lastTransitionTime": timestamp,
    }


def test_a_busy_replica_holds_the_change_naming_it_and_the_time_left() -> None:
    readings = {"b": Reading(IDLE), "a": Reading(BUSY, "1 of 2 slot(s) processing")}
    gate = decide(None, WAIT, readings, NOW)
    assert gate.hold and gate.requeue == CHECK_INTERVAL
    assert gate.condition is not None
    assert (gate.condition.status, gate.condition.reason) == (True, c.PODS_BUSY)
    assert gate.condition.message == (
        "the pod-template change waits until every replica is idle, at most 300s more "
        "(idleTimeoutSeconds 300): busy: a (1 of 2 slot(s) processing)"
    )


def test_the_timeout_runs_from_when_the_hold_began() -> None:
    readings = {"a": Reading(BUSY, "x"), "b": Reading(UNKNOWN, "GET /slots: timeout")}
    began = NOW - 3200
    policy = RolloutPolicy(True, 3300)
    gate = decide(held_since(), policy, readings, NOW)
    assert gate.hold and gate.requeue == CHECK_INTERVAL
    assert gate.condition is not None and "at most 100s more" in gate.condition.message
    assert "busy: a (x); cannot tell: b (GET /slots: timeout)" in gate.condition.message
    # Three seconds before the end, the next look is at the end.
    assert decide(held_since(), policy, readings, began + 3297).requeue == pytest.approx(3)
    done = decide(held_since(), policy, readings, began + 3300)
    assert not done.hold and done.requeue == 0
    assert done.condition is not None
    assert (done.condition.status, done.condition.reason) == (False, c.IDLE_TIMEOUT_EXCEEDED)
    assert done.condition.message == (
        "rolloutPolicy.idleTimeoutSeconds (3300s) passed with replicas not idle (busy: a (x); "
        "cannot tell: b (GET /slots: timeout)): the pod-template change is applied"
    )


def test_an_answer_that_cannot_be_read_holds_as_if_busy() -> None:
    gate = decide(None, WAIT, {"a": Reading(UNKNOWN, "GET /slots: refused")}, NOW)
    assert gate.hold and gate.condition is not None
    assert gate.condition.reason == c.IDLE_CHECK_FAILED
    assert gate.condition.message.endswith("cannot tell: a (GET /slots: refused)")


def test_idle_or_unsupported_replicas_let_the_change_go() -> None:
    gone = decide(held_since(), WAIT, {"a": Reading(IDLE), "b": Reading(IDLE)}, NOW)
    assert not gone.hold and gone.condition is not None
    assert (gone.condition.reason, gone.condition.message) == (
        c.REPLICAS_IDLE,
        "every serving replica (2) is idle: the pod-template change is applied",
    )
    none = decide(None, WAIT, {}, NOW)
    assert not none.hold and none.condition is not None
    assert none.condition.message == "no replica is serving: the pod-template change is applied"
    off = decide(None, WAIT, {"a": Reading(IDLE), "b": Reading(UNSUPPORTED, "no /slots")}, NOW)
    assert not off.hold and off.condition is not None
    assert (off.condition.status, off.condition.reason) == (False, c.IDLE_CHECK_UNSUPPORTED)
    assert off.condition.message.startswith("no idle signal from b (no /slots)")


def test_a_long_list_of_pods_is_cut_short() -> None:
    readings = {f"p{i:02}": Reading(BUSY) for i in range(25)}
    gate = decide(None, WAIT, readings, NOW)
    assert gate.condition is not None
    assert gate.condition.message.endswith(
        "busy: " + ", ".join(f"p{i:02}" for i in range(10)) + " and 15 more"
    )


def test_the_condition_when_nothing_is_held() -> None:
    assert settled(None, RolloutPolicy()) is None
    waiting = settled(None, WAIT)
    assert waiting is not None and (waiting.status, waiting.reason) == (False, c.NO_ROLLOUT_PENDING)
    # After a hold: how it went stays until the next one.
    went = {
        "type": c.ROLLOUT_DEFERRED,
        "status": "False",
        "reason": c.IDLE_TIMEOUT_EXCEEDED,
        "message": "m",
    }
    kept = settled(went, WAIT)
    assert kept is not None and (kept.reason, kept.message) == (c.IDLE_TIMEOUT_EXCEEDED, "m")
    ended = settled(held_since(), WAIT)
    assert ended is not None and (ended.status, ended.reason) == (False, c.NO_ROLLOUT_PENDING)
    forced = unheld(None, RolloutPolicy(True, 300, force=True))
    assert forced is not None and (forced.status, forced.reason) == (False, c.FORCED)
    off = unheld(held_since(), RolloutPolicy())
    assert off is not None and off.reason == c.WAIT_FOR_IDLE_OFF
    assert unheld(None, RolloutPolicy()) is None


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("True", c.PODS_BUSY, "Normal"),
        ("True", c.IDLE_CHECK_FAILED, "Warning"),
        ("False", c.IDLE_TIMEOUT_EXCEEDED, "Warning"),
        ("False", c.IDLE_CHECK_UNSUPPORTED, "Warning"),
        ("False", c.REPLICAS_IDLE, "Normal"),
        ("False", c.FORCED, "Normal"),
        ("False", c.NO_ROLLOUT_PENDING, "Normal"),
        ("False", c.QUOTA_EXCEEDED, "Warning"),
        ("True", c.SERVING, "Normal"),
    ],
)
def test_the_event_of_each_transition(status: str, reason: str, expected: str) -> None:
    assert event_type({"status": status, "reason": reason}) == expected


# -- the record of the pod template ------------------------------------------------------


TEMPLATE = {
    "metadata": {"labels": {"app": "x"}},
    "spec": {"containers": [{"name": "inference", "image": "vllm:1", "args": ["--a"]}]},
}


def deployment(template: Obj, record: str | None) -> Obj:
    annotations = {"inference.llmkube.dev/claimed-devices": "2"}
    if record is not None:
        annotations[TEMPLATE_ANNOTATION] = record
    return {"metadata": {"annotations": annotations}, "spec": {"template": template}}


def with_defaults(template: Obj) -> Obj:
    """The template as the API server returns it (defaults added)."""
    out: Any = json.loads(json.dumps(template))
    out["spec"]["restartPolicy"] = "Always"
    out["spec"]["containers"][0]["terminationMessagePath"] = "/dev/termination-log"
    return dict(out)


def test_the_record_reads_back_only_while_it_matches_the_live_template() -> None:
    text = encode_record("vllm", TEMPLATE)
    assert text is not None
    found = read_record(deployment(with_defaults(TEMPLATE), text))
    assert found is not None and (found.runtime, found.template) == ("vllm", TEMPLATE)
    edited = with_defaults(TEMPLATE)
    edited["spec"]["containers"][0]["image"] = "other:1"
    assert read_record(deployment(edited, text)) is None
    for garbage in ("not base64!", base64.b64encode(b"not zlib").decode(), ""):
        assert read_record(deployment(TEMPLATE, garbage)) is None
    bomb = base64.b64encode(zlib.compress(b"[" + b" " * (64 << 20) + b"]")).decode()
    assert read_record(deployment(TEMPLATE, bomb)) is None
    assert read_record(deployment(TEMPLATE, None)) is None


def test_a_template_change_is_seen_with_or_without_a_record() -> None:
    new = json.loads(json.dumps(TEMPLATE))
    new["spec"]["containers"][0]["args"] = ["--b"]
    live = deployment(with_defaults(TEMPLATE), encode_record("vllm", TEMPLATE))
    record = read_record(live)
    assert not template_changes({"spec": {"template": TEMPLATE}}, live, record)
    assert template_changes({"spec": {"template": new}}, live, record)
    # A field we stop setting is a change the record sees, and containment cannot.
    fewer: Any = json.loads(json.dumps(TEMPLATE))
    del fewer["metadata"]["labels"]
    assert template_changes({"spec": {"template": fewer}}, live, record)
    assert not template_changes({"spec": {"template": fewer}}, live, None)
    assert template_changes({"spec": {"template": new}}, live, None)


def test_held_keeps_the_live_template_and_what_describes_it() -> None:
    record_text = encode_record("vllm", TEMPLATE)
    live = deployment(with_defaults(TEMPLATE), record_text)
    new = json.loads(json.dumps(TEMPLATE))
    new["spec"]["containers"][0]["args"] = ["--b"]
    desired = {
        "metadata": {
            "name": "s",
            "annotations": {
                TEMPLATE_ANNOTATION: encode_record("vllm", new),
                "inference.llmkube.dev/claimed-devices": "4",
            },
        },
        "spec": {"replicas": 3, "template": new},
    }
    out = held(desired, live, read_record(live), ("inference.llmkube.dev/claimed-devices",))
    assert out is not None
    assert out["spec"] == {"replicas": 3, "template": TEMPLATE}
    assert out["metadata"]["annotations"] == {
        TEMPLATE_ANNOTATION: record_text,
        "inference.llmkube.dev/claimed-devices": "2",
    }
    assert desired["spec"]["template"] is new  # desired itself is not changed
    assert held(desired, live, None, ()) is None


def test_the_running_runtime_is_the_records_else_the_noted_one_else_the_specs() -> None:
    vllm = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    live = deployment(with_defaults(TEMPLATE), encode_record("tgi", TEMPLATE))
    live["metadata"]["annotations"][RUNTIME_ANNOTATION] = "llamacpp"
    assert running_runtime(live, read_record(live), vllm) == "tgi"
    assert running_runtime(live, None, vllm) == "llamacpp"
    live["metadata"]["annotations"][RUNTIME_ANNOTATION] = "not-a-runtime"
    assert running_runtime(live, None, vllm) == "vllm"
    del live["metadata"]["annotations"][RUNTIME_ANNOTATION]
    assert running_runtime(live, None, vllm) == "vllm"


async def test_a_change_without_a_record_asks_the_pods_in_their_own_runtime() -> None:
    """waitForIdle set in the same change as a new runtime: there is no record yet, and
    the pods still run the runtime noted beside the template we applied."""
    from controller.cache import Cache

    spec = {"modelRef": "m", "runtime": "vllm", "rolloutPolicy": {"waitForIdle": True}}
    service = parse_inference_service(spec)
    live = deployment(with_defaults(TEMPLATE), None)
    live["metadata"]["annotations"][RUNTIME_ANNOTATION] = "generic"  # it has no signal
    new = json.loads(json.dumps(TEMPLATE))
    new["spec"]["containers"][0]["args"] = ["--b"]
    isvc: Obj = {"metadata": {"name": "s", "namespace": "ns", "uid": "u"}, "spec": spec}
    decided, _ = await gate(
        Cache(), isvc, service, {"spec": {"template": new}}, live, time.time(), {}
    )
    assert decided.condition is not None
    assert decided.condition.reason == c.IDLE_CHECK_UNSUPPORTED
    assert decided.condition.message.startswith("runtime generic has no idle signal")


def test_a_realistic_template_fits_the_record() -> None:
    from reconcilers.inferenceservice.scope import scope_for
    from reconcilers.inferenceservice.workload import build_deployment

    spec = parse_inference_service(
        {
            "modelRef": "m",
            "runtime": "vllm",
            "env": [{"name": f"E{i}", "value": "v" * 40} for i in range(50)],
        }
    )
    from api import parse_model

    model = parse_model({"source": "Qwen/Qwen3-8B", "format": "safetensors"})
    isvc = {"metadata": {"name": "s", "namespace": "ns", "uid": "u"}}
    dep = build_deployment(scope_for(isvc, spec, model), 1)
    text = encode_record("vllm", dep["spec"]["template"])
    assert text is not None and len(text) < 4096, len(text or "")


# -- the spec --------------------------------------------------------------------------------


def test_the_policy_fields_parse_with_llmkubes_defaults() -> None:
    def rollout(**policy: Any) -> RolloutPolicy:
        spec = {"modelRef": "m", "runtime": "vllm", "rolloutPolicy": policy}
        return parse_inference_service(spec).fields.rollout

    assert rollout() == RolloutPolicy()
    assert not rollout().holds
    assert rollout(waitForIdle=True) == RolloutPolicy(True, DEFAULT_IDLE_TIMEOUT, False)
    assert rollout(waitForIdle=True).holds
    assert rollout(waitForIdle=True, idleTimeoutSeconds=0).idle_timeout_seconds == 300
    assert rollout(waitForIdle=True, idleTimeoutSeconds=10**30).idle_timeout_seconds == MAX_SECONDS
    assert not rollout(waitForIdle=True, force=True).holds
    spec = {"modelRef": "m", "runtime": "vllm", "maxPodLifetimeIdleTimeoutSeconds": 0}
    assert parse_inference_service(spec).fields.max_pod_lifetime_idle_timeout_seconds == 0
    unset = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    assert unset.fields.max_pod_lifetime_idle_timeout_seconds is None


def test_the_fields_are_served() -> None:
    spec = {
        "modelRef": "m",
        "rolloutPolicy": {"waitForIdle": True, "idleTimeoutSeconds": 60, "force": True},
        "maxPodLifetimeSeconds": 60,
        "maxPodLifetimeIdleTimeoutSeconds": 30,
    }
    assert inference_service_fields(spec) == []


class _Client:
    """Answers a status patch as the API server would, at resourceVersion 7."""

    async def patch(self, rt: Any, ns: str, name: str, body: Obj, subresource: str = "") -> Obj:
        return {"metadata": {"name": name, "resourceVersion": "7"}, **body}


class _Recorder:
    def emit(self, *args: Any) -> None:
        pass


async def test_the_hold_reads_the_status_last_written_not_a_stale_cache() -> None:
    """A reconcile that runs before the cache saw our write reads the write: the hold's
    outcome (e.g. ReplicasIdle) is not taken for a hold still in place."""
    from controller.resources import INFERENCE_SERVICE
    from reconcilers.inferenceservice.rollout import previous_condition
    from reconcilers.writes.conditions import Condition as Cond
    from reconcilers.writes.status import StatusWriter

    writer = StatusWriter(_Client(), _Recorder())  # type: ignore[arg-type]
    meta = {"name": "s", "namespace": "ns", "uid": "u", "resourceVersion": "5"}
    cached: Obj = {"metadata": meta, "status": {"conditions": [held_since()]}}
    went = Cond(c.ROLLOUT_DEFERRED, False, c.REPLICAS_IDLE, "every serving replica (1) is idle")
    assert await writer.write(INFERENCE_SERVICE, cached, {}, [went])
    latest = previous_condition(writer.current(cached))  # the cache still at version 5
    assert latest is not None and (latest["status"], latest["reason"]) == ("False", c.REPLICAS_IDLE)
    newer = {**cached, "metadata": {**meta, "resourceVersion": "9"}}
    assert writer.current(newer) == cached["status"]  # a newer object is read as it is
