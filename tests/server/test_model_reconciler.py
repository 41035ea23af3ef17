"""Model reconciler: AcceleratorReady follows the claims and templates a Model names."""

from __future__ import annotations

from typing import Any

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import EVENT, MODEL, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE
from tests.support.manager import reconciles
from tests.support.manifests import DRA_CLUSTER_YAML, gpu_template, model_yaml
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

TEMPLATE_GPU = """\
      enabled: true
      count: 1
      resourceClaims:
        - {name: gpu, resourceClaimTemplateName: one-gpu}"""


async def test_template_missing_then_created_then_deleted(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, DRA_CLUSTER_YAML)
    await apply_text(kube, model_yaml("m", TEMPLATE_GPU))
    m = await wait_condition(
        kube, MODEL, "m", "AcceleratorReady", "False", "ResourceClaimTemplateNotFound"
    )
    c = condition(m, "AcceleratorReady")
    assert c is not None
    assert c["message"] == "not found in namespace default: ResourceClaimTemplate 'one-gpu'"
    assert m["status"]["phase"] == "Pending"
    assert m["status"]["acceleratorReady"] is False, "LLMKube's bool follows the condition"
    assert condition(m, "Ready")["status"] == "False"  # type: ignore[index]

    # Creating the template is enough: the template watch wakes the Model.
    await apply_text(kube, gpu_template("one-gpu", 1))
    m = await wait_condition(kube, MODEL, "m", "AcceleratorReady", "True", "ResourceClaimsFound")
    assert m["status"]["phase"] == "Ready"
    assert m["status"]["acceleratorReady"] is True
    assert m["status"]["gpu"]["attachment"] == "dra"
    assert m["status"]["observedGeneration"] == m["metadata"]["generation"]

    await kube.delete(RESOURCE_CLAIM_TEMPLATE, "default", "one-gpu")
    await wait_condition(
        kube, MODEL, "m", "AcceleratorReady", "False", "ResourceClaimTemplateNotFound"
    )


async def test_shared_claim_must_exist_in_the_models_namespace(
    kube: KubeClient, controller: Manager
) -> None:
    gpu = """\
      enabled: true
      resourceClaims:
        - {name: gpu, resourceClaimName: shared-gpu}"""
    await apply_text(kube, DRA_CLUSTER_YAML)
    await apply_text(kube, model_yaml("m", gpu), namespace="team-a")
    # A claim of that name in another namespace does not count.
    await kube.create(
        RESOURCE_CLAIM,
        {
            "metadata": {"name": "shared-gpu", "namespace": "team-b"},
            "spec": {"devices": {"requests": []}},
        },
    )
    m = await wait_condition(
        kube, MODEL, "m", "AcceleratorReady", "False", "ResourceClaimNotFound", namespace="team-a"
    )
    assert "ResourceClaim 'shared-gpu'" in condition(m, "AcceleratorReady")["message"]  # type: ignore[index]
    await kube.create(
        RESOURCE_CLAIM,
        {
            "metadata": {"name": "shared-gpu", "namespace": "team-a"},
            "spec": {"devices": {"requests": []}},
        },
    )
    await wait_condition(
        kube, MODEL, "m", "AcceleratorReady", "True", "ResourceClaimsFound", namespace="team-a"
    )


async def test_every_named_claim_is_checked(kube: KubeClient, controller: Manager) -> None:
    gpu = """\
      enabled: true
      count: 2
      resourceClaims:
        - {name: a, resourceClaimTemplateName: one-gpu}
        - {name: b, resourceClaimName: extra}"""
    await apply_text(kube, gpu_template("one-gpu", 1))
    await apply_text(kube, model_yaml("m", gpu))
    m = await wait_condition(kube, MODEL, "m", "AcceleratorReady", "False", "ResourceClaimNotFound")
    assert condition(m, "AcceleratorReady")["message"].endswith("ResourceClaim 'extra'")  # type: ignore[index]


async def test_device_plugin_and_cpu_models(kube: KubeClient, controller: Manager) -> None:
    await apply_text(kube, model_yaml("gpu", "      enabled: true\n      count: 2"))
    m = await wait_condition(kube, MODEL, "gpu", "AcceleratorReady", "True", "DevicePlugin")
    assert condition(m, "AcceleratorReady")["message"] == "2 GPU(s) requested as nvidia.com/gpu"  # type: ignore[index]
    await apply_text(
        kube,
        """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: cpu}
spec: {source: "https://example.com/tiny.gguf", format: gguf, hardware: {accelerator: cpu}}
""",
    )
    await wait_condition(kube, MODEL, "cpu", "AcceleratorReady", "True", "NoAcceleratorRequired")


async def test_invalid_spec_gets_a_condition_and_a_warning_event(
    kube: KubeClient, controller: Manager, apiserver: ApiServerProcess
) -> None:
    await apiserver.control("PUT", "schema-validation", {"enforce": False})  # older CRDs
    gpu = """\
      enabled: true
      resourceName: nvidia.com/gpu
      resourceClaims:
        - {name: gpu, resourceClaimTemplateName: one-gpu, resourceClaimName: c}"""
    await apply_text(kube, model_yaml("bad", gpu))
    m = await wait_condition(kube, MODEL, "bad", "AcceleratorReady", "False", "InvalidSpec")
    message = condition(m, "AcceleratorReady")["message"]  # type: ignore[index]
    assert "set exactly one of resourceClaimName and resourceClaimTemplateName" in message
    assert "resourceClaims and resourceName are mutually exclusive" in message
    assert m["status"]["phase"] == "Failed"
    assert m["status"]["acceleratorReady"] is False

    async def warning() -> list[dict[str, Any]]:
        events, _ = await kube.list(EVENT, "default")
        return [
            e
            for e in events
            if e["type"] == "Warning"
            and e["reason"] == "InvalidSpec"
            and e["involvedObject"]["name"] == "bad"
        ]

    events = await eventually(warning, what="a Warning event")
    assert events[0]["involvedObject"]["kind"] == "Model"
    assert "mutually exclusive" in str(events[0]["message"])

    # Fixing the spec clears the condition.
    await apply_text(kube, model_yaml("bad", "      enabled: true\n      count: 1"))
    await wait_condition(kube, MODEL, "bad", "AcceleratorReady", "True", "DevicePlugin")


async def test_reconcile_is_idempotent(kube: KubeClient, controller: Manager) -> None:
    await apply_text(kube, DRA_CLUSTER_YAML)
    await apply_text(kube, gpu_template("one-gpu", 1))
    await apply_text(kube, model_yaml("m", TEMPLATE_GPU))
    m = await wait_condition(kube, MODEL, "m", "AcceleratorReady", "True")
    await controller.wait_idle()
    rv = m["metadata"]["resourceVersion"]
    transition = condition(m, "AcceleratorReady")["lastTransitionTime"]  # type: ignore[index]
    runs = reconciles(controller, "model")
    # Wake the reconciler again with an unrelated template change: nothing is written.
    await apply_text(
        kube,
        gpu_template("one-gpu", 1).replace(
            "metadata: {name: one-gpu}", "metadata: {name: one-gpu, labels: {touched: 'yes'}}"
        ),
    )
    await controller.wait_idle()
    assert reconciles(controller, "model") > runs, "the template change must wake the Model"
    again = await kube.get(MODEL, "default", "m")
    assert again is not None
    assert again["metadata"]["resourceVersion"] == rv
    assert condition(again, "AcceleratorReady")["lastTransitionTime"] == transition  # type: ignore[index]
