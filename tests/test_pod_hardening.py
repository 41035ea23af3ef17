"""Serving pods hardened by default, over HTTP on the test server: opaque fields nested
without bound are refused, not fed to every later reader of the pod spec."""

from __future__ import annotations

from typing import Any

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE
from objtypes import Obj
from reconcilers.apply import contains
from webhook.admission import verdict

from .conftest import condition, eventually, isvc_yaml, wait_condition
from .support.webhook import admission_request

GGUF_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: "https://example.com/qwen3-8b-q4.gguf", format: gguf}
"""


def nested(depth: int, leaf: Any = 1) -> Obj:
    """An object `depth` levels deep: {"a": {"a": ... {"leaf": leaf}}}."""
    obj: Obj = {"leaf": leaf}
    for _ in range(depth - 1):
        obj = {"a": obj}
    return obj


def isvc(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"modelRef": "m", "runtime": "llamacpp", **spec},
    }


async def deployment(kube: KubeClient, name: str) -> Obj:
    async def probe() -> Obj | None:
        return await kube.get(DEPLOYMENT, "default", name)

    return await eventually(probe, what=f"Deployment {name}")


def test_comparing_objects_of_any_depth_needs_no_recursion() -> None:
    deep = nested(5000)
    assert contains(deep, nested(5000))
    assert not contains(deep, nested(5000, leaf=2))
    assert not contains(deep, nested(4999))
    wrapped = {"spec": {"volumes": [{"name": "v", "x": deep}]}}
    live = {"spec": {"volumes": [{"name": "other"}, {"name": "v", "x": nested(5000)}]}}
    assert contains(wrapped, live), "keyed list items found by name at any depth"


def test_the_webhook_refuses_a_deeply_nested_opaque_field() -> None:
    deep = {"modelRef": "m", "extraVolumes": [{"name": "ok", "emptyDir": {}}, nested(40)]}
    allowed, message = verdict(admission_request("InferenceService", deep))
    assert not allowed and message.startswith("spec.extraVolumes[1]: nested more than 32")
    fine = {"modelRef": "m", "affinity": nested(32)}
    assert verdict(admission_request("InferenceService", fine)) == (True, "")


async def test_a_deeply_nested_extra_volume_is_refused_naming_it_and_work_goes_on(
    kube: KubeClient, controller: Manager
) -> None:
    """400 levels (the API server and our informers decode up to 512) in an opaque
    field: refused with a condition naming the field, no Deployment, other services
    served. It used to be applied, then every reconcile's comparison raised
    RecursionError."""
    await apply_text(kube, GGUF_MODEL)
    volume = {"name": "deep", "emptyDir": {}, "x": nested(400)}
    await kube.create(INFERENCE_SERVICE, isvc("deep", extraVolumes=[volume]))
    await apply_text(kube, isvc_yaml("fine", "m", "llamacpp"))
    found = await wait_condition(kube, INFERENCE_SERVICE, "deep", "Ready", "False", "InvalidSpec")
    message = condition(found, "Ready")["message"]  # type: ignore[index]
    assert message.startswith("spec.extraVolumes[0]: nested more than 32 levels deep"), message
    assert found["status"]["phase"] == "Failed"
    await deployment(kube, "fine")
    assert await kube.get(DEPLOYMENT, "default", "deep") is None
