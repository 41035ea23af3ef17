"""spec.autoscaling: an HPA on the InferenceService's scale subresource, capped by GPUQuota.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_autoscaling.py.
"""

from __future__ import annotations

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, HORIZONTAL_POD_AUTOSCALER, INFERENCE_SERVICE
from objtypes import Obj
from tests.support.manifests import isvc_yaml, model_yaml, quota_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition

GPU = "      enabled: true\n      count: 1"
SCALING = "  autoscaling: {minReplicas: 1, maxReplicas: 4}"


async def hpa(kube: KubeClient, name: str, present: bool = True) -> Obj | None:
    async def probe() -> Obj | bool | None:
        found = await kube.get(HORIZONTAL_POD_AUTOSCALER, "default", name)
        if present:
            return found
        return True if found is None else None

    found = await eventually(probe, what=f"HPA {name} {'present' if present else 'gone'}")
    return found if isinstance(found, dict) else None


async def deployment_replicas(kube: KubeClient, name: str, replicas: int) -> Obj:
    async def probe() -> Obj | None:
        dep = await kube.get(DEPLOYMENT, "default", name)
        return dep if dep and dep["spec"].get("replicas") == replicas else None

    return await eventually(probe, what=f"Deployment {name} at {replicas} replicas")


async def test_hpa_targets_the_service_and_the_quota_caps_what_it_asks(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, model_yaml("m", GPU))
    await apply_text(kube, quota_yaml(2))
    await apply_text(kube, isvc_yaml("s", "m", "vllm", SCALING))
    found = await hpa(kube, "s")
    assert found is not None
    assert found["spec"]["scaleTargetRef"] == {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "name": "s",
    }
    assert (found["spec"]["minReplicas"], found["spec"]["maxReplicas"]) == (1, 4)
    # No metrics given: vLLM's own gauge of requests in flight, as LLMKube's default.
    assert found["spec"]["metrics"] == [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "vllm:num_requests_running"},
                "target": {"type": "AverageValue", "averageValue": "2"},
            },
        }
    ]
    owner = found["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "InferenceService" and owner["controller"] is True

    # The HPA scales the service through its scale subresource, as the HPA controller does.
    await kube.patch(
        INFERENCE_SERVICE, "default", "s", {"spec": {"replicas": 3}}, subresource="scale"
    )
    await deployment_replicas(kube, "s", 2)  # the quota of 2 GPUs admits 2 of the 3
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "s", "QuotaAdmitted", "False")
    assert isvc["spec"]["replicas"] == 3, "the controller never writes spec.replicas"
    scale = await kube.request("GET", INFERENCE_SERVICE.object_path("default", "s", "scale"))
    assert scale["status"]["selector"] == "inference.llmkube.dev/inferenceservice=s"

    await kube.patch(
        INFERENCE_SERVICE, "default", "s", {"spec": {"replicas": 1}}, subresource="scale"
    )
    await deployment_replicas(kube, "s", 1)


async def test_hpa_follows_the_spec_and_goes_when_cleared_or_suspended(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, model_yaml("m", GPU))
    metrics = (
        "  autoscaling:\n    maxReplicas: 3\n    metrics:\n"
        "      - {type: Resource, name: cpu, targetAverageUtilization: 70}\n"
        "      - {type: Pods, name: vllm:num_requests_waiting, targetAverageValue: 500m}"
    )
    await apply_text(kube, isvc_yaml("s", "m", "vllm", metrics))
    found = await hpa(kube, "s")
    assert found is not None
    assert found["spec"]["minReplicas"] == 1  # LLMKube's default
    assert found["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "vllm:num_requests_waiting"},
                "target": {"type": "AverageValue", "averageValue": "500m"},
            },
        },
    ]
    await reapply(kube, isvc_yaml("s", "m", "vllm", SCALING + "\n  suspend: true"))
    await hpa(kube, "s", present=False)
    await reapply(kube, isvc_yaml("s", "m", "vllm", SCALING))
    await hpa(kube, "s")
    await reapply(kube, isvc_yaml("s", "m", "vllm"))
    await hpa(kube, "s", present=False)
    isvc = await kube.get(INFERENCE_SERVICE, "default", "s")
    assert condition(isvc, "FieldsServed") is None, "autoscaling is served"
