"""kopf doing the product's job for the comparison: one status write per Model.

Run by the bench as `python -m kopf run bench/kopf_operator.py --standalone -A`, with
BENCH_SERVER naming the test API server, or KUBECONFIG a real apiserver's kubeconfig
(its CA and client certificate, read by kopf's own kubeconfig login). An event handler
with a guard is kopf's cheapest form (no handler progress or last-handled annotations);
Event posting is off, as in the measurements issue 15 quotes.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import kopf


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    if "BENCH_SERVER" in os.environ:
        return kopf.ConnectionInfo(server=os.environ["BENCH_SERVER"], insecure=True)
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.enabled = False
    settings.watching.server_timeout = 3600


@kopf.on.event("inference.llmkube.dev", "v1alpha1", "models")
async def model_seen(
    type: str, body: kopf.Body, meta: kopf.Meta, patch: kopf.Patch, **_: Any
) -> None:
    if type == "DELETED" or body.get("status", {}).get("conditions"):
        return
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    gen = meta.get("generation", 1)
    gpu = body.get("spec", {}).get("hardware", {}).get("gpu") or {}
    patch.status["phase"] = "Ready"
    patch.status["gpu"] = {
        "count": gpu.get("count", 1),
        "claims": [],
        "attachment": "device-plugin",
    }
    patch.status["observedGeneration"] = gen
    patch.status["conditions"] = [
        {
            "type": t,
            "status": "True",
            "reason": t,
            "message": "written by kopf",
            "lastTransitionTime": now,
            "observedGeneration": gen,
        }
        for t in ("AcceleratorReady", "Ready")
    ]
