"""Issue 27, items 7 and 12-19: every accepted pod starts under the real runtime.

extraArgs are read as each runtime's parser reads them (argparse abbreviations and
attached short values, clap's `-p9000`, llama.cpp's exact spellings), and what would
make the runtime exit or never serve is refused by the reconcile and the webhook alike,
naming the field. The checks run on the objects the controller builds (runtime_problems,
pod_spec) and on the webhook's verdict; the server-tier case reconciles for real.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_runtime_argv.py.
"""

from __future__ import annotations

from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE
from tests.support.manifests import isvc_yaml, model_yaml, reapply
from tests.support.waiting import wait_condition

# -- The reconcile says what the webhook says ------------------------------------------


async def test_a_refused_argv_is_reported_and_no_workload_is_written(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await reapply(kube, isvc_yaml("svc", "m", runtime="tgi", extra='  extraArgs: ["--num-shard"]'))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "RuntimeConfigured", "False", "InvalidRuntimeConfig"
    )
    ready = next(c for c in isvc["status"]["conditions"] if c["type"] == "Ready")
    assert ready["message"].startswith("spec.extraArgs[0]: --num-shard takes a value")
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
