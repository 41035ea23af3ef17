"""How each runtime says whether it is serving a request: rolloutPolicy.waitForIdle's signal.

LLMKube's idle detection, per runtime (its IdleProbe implementations):
  - llama.cpp: `GET /slots`, a JSON list of slots; idle when no slot `is_processing`.
    A server started with `--no-slots` answers 501: it has no idle detection.
  - vLLM: `GET /metrics`, the gauge `vllm:num_requests_running` summed over its series.
  - TGI: `GET /metrics`, the gauge `tgi_batch_current_size`.
  - SGLang: `GET /metrics`, the gauge `sglang:num_running_reqs` summed over its series.
A gauge's value of 0 is idle. The running gauges only: a request still queued while none
runs is not seen (as in LLMKube; waiting for the queue could hold a busy service forever).

Pure: what to ask, and what an answer means (`read_answer`); the HTTP request is the
reconciler's (reconcilers/inferenceservice/idle.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

IDLE, BUSY, UNKNOWN, UNSUPPORTED = "idle", "busy", "unknown", "unsupported"


@dataclass(frozen=True)
class IdleSignal:
    path: str
    gauge: str | None = None  # None: llama.cpp's /slots


@dataclass(frozen=True)
class Reading:
    """One replica's answer: IDLE, BUSY (`detail`: how many requests), UNKNOWN (the
    answer could not be read: `detail` says why) or UNSUPPORTED (the runtime has no
    idle signal: `detail` says why)."""

    state: str
    detail: str = ""


SIGNALS: dict[str, IdleSignal] = {
    "llamacpp": IdleSignal("/slots"),
    "vllm": IdleSignal("/metrics", "vllm:num_requests_running"),
    "tgi": IdleSignal("/metrics", "tgi_batch_current_size"),
    "sglang": IdleSignal("/metrics", "sglang:num_running_reqs"),
}


def signal_for(runtime: str) -> IdleSignal | None:
    """The runtime's idle signal; None: it has none (every served runtime has one)."""
    return SIGNALS.get(runtime)


def read_answer(signal: IdleSignal, status: int, body: bytes) -> Reading:
    """What an HTTP answer to signal.path means."""
    if signal.gauge is None and status == 501:
        return Reading(UNSUPPORTED, "/slots is turned off (llama.cpp --no-slots)")
    if status != 200:
        return Reading(UNKNOWN, f"{signal.path} answered HTTP {status}")
    text = body.decode("utf-8", errors="replace")
    if signal.gauge is None:
        return _slots(text)
    total = gauge_sum(text, signal.gauge)
    if total is None:
        # A gauge may first appear when a request has run (a metric made on first use),
        # and vLLM with --disable-log-stats has none: nothing it can tell either way.
        return Reading(
            UNSUPPORTED,
            f"/metrics has no {signal.gauge} (no request has run yet, or its metrics are off)",
        )
    if math.isnan(total):
        return Reading(UNKNOWN, f"{signal.gauge} is NaN")
    if total == 0:
        return Reading(IDLE)
    return Reading(BUSY, f"{signal.gauge} {total:g}")


def _slots(text: str) -> Reading:
    try:
        slots = json.loads(text)
    except (ValueError, RecursionError):
        return Reading(UNKNOWN, "/slots is not JSON")
    if not isinstance(slots, list) or not all(
        isinstance(s, dict) and isinstance(s.get("is_processing"), bool) for s in slots
    ):
        return Reading(UNKNOWN, "/slots is not a list of slots with is_processing")
    busy = sum(s["is_processing"] for s in slots)
    if busy:
        return Reading(BUSY, f"{busy} of {len(slots)} slot(s) processing")
    return Reading(IDLE)


def gauge_sum(text: str, name: str) -> float | None:
    """The sum of the samples of metric `name` in Prometheus text exposition format;
    None when it has none. `name{labels} value [timestamp]`: the label block is skipped
    as quoted text (a label value may hold spaces, braces and escaped quotes)."""
    total: float | None = None
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        rest = line[len(name) :]
        if rest.startswith("{"):
            end = _label_block_end(rest)
            if end < 0:
                continue
            rest = rest[end + 1 :]
        elif not rest[:1].isspace():
            continue  # another metric whose name starts with this one
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        total = value if total is None else total + value
    return total


def _label_block_end(text: str) -> int:
    """The index of the `}` closing the label block that text starts with; -1: none."""
    quoted = escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "}" and not quoted:
            return i
    return -1
