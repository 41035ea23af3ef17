"""spec.rolloutPolicy: a pod-template change waits until every replica is idle.

With `waitForIdle` (and not `force`), a change of the Deployment's pod template (which
restarts every pod: with a GPU's Recreate strategy all at once) is held while a replica
is serving a request, as LLMKube's drain-before-roll does. Each reconcile asks every
serving replica (idle.py); the change goes ahead when all are idle, or when
`idleTimeoutSeconds` (default 300; 0 reads as the default, as in LLMKube) have passed
since the hold began. While held, the reconcile is run again every CHECK_INTERVAL
seconds (sooner when the timeout is nearer), never looping in place.

Held means: the Deployment is applied with everything it would get (replicas, so the
GPUQuota and an autoscaler still size it, labels, strategy) except the pod template,
which stays the one the Deployment runs. That template is known exactly from
TEMPLATE_ANNOTATION, the template (and runtime) we last applied, compressed, on the
Deployment, written while `waitForIdle` is set; it is used only while it still matches
the Deployment's template (an edited or missing record, as when `waitForIdle` comes in
the same change as the template's, leaves the whole Deployment as it is until the hold
ends; the pods are then asked in the runtime of RUNTIME_ANNOTATION, which every
Deployment carries).

Status: the condition RolloutDeferred (LLMKube's type and reasons): True while held,
reason PodsBusy (a replica is busy) or IdleCheckFailed (a replica's answer could not be
read: it might be busy), the message naming the pods and the seconds left. It turns False
as the change goes ahead, reason ReplicasIdle, IdleTimeoutExceeded (a Warning Event
naming the replicas still busy), IdleCheckUnsupported (a replica or the runtime has no
idle signal, e.g. llama.cpp with --no-slots: the change is not held for it) or Forced;
and otherwise keeps saying how the last held change went. The hold's start is the
condition's lastTransitionTime, so a controller restart does not restart the timeout.
"""

from __future__ import annotations

import base64
import copy
import json
import zlib
from dataclasses import dataclass
from datetime import datetime

from api import InferenceServiceSpec
from api import conditions as c
from api.inferenceservice import RUNTIMES
from api.podfields import RolloutPolicy
from controller.cache import Cache
from controller.jsondepth import TooDeep, loads
from objtypes import Obj
from reconcilers.inferenceservice import idle
from reconcilers.inferenceservice.pods import live_pods, service_pods
from reconcilers.writes.apply import contains
from reconcilers.writes.conditions import Condition, find
from runtimes.idle import BUSY, UNKNOWN, UNSUPPORTED, Reading, signal_for

TEMPLATE_ANNOTATION = "inference.llmkube.dev/pod-template"
# The runtime of the template we applied, on every Deployment: the idle signal to ask
# the running pods with when there is no record (waitForIdle set in the same change).
RUNTIME_ANNOTATION = "inference.llmkube.dev/runtime"
CHECK_INTERVAL = 5.0  # LLMKube's DefaultIdleCheckInterval
MAX_RECORD = 64 << 10  # encoded; a larger template is not recorded (annotations: 256 kB)
MAX_TEMPLATE = 4 << 20  # decoded: a record that inflates past this is not read
NAMED = 10  # pods named in a message; the rest are counted


@dataclass(frozen=True)
class Record:
    runtime: str
    template: Obj


@dataclass(frozen=True)
class Gate:
    """What the rollout policy decided for this reconcile's Deployment."""

    hold: bool = False  # keep the Deployment's pod template
    condition: Condition | None = None  # RolloutDeferred, when there is one to write
    requeue: float = 0.0  # seconds until the next look (0: none asked)


# -- the record of the template we applied ------------------------------------------------


def encode_record(runtime: str, template: Obj) -> str | None:
    blob = json.dumps({"runtime": runtime, "template": template}, sort_keys=True)
    # Level 1: a template with the loader's script is some 30 kB of JSON, encoded on every
    # reconcile; level 9 takes three times as long for a record 13% shorter.
    text = base64.b64encode(zlib.compress(blob.encode(), 1)).decode()
    return text if len(text) <= MAX_RECORD else None


def record_template(desired: Obj, runtime: str) -> None:
    """Put the record of desired's pod template on desired (in place)."""
    text = encode_record(runtime, desired["spec"]["template"])
    if text is not None:
        desired["metadata"].setdefault("annotations", {})[TEMPLATE_ANNOTATION] = text


def read_record(live: Obj) -> Record | None:
    """The record on a live Deployment, if it is readable and describes the template the
    Deployment has (someone may have edited either)."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_ANNOTATION)
    if not isinstance(text, str) or len(text) > MAX_RECORD:
        return None
    try:
        inflate = zlib.decompressobj()
        blob = inflate.decompress(base64.b64decode(text, validate=True), MAX_TEMPLATE)
        if inflate.unconsumed_tail:
            return None
        data = loads(blob)
    except (ValueError, zlib.error, TooDeep, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    runtime, template = data.get("runtime"), data.get("template")
    if not isinstance(runtime, str) or not isinstance(template, dict):
        return None
    if not contains(template, (live.get("spec") or {}).get("template")):
        return None
    return Record(runtime, template)


def template_changes(desired: Obj, live: Obj, record: Record | None) -> bool:
    """Would applying desired change the live Deployment's pod template?"""
    template = desired["spec"]["template"]
    if record is not None:
        return _canonical(record.template) != _canonical(template)
    return not contains(template, (live.get("spec") or {}).get("template"))


def _canonical(obj: Obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def held(desired: Obj, live: Obj, record: Record | None, kept: tuple[str, ...]) -> Obj | None:
    """desired with the live pod template (and the annotations in `kept` that describe it,
    as the live Deployment has them); None when the template is not known: then the
    Deployment is not written at all."""
    if record is None:
        return None
    out = copy.deepcopy(desired)
    out["spec"]["template"] = copy.deepcopy(record.template)
    annotations = out["metadata"].setdefault("annotations", {})
    have = (live.get("metadata") or {}).get("annotations") or {}
    for key in (TEMPLATE_ANNOTATION, *kept):
        if key in have:
            annotations[key] = have[key]
        else:
            annotations.pop(key, None)
    return out


# -- the decision --------------------------------------------------------------------------


def _seconds(timestamp: object) -> float | None:
    if not isinstance(timestamp, str):
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _names(pods: list[tuple[str, Reading]]) -> str:
    shown = ", ".join(f"{name} ({r.detail})" if r.detail else name for name, r in pods[:NAMED])
    more = len(pods) - NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def previous_condition(status: Obj) -> Obj | None:
    """The RolloutDeferred condition of a status."""
    return find(status.get("conditions") or [], c.ROLLOUT_DEFERRED)


def _kept(previous: Obj | None) -> Condition | None:
    """The condition as it stands (how the last held change went)."""
    if previous is None:
        return None
    return Condition(
        c.ROLLOUT_DEFERRED,
        previous.get("status") == "True",
        str(previous.get("reason") or c.NO_ROLLOUT_PENDING),
        str(previous.get("message") or ""),
    )


def settled(previous: Obj | None, policy: RolloutPolicy) -> Condition | None:
    """No pod-template change to make."""
    if previous is None:
        if not policy.holds:
            return None
        return Condition(
            c.ROLLOUT_DEFERRED,
            False,
            c.NO_ROLLOUT_PENDING,
            "rolloutPolicy.waitForIdle: no pod-template change is waiting",
        )
    if previous.get("status") == "True":
        return Condition(
            c.ROLLOUT_DEFERRED,
            False,
            c.NO_ROLLOUT_PENDING,
            "the held pod-template change is no longer wanted: nothing is waiting",
        )
    return _kept(previous)


def unheld(previous: Obj | None, policy: RolloutPolicy) -> Condition | None:
    """A pod-template change that the policy does not hold."""
    if policy.wait_for_idle and policy.force:
        return Condition(
            c.ROLLOUT_DEFERRED,
            False,
            c.FORCED,
            "rolloutPolicy.force: the pod-template change is applied without waiting for "
            "idle replicas",
        )
    if previous is not None and previous.get("status") == "True":
        return Condition(
            c.ROLLOUT_DEFERRED,
            False,
            c.WAIT_FOR_IDLE_OFF,
            "rolloutPolicy.waitForIdle is not set: the held pod-template change is applied",
        )
    return _kept(previous)


def decide(
    previous: Obj | None, policy: RolloutPolicy, readings: dict[str, Reading], now: float
) -> Gate:
    """Hold or go, from each serving replica's reading; pure (now: wall-clock seconds)."""
    found = sorted(readings.items())
    busy = [(n, r) for n, r in found if r.state == BUSY]
    unknown = [(n, r) for n, r in found if r.state == UNKNOWN]
    unsupported = [(n, r) for n, r in found if r.state == UNSUPPORTED]
    if not busy and not unknown:
        if unsupported:
            message = (
                f"no idle signal from {_names(unsupported)}: the pod-template change is "
                "applied without waiting for them"
            )
            return Gate(
                False, Condition(c.ROLLOUT_DEFERRED, False, c.IDLE_CHECK_UNSUPPORTED, message)
            )
        message = (
            f"every serving replica ({len(found)}) is idle: the pod-template change is applied"
            if found
            else "no replica is serving: the pod-template change is applied"
        )
        return Gate(False, Condition(c.ROLLOUT_DEFERRED, False, c.REPLICAS_IDLE, message))
    timeout = policy.idle_timeout_seconds
    since = now
    if previous is not None and previous.get("status") == "True":
        since = _seconds(previous.get("lastTransitionTime")) or now
    left = since + timeout - now
    waiting = "; ".join(
        part
        for part in (
            f"busy: {_names(busy)}" if busy else "",
            f"cannot tell: {_names(unknown)}" if unknown else "",
        )
        if part
    )
    if left <= 0:
        message = (
            f"rolloutPolicy.idleTimeoutSeconds ({timeout}s) passed with replicas not idle "
            f"({waiting}): the pod-template change is applied"
        )
        return Gate(False, Condition(c.ROLLOUT_DEFERRED, False, c.IDLE_TIMEOUT_EXCEEDED, message))
    reason = c.PODS_BUSY if busy else c.IDLE_CHECK_FAILED
    message = (
        f"the pod-template change waits until every replica is idle, at most {left:.0f}s "
        f"more (idleTimeoutSeconds {timeout}): {waiting}"
    )
    return Gate(
        True, Condition(c.ROLLOUT_DEFERRED, True, reason, message), min(CHECK_INTERVAL, left)
    )


def note_runtime(desired: Obj, runtime: str) -> None:
    """Put the runtime of desired's pod template on desired (in place)."""
    desired["metadata"].setdefault("annotations", {})[RUNTIME_ANNOTATION] = runtime


def running_runtime(live: Obj, record: Record | None, service: InferenceServiceSpec) -> str:
    """The runtime the live pods run: the record's; else the one noted beside the
    template we applied; else (neither, or a value no runtime has) the spec's."""
    if record is not None:
        return record.runtime
    noted = ((live.get("metadata") or {}).get("annotations") or {}).get(RUNTIME_ANNOTATION)
    return noted if noted in RUNTIMES else service.runtime


def runtime_of(live: Obj, service: InferenceServiceSpec) -> str:
    return running_runtime(live, read_record(live), service)


async def gate(
    cache: Cache,
    isvc: Obj,
    service: InferenceServiceSpec,
    desired: Obj,
    live: Obj | None,
    now: float,
    status: Obj,
    describing: tuple[str, ...] = (),
) -> tuple[Gate, Obj | None]:
    """The policy's decision, and the Deployment to apply (desired, the held version of
    it, or None: leave the Deployment as it is). `status`: the service's status as last
    written (the cache may lag behind our own write); `describing`: desired's
    annotations that describe its pod template, kept as the live Deployment has them
    while held."""
    policy = service.fields.rollout
    previous = previous_condition(status)
    if previous is None and not policy.wait_for_idle:
        return Gate(), desired  # no policy, and no condition of one to keep up to date
    record = read_record(live) if live is not None else None
    if live is None or not template_changes(desired, live, record):
        return Gate(False, settled(previous, policy)), desired
    if not policy.holds:
        return Gate(False, unheld(previous, policy)), desired
    runtime = running_runtime(live, record, service)
    signal = signal_for(runtime)
    if signal is None:
        message = (
            f"runtime {runtime} has no idle signal: the pod-template change is applied "
            "without waiting"
        )
        return Gate(
            False, Condition(c.ROLLOUT_DEFERRED, False, c.IDLE_CHECK_UNSUPPORTED, message)
        ), desired
    readings = await idle.probe(idle.replicas(live_pods(service_pods(cache, isvc))), signal)
    decided = decide(previous, policy, readings, now)
    if not decided.hold:
        return decided, desired
    kept = held(desired, live, record, describing)
    if kept is None and decided.condition is not None:
        note = (
            "; the Deployment is left as it is until then (its pod template was not "
            "recorded by this controller)"
        )
        condition = decided.condition
        decided = Gate(
            True,
            Condition(condition.type, True, condition.reason, condition.message + note),
            decided.requeue,
        )
    return decided, kept
