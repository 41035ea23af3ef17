"""Watch predicates: a reconciler's own status writes do not wake it again; spec,
labels, annotations and deletion do; secondary watches see every change.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_predicates.py.
"""

from __future__ import annotations

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import MODEL
from tests.support.manager import reconciles
from tests.support.manifests import isvc_yaml, model_yaml
from tests.support.waiting import wait_condition

CPU = "      enabled: false"


async def test_own_status_write_costs_no_reconcile(kube: KubeClient, controller: Manager) -> None:
    await apply_text(kube, model_yaml("m", CPU))
    await wait_condition(kube, MODEL, "m", "Ready", "True")
    await controller.wait_idle()
    # Created once, reconciled once: the status echo was filtered.
    assert reconciles(controller, "model") == 1

    obj = await kube.get(MODEL, "default", "m")
    assert obj is not None
    await kube.patch(MODEL, "default", "m", {"metadata": {"labels": {"team": "a"}}})
    await controller.wait_idle()
    assert reconciles(controller, "model") == 2

    await kube.patch(MODEL, "default", "m", {"spec": {"format": "gguf"}})
    await controller.wait_idle()
    assert reconciles(controller, "model") == 3
    obj = await kube.get(MODEL, "default", "m")
    assert obj is not None
    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["observedGeneration"] == 2


async def test_secondary_watches_still_see_status_changes(
    kube: KubeClient, controller: Manager
) -> None:
    # The InferenceService reconciler watches Models without predicates: a Model's status
    # change (it becoming Ready) must reach it, while the Model reconciler ignores it.
    await apply_text(kube, model_yaml("m", CPU))
    await apply_text(kube, isvc_yaml("svc", "m"))
    await wait_condition(kube, MODEL, "m", "Ready", "True")
    await controller.wait_idle()
    models, services = reconciles(controller, "model"), reconciles(controller, "inferenceservice")
    await kube.patch(MODEL, "default", "m", {"status": {"phase": "Pending"}}, subresource="status")
    await controller.wait_idle()
    assert reconciles(controller, "model") == models
    assert reconciles(controller, "inferenceservice") == services + 1
