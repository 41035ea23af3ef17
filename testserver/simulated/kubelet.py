"""The kubelet: a bound pod's model loader run (testserver/loader_sim.py), then Running
and Ready; a failed loader in CrashLoopBackOff; a prefetch Job's pod ends with its loader."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from objtypes import Obj

from ..loader_sim import HOLD_ANNOTATION, LOADER, Volumes, loader_of, run_loader
from ..storage import Storage, now_iso
from .common import Component, claim_status_fields


class Kubelet(Component):
    def __init__(self, storage: Storage, wake: Callable[[], None]) -> None:
        super().__init__(storage)
        self.wake = wake  # a held loader finished: the cluster catches up
        # The model loader's simulated volumes, each pod's loader result (exit code,
        # termination message) and when a held loader finishes (loop time).
        self.volumes = Volumes()
        self._loaded: dict[str, tuple[int, str]] = {}
        self._holds: dict[str, float] = {}

    def run(self, pod: Obj) -> None:
        loader = loader_of(pod["spec"])
        init: list[Obj] = []
        if loader is not None:
            result = self._load(pod, loader)
            is_job = loader in (pod["spec"].get("containers") or [])
            if result is None:  # held: the loader is still running
                running = [
                    {
                        "name": LOADER,
                        "ready": False,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now_iso()}},
                    }
                ]
                key = "containerStatuses" if is_job else "initContainerStatuses"
                self._pod_phase(pod, "Pending" if not is_job else "Running", {key: running})
                return
            code, message = result
            term = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "message": message,
                "finishedAt": now_iso(),
            }
            if is_job:  # restartPolicy Never: the pod ends with its loader
                done = [
                    {
                        "name": LOADER,
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": term},
                    }
                ]
                phase = "Succeeded" if code == 0 else "Failed"
                self._pod_phase(pod, phase, {"containerStatuses": done})
                return
            if code != 0:
                failed = {
                    "name": LOADER,
                    "ready": False,
                    "restartCount": 1,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": term},
                }
                self._pod_phase(pod, "Pending", {"initContainerStatuses": [failed]})
                return
            init = [
                {"name": LOADER, "ready": True, "restartCount": 0, "state": {"terminated": term}}
            ]
        status: Obj = {
            **claim_status_fields(pod),
            "phase": "Running",
            "startTime": now_iso(),
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
        }
        if init:
            status["initContainerStatuses"] = init
        self.set_status(pod, status)

    def _pod_phase(self, pod: Obj, phase: str, statuses: Obj) -> None:
        self.set_status(
            pod,
            {
                **claim_status_fields(pod),
                "phase": phase,
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False"},
                ],
                **statuses,
            },
        )

    def _load(self, pod: Obj, loader: Obj) -> tuple[int, str] | None:
        """The pod's loader result, run once; None while a held loader still runs."""
        uid = pod["metadata"]["uid"]
        if uid in self._loaded:
            return self._loaded[uid]
        hold = float((pod["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION) or 0)
        if hold > 0:
            loop = asyncio.get_running_loop()
            if uid not in self._holds:
                self._holds[uid] = loop.time() + hold
                loop.call_later(hold, self._wake)
            if loop.time() < self._holds[uid]:
                return None
        code, message = run_loader(self.volumes, pod, loader)
        self._loaded[uid] = (code, json.dumps(message, separators=(",", ":")))
        return self._loaded[uid]

    def _wake(self) -> None:
        self.wake()
