"""FieldsServed: every LLMKube field a spec sets that llmkube-py does not act on is named.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_fields_not_served.py.
"""

from __future__ import annotations

from typing import Any

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import EVENT, GPU_QUOTA, INFERENCE_SERVICE, MODEL
from tests.support.manifests import isvc_yaml, model_yaml, quota_yaml, reapply
from tests.support.waiting import condition, eventually

CPU_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: Qwen/Qwen3-8B, format: safetensors}
"""


async def fields_served(kube: KubeClient, rt: Any, name: str, status: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        obj = await kube.get(rt, "default", name)
        found = condition(obj, "FieldsServed")
        return obj if found and found["status"] == status else None

    return await eventually(probe, what=f"{name} FieldsServed={status}")


async def warnings(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(EVENT, "default")
    return [
        e for e in items if e["involvedObject"]["name"] == name and e["reason"] == "FieldsNotServed"
    ]


async def test_service_condition_and_one_warning_then_true_when_removed(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, CPU_MODEL)
    extra = "  evictionProtection: true\n  turboQuantBits: 4"
    await apply_text(kube, isvc_yaml("s", "m", "vllm", extra))
    obj = await fields_served(kube, INFERENCE_SERVICE, "s", "False")
    found = condition(obj, "FieldsServed")
    assert found is not None
    assert found["reason"] == "FieldsNotServed"
    assert found["message"].endswith("spec.evictionProtection, spec.turboQuantBits")
    # The rest of the spec is served as if the fields were absent.
    assert condition(obj, "RuntimeConfigured")["status"] == "True"  # type: ignore[index]

    async def one_warning() -> list[dict[str, Any]] | None:
        found = await warnings(kube, "s")
        return found or None

    events = await eventually(one_warning, what="the FieldsNotServed Event")
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert "spec.evictionProtection, spec.turboQuantBits" in events[0]["message"]

    await reapply(kube, isvc_yaml("s", "m", "vllm"))
    obj = await fields_served(kube, INFERENCE_SERVICE, "s", "True")
    assert condition(obj, "FieldsServed")["reason"] == "AllFieldsServed"  # type: ignore[index]
    assert len(await warnings(kube, "s")) == 1


async def test_model_and_quota_name_theirs_and_a_plain_object_has_none(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, CPU_MODEL)
    sha = "  sha256: " + "ab" * 32
    await apply_text(kube, model_yaml("hashed", "      enabled: true\n      count: 1", sha))
    await apply_text(kube, quota_yaml(4, scope="namespaceRef: default, costBudgetRef: monthly"))
    obj = await fields_served(kube, MODEL, "hashed", "False")
    assert condition(obj, "FieldsServed")["message"].endswith(": spec.sha256")  # type: ignore[index]
    obj = await fields_served(kube, GPU_QUOTA, "team", "False")
    assert condition(obj, "FieldsServed")["message"].endswith(": spec.costBudgetRef")  # type: ignore[index]

    async def plain_model_ready() -> dict[str, Any] | None:
        m = await kube.get(MODEL, "default", "m")
        return m if condition(m, "AcceleratorReady") else None

    m = await eventually(plain_model_ready, what="Model m reconciled")
    assert condition(m, "FieldsServed") is None
