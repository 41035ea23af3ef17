"""Model source schemes served as LLMKube does (issue 20 item 1): pvc://, hf://, file:// and
absolute paths, s3://. Each is served with the volume and argument its runtime needs, or
refused with a condition (and at admission) naming spec.source.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_model_sources.py.
"""

from __future__ import annotations

import pytest

from app.controllers import reconcilers
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, MODEL
from objtypes import Obj
from reconcilers.settings import Settings
from tests.support.manifests import reapply
from tests.support.model_sources import HOSTILE, ROOTS, value
from tests.support.waiting import eventually, wait_condition


async def test_the_crd_refuses_a_hostile_source_without_the_webhook(kube: KubeClient) -> None:
    for i, (spec, field) in enumerate(HOSTILE):
        model = {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": f"hostile-{i}", "namespace": "default"},
            "spec": spec,
        }
        with pytest.raises(ApiError) as e:
            await kube.create(MODEL, model)
        assert e.value.status == 422 and field in e.value.message, (spec, e.value.message)
    # Sources as LLMKube's samples write them are admitted.
    for i, source in enumerate(["https://h/m/x.gguf?download=true", "hf://org/r@refs/pr/1"]):
        ok: Obj = {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": f"ok-{i}", "namespace": "default"},
            "spec": {"source": source},
        }
        await kube.create(MODEL, ok)


LOCAL_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: local}
spec:
  source: /mnt/models/m.gguf
  format: gguf
"""
LOCAL_SERVICE = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: svc}
spec: {modelRef: local, runtime: llamacpp}
"""


async def _controller(kube: KubeClient, roots: tuple[str, ...]) -> Manager:
    config = ManagerConfig(http_port=0, http_host="127.0.0.1", workers=2, watch_timeout=30)
    manager = Manager(
        kube, config, reconcilers=reconcilers(Settings(allowed_host_path_roots=roots))
    )
    await manager.start()
    await manager.wait_synced()
    return manager


async def test_reconcile_refuses_a_host_path_by_default(kube: KubeClient) -> None:
    manager = await _controller(kube, ())
    try:
        await reapply(kube, LOCAL_MODEL)
        await reapply(kube, LOCAL_SERVICE)
        model = await wait_condition(kube, MODEL, "local", "Ready", "False", "SourceNotAllowed")
        assert model["status"]["phase"] == "Failed"
        isvc = await wait_condition(
            kube, INFERENCE_SERVICE, "svc", "ModelResolved", "False", "SourceNotAllowed"
        )
        message = next(c for c in isvc["status"]["conditions"] if c["type"] == "ModelResolved")
        assert "Model 'local' spec.source: '/mnt/models/m.gguf'" in message["message"]
        assert await kube.get(DEPLOYMENT, "default", "svc") is None
    finally:
        await manager.stop()


async def test_reconcile_serves_a_host_path_under_an_allowed_root(kube: KubeClient) -> None:
    manager = await _controller(kube, ROOTS)
    try:
        await reapply(kube, LOCAL_MODEL)
        await reapply(kube, LOCAL_SERVICE)
        await wait_condition(kube, MODEL, "local", "Ready", "True")

        async def deployment() -> Obj | None:
            return await kube.get(DEPLOYMENT, "default", "svc")

        live = await eventually(deployment, what="Deployment svc")
        spec = live["spec"]["template"]["spec"]
        assert spec["volumes"] == [
            {"name": "host-model", "hostPath": {"path": "/mnt/models/m.gguf", "type": "File"}}
        ]
        assert value(spec["containers"][0]["args"], "--model") == "/mnt/models/m.gguf"
    finally:
        await manager.stop()
