"""llama.cpp specs llama-server would exit on are refused, naming the field; flash attention
is served on CPU models; llama.cpp pods get a liveness probe.

tests/unit/test_llama_server_real.py shows the same specs failing (and the accepted ones
serving) under the real llama-server.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_llamacpp_checks.py.
"""

from __future__ import annotations

import pytest

from controller.errors import ApiError
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE
from runtimes.problems import INVALID_RUNTIME_CONFIG
from tests.support.manifests import isvc_yaml, reapply
from tests.support.waiting import wait_condition

GGUF = "https://example.com/m.gguf"  # the loader puts it at /models/m.gguf
CPU_MODEL_YAML = f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: m}}
spec:
  source: {GGUF}
  format: gguf
  hardware: {{accelerator: cpu}}
"""


async def test_the_apiserver_refuses_an_unknown_cache_type(kube: KubeClient) -> None:
    await reapply(kube, CPU_MODEL_YAML)
    with pytest.raises(ApiError) as e:
        await reapply(kube, isvc_yaml("svc", "m", "llamacpp", "  cacheTypeK: fp8"))
    assert e.value.status == 422 and "spec.cacheTypeK" in str(e.value)
    with pytest.raises(ApiError) as e:
        await reapply(
            kube, isvc_yaml("svc", "m", "llamacpp", "  cacheTypeV: q8_0\n  flashAttention: false")
        )
    assert e.value.status == 422 and "spec.cacheTypeV" in str(e.value)


async def test_reconcile_refuses_a_bad_cache_type_in_extra_args(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, CPU_MODEL_YAML)
    await reapply(kube, isvc_yaml("svc", "m", "llamacpp", "  extraArgs: [-ctk, fp8]"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "Ready", "False", INVALID_RUNTIME_CONFIG
    )
    ready = next(c for c in isvc["status"]["conditions"] if c["type"] == "Ready")
    assert "spec.cacheTypeK (or --cache-type-k in extraArgs): 'fp8'" in ready["message"]
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
