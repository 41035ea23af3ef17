"""Which events of an InferenceService's own objects wake it: not our own writes coming
back through the watch, nor updates of what a reconcile does not read; every change it
reads does (reconcilers/writes/apply.py OwnWrites, reconcilers/inferenceservice/
predicates.py).

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_owned_events.py.
"""

from __future__ import annotations

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import (
    DEPLOYMENT,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    POD_DISRUPTION_BUDGET,
    RESOURCE_CLAIM_TEMPLATE,
    SERVICE,
    ResourceType,
)
from objtypes import Obj
from tests.support.manager import manager_for, reconciles
from tests.support.manifests import DRA_CLUSTER_YAML, isvc_yaml, model_yaml
from tests.support.waiting import eventually, wait_condition
from testserver.process import ApiServerProcess

CPU = "      enabled: false"


async def _gone(kube: KubeClient, rt: ResourceType, name: str) -> bool:
    return await kube.get(rt, "default", name) is None


def service_pod(i: int) -> Obj:
    name = f"svc-{i}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-7d9f8-x{i}",
            "namespace": "default",
            "labels": {
                "app.kubernetes.io/managed-by": "llmkube",
                "inference.llmkube.dev/inferenceservice": name,
            },
        },
        "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]},
    }


async def test_services_whose_pods_exist_reconcile_once_each_and_real_changes_wake_them(
    apiserver: ApiServerProcess, kube: KubeClient
) -> None:
    """Before: the pods' start-up events reconciled services not created yet, and the
    Deployment, Service and PodDisruptionBudget each service made came back through the
    watch to reconcile it again (3 per service)."""
    await apply_text(kube, model_yaml("m", CPU))
    for i in range(3):
        await kube.create(POD, service_pod(i))
    manager = manager_for(kube)
    await manager.start()
    try:
        await manager.wait_synced()
        await wait_condition(kube, MODEL, "m", "Ready", "True")
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 0
        for i in range(3):
            await apply_text(kube, isvc_yaml(f"svc-{i}", "m"))
        for i in range(3):
            await wait_condition(kube, INFERENCE_SERVICE, f"svc-{i}", "ModelResolved", "True")
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 3

        # What the Deployment controller writes for itself wakes nothing...
        for patch in (
            {"status": {"conditions": [{"type": "Progressing", "status": "True"}]}},
            {"metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}}},
        ):
            sub = "status" if "status" in patch else ""
            await kube.patch(DEPLOYMENT, "default", "svc-0", patch, subresource=sub)
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 3

        # ...its replicas becoming ready do, and reach the service's status.
        ready = {"status": {"replicas": 1, "readyReplicas": 1}}
        await kube.patch(DEPLOYMENT, "default", "svc-0", ready, subresource="status")
        await wait_condition(kube, INFERENCE_SERVICE, "svc-0", "Ready", "True")
        # Ready ends the startup protection: that reconcile deletes the budget, whose
        # DELETED event wakes the service once more (deletes always pass).
        await eventually(
            lambda: _gone(kube, POD_DISRUPTION_BUDGET, "svc-0"), what="the budget deleted"
        )
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 5

        # A label of ours taken off the Service is put back.
        label = "app.kubernetes.io/managed-by"
        unlabel = {"metadata": {"labels": {"inference.llmkube.dev/model": None}}}
        await kube.patch(SERVICE, "default", "svc-1", unlabel)

        async def relabelled() -> bool:
            live = await kube.get(SERVICE, "default", "svc-1")
            labels = (live or {}).get("metadata", {}).get("labels") or {}
            return labels.get("inference.llmkube.dev/model") == "m" and label in labels

        await eventually(relabelled, what="the Service's label put back")
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "inferenceservice") == 6
    finally:
        await manager.stop()


async def test_a_managed_template_coming_back_through_the_watch_wakes_nothing(
    apiserver: ApiServerProcess, kube: KubeClient
) -> None:
    """A GPU Model without claims where the GPUs come only through DRA: each service's
    reconcile applies a ResourceClaimTemplate made for it (reconcilers/devices/managed.py),
    whose ADDED event woke the service a second time (2 reconciles per service)."""
    await apply_text(kube, DRA_CLUSTER_YAML)
    await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    manager = manager_for(kube)
    await manager.start()
    try:
        await manager.wait_synced()
        await manager.wait_idle(settle=0.3)
        for i in range(3):
            await apply_text(kube, isvc_yaml(f"svc-{i}", "m"))
        for i in range(3):
            await wait_condition(kube, INFERENCE_SERVICE, f"svc-{i}", "DeviceCount", "True")
        await manager.wait_idle(settle=0.3)
        templates, _ = await kube.list(RESOURCE_CLAIM_TEMPLATE, "default")
        assert len(templates) == 3
        assert reconciles(manager, "inferenceservice") == 3
    finally:
        await manager.stop()


async def test_a_pods_runtime_status_wakes_no_model_and_its_loaders_does(
    apiserver: ApiServerProcess, kube: KubeClient
) -> None:
    """A Model reads its pods' loader reports (reconcilers/model/delivery.py): a serving
    pod's phase, conditions and runtime container reconciled every Model it names, once
    per pod update."""
    await apply_text(kube, model_yaml("m", CPU))
    pod = service_pod(0)
    pod["metadata"]["labels"]["inference.llmkube.dev/model"] = "m"
    pod["spec"]["initContainers"] = [{"name": "model-loader", "image": "busybox"}]
    await kube.create(POD, pod)
    manager = manager_for(kube)
    await manager.start()
    try:
        await manager.wait_synced()
        await wait_condition(kube, MODEL, "m", "Ready", "True")
        await manager.wait_idle(settle=0.3)
        before = reconciles(manager, "model")
        name = pod["metadata"]["name"]
        for ready in ("False", "True"):
            status = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": ready}],
                "containerStatuses": [{"name": "vllm", "ready": ready == "True"}],
            }
            await kube.patch(POD, "default", name, {"status": status}, subresource="status")
        await manager.wait_idle(settle=0.3)
        assert reconciles(manager, "model") == before
        loading = [{"name": "model-loader", "state": {"running": {}}}]
        patch = {"status": {"initContainerStatuses": loading}}
        await kube.patch(POD, "default", name, patch, subresource="status")
        await eventually(lambda: _reconciled(manager, before + 1), what="the Model reconciled once")
    finally:
        await manager.stop()


async def _reconciled(manager: Manager, count: float) -> bool:
    return reconciles(manager, "model") >= count
