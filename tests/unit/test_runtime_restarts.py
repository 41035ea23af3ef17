"""The runtime's restarts in an InferenceService's status: summed over its pods, and how
the last run ended in the Ready condition's message while it is not Ready."""

from __future__ import annotations

from objtypes import Obj
from reconcilers.inferenceservice.pods import runtime_restarts
from reconcilers.inferenceservice.workload import CONTAINER


def pod(*statuses: Obj) -> Obj:
    return {"status": {"containerStatuses": list(statuses)}}


def status(name: str, restarts: int, last: Obj | None = None) -> Obj:
    out: Obj = {"name": name, "restartCount": restarts}
    if last is not None:
        out["lastState"] = {"terminated": last}
    return out


def test_restarts_of_the_runtime_only_are_summed_with_the_last_ending() -> None:
    killed = {"reason": "Error", "exitCode": 137}
    pods = [
        pod(status(CONTAINER, 2, killed), status("sidecar", 5, {"reason": "OOMKilled"})),
        pod(status(CONTAINER, 1, {"reason": "Completed", "exitCode": 0})),
        {"status": {}},
    ]
    assert runtime_restarts(pods, CONTAINER) == (3, "Error, exit code 137")


def test_no_restarts_say_nothing() -> None:
    assert runtime_restarts([pod(status(CONTAINER, 0))], CONTAINER) == (0, "")
    assert runtime_restarts([], CONTAINER) == (0, "")
