"""The InferenceService's pod fields, served as LLMKube serves them, over HTTP on the
test server: the Deployment's pod, the runtime's flags, the PodDisruptionBudget of
spec.disruption and the recycling of spec.maxPodLifetimeSeconds.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_pod_fields.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.manifests import apply_text
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import (
    DEPLOYMENT,
    EVENT,
    INFERENCE_SERVICE,
    POD,
    POD_DISRUPTION_BUDGET,
)
from objtypes import Obj
from tests.support.dra_cluster import dra_cluster
from tests.support.manifests import isvc_yaml, model_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition

GGUF_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: "https://example.com/qwen3-8b-q4.gguf", format: gguf}
"""
CPU_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: Qwen/Qwen3-8B, format: safetensors}
"""
READINESS = {"tcpSocket": {"port": 9000}, "periodSeconds": 5}
FIELDS = f"""
  command: [/app/llama-server]
  containerPort: 9000
  bindAddress: 10.1.2.3
  probeOverrides:
    readiness: {READINESS}
  skipModelInit: true
  extraVolumes: [{{name: weights, persistentVolumeClaim: {{claimName: weights}}}}]
  extraVolumeMounts: [{{name: weights, mountPath: /models, readOnly: true}}]
  podSecurityContext: {{fsGroup: 1000}}
  securityContext: {{runAsNonRoot: true}}
  revisionHistoryLimit: 2
  ropeScaling: {{type: yarn, factor: "4.0", originalContext: 32768}}
  speculativeDecoding: {{type: mtp, nDraftMax: 3, pMin: 0.75}}
"""


async def deployment(kube: KubeClient, name: str, check: Any = bool) -> Obj:
    async def probe() -> Obj | None:
        dep = await kube.get(DEPLOYMENT, "default", name)
        return dep if dep and check(dep) else None

    return await eventually(probe, what=f"Deployment {name}")


def pod_of(dep: Obj) -> Obj:
    spec: Obj = dep["spec"]["template"]["spec"]
    return spec


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


async def test_pod_fields_reach_the_pod_and_the_runtime(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, GGUF_MODEL)
    await apply_text(kube, isvc_yaml("s", "m", "llamacpp", FIELDS))
    dep = await deployment(kube, "s", lambda d: "revisionHistoryLimit" in d["spec"])
    assert dep["spec"]["revisionHistoryLimit"] == 2
    pod = pod_of(dep)
    c = pod["containers"][0]
    assert c["command"] == ["/app/llama-server"]
    args = c["args"]
    # containerPort is where the runtime listens, so the port, probes and Service follow.
    assert flag(args, "--port") == "9000" and c["ports"][0]["containerPort"] == 9000
    assert flag(args, "--host") == "10.1.2.3"
    # LLMKube's factor is a decimal string, llama.cpp's --rope-scale value as written.
    assert (flag(args, "--rope-scaling"), flag(args, "--rope-scale")) == ("yarn", "4.0")
    assert flag(args, "--yarn-orig-ctx") == "32768"
    assert flag(args, "--spec-type") == "draft-mtp"  # LLMKube's alias mtp
    assert (flag(args, "--spec-draft-n-max"), flag(args, "--spec-draft-p-min")) == ("3", "0.75")
    assert c["readinessProbe"] == READINESS
    assert c["startupProbe"]["httpGet"] == {"path": "/health", "port": "http"}  # not overridden
    # skipModelInit: no loader and no model volume; the user's volume is at /models.
    assert "initContainers" not in pod
    assert pod["volumes"] == [
        {"name": "weights", "persistentVolumeClaim": {"claimName": "weights"}}
    ]
    assert c["volumeMounts"] == [{"name": "weights", "mountPath": "/models", "readOnly": True}]
    # The user's keys over our hardened defaults (tests/server/test_pod_hardening.py).
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 1000}
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "s", "RuntimeConfigured", "True")
    assert condition(isvc, "FieldsServed") is None, "every field set is served"

    # Cleared: the Deployment goes back to ours (the fields we stop applying are removed).
    await reapply(kube, isvc_yaml("s", "m", "llamacpp"))
    dep = await deployment(kube, "s", lambda d: "revisionHistoryLimit" not in d["spec"])
    pod = pod_of(dep)
    c = pod["containers"][0]
    assert "command" not in c and flag(c["args"], "--port") == "8080"
    assert "--rope-scaling" not in c["args"] and "--spec-type" not in c["args"]
    assert [i["name"] for i in pod["initContainers"]] == ["model-loader"]
    assert pod["volumes"] == [{"name": "models", "emptyDir": {}}]


async def test_runtime_flags_the_runtime_lacks_or_that_disagree_are_refused(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, CPU_MODEL)
    spec = "  speculativeDecoding: {type: ngram-simple}"
    await apply_text(kube, isvc_yaml("spec", "m", "vllm", spec))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "spec", "RuntimeConfigured", "False")
    found = condition(isvc, "RuntimeConfigured")
    assert found is not None and found["reason"] == "InvalidRuntimeConfig"
    assert found["message"].startswith("spec.speculativeDecoding: only the llamacpp runtime")

    draft = "  speculativeDecoding: {type: draft, draftModelRef: small}"
    await apply_text(kube, GGUF_MODEL.replace("name: m", "name: g"))
    await apply_text(kube, isvc_yaml("draft", "g", "llamacpp", draft))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "draft", "RuntimeConfigured", "False")
    found = condition(isvc, "RuntimeConfigured")
    assert found is not None and found["reason"] == "InvalidRuntimeConfig"
    assert found["message"].startswith("spec.speculativeDecoding: draft weights")

    port = "  containerPort: 9000\n  extraArgs: [--port, '9001']"
    await apply_text(kube, isvc_yaml("port", "m", "vllm", port))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "port", "RuntimeConfigured", "False")
    found = condition(isvc, "RuntimeConfigured")
    assert found is not None and "spec.containerPort: 9000, but --port 9001" in found["message"]

    # A loopback bind address: refused by the reconciler too (the webhook may be off).
    await apply_text(kube, isvc_yaml("lo", "m", "vllm", "  bindAddress: 127.0.0.1"))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "lo", "Ready", "False")
    found = condition(isvc, "Ready")
    assert found is not None and found["reason"] == "InvalidSpec"
    assert found["message"].startswith("spec.bindAddress: '127.0.0.1' is a loopback address")
    for name in ("spec", "draft", "port", "lo"):
        assert await kube.get(DEPLOYMENT, "default", name) is None


async def test_rope_scaling_on_a_runtime_that_ignores_it_is_reported(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, CPU_MODEL)
    await apply_text(kube, isvc_yaml("s", "m", "vllm", "  ropeScaling: {type: yarn}"))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "s", "FieldsServed", "False")
    assert condition(isvc, "FieldsServed")["message"].endswith(": spec.ropeScaling")  # type: ignore[index]
    dep = await deployment(kube, "s")
    assert "--rope-scaling" not in pod_of(dep)["containers"][0]["args"]


async def budget(kube: KubeClient, name: str, present: bool) -> None:
    async def probe() -> bool:
        found = await kube.get(POD_DISRUPTION_BUDGET, "default", name)
        return (found is not None) == present

    await eventually(probe, what=f"PodDisruptionBudget {name} {'present' if present else 'gone'}")


@pytest.mark.server
async def test_disruption_budget_protects_startup_or_always() -> None:
    async with dra_cluster(gpus=0, plugin=0) as (kube, _manager, _server):
        # No GPU in the cluster: the pod never starts, its startup stays protected.
        await apply_text(kube, model_yaml("gpu", "      enabled: true\n      count: 1"))
        await apply_text(kube, isvc_yaml("waiting", "gpu", "vllm"))
        await budget(kube, "waiting", present=True)
        found = await kube.get(POD_DISRUPTION_BUDGET, "default", "waiting")
        assert found is not None
        assert found["spec"] == {
            "selector": {"matchLabels": {"inference.llmkube.dev/inferenceservice": "waiting"}},
            "maxUnavailable": 0,
        }
        assert found["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"
        await reapply(
            kube, isvc_yaml("waiting", "gpu", "vllm", "  disruption: {protectStartup: false}")
        )
        await budget(kube, "waiting", present=False)

        # A CPU service runs: Ready, its startup is over and the budget goes; protectAlways
        # keeps it, and clearing it removes it again.
        await apply_text(kube, CPU_MODEL)
        await apply_text(kube, isvc_yaml("cpu", "m", "vllm"))
        await wait_condition(kube, INFERENCE_SERVICE, "cpu", "Ready", "True")
        await budget(kube, "cpu", present=False)
        await reapply(kube, isvc_yaml("cpu", "m", "vllm", "  disruption: {protectAlways: true}"))
        await budget(kube, "cpu", present=True)
        # The budget holds: an eviction of the service's ready pod is refused.
        pods, _ = await kube.list(
            POD, "default", label_selector="inference.llmkube.dev/inferenceservice=cpu"
        )
        with pytest.raises(ApiError) as refused:
            await kube.request(
                "POST", POD.object_path("default", pods[0]["metadata"]["name"], "eviction"), body={}
            )
        assert refused.value.status == 429
        await reapply(kube, isvc_yaml("cpu", "m", "vllm"))
        await budget(kube, "cpu", present=False)


@pytest.mark.server
async def test_pods_older_than_max_lifetime_are_recycled() -> None:
    async with dra_cluster(gpus=0, plugin=0) as (kube, _manager, _server):
        await apply_text(kube, CPU_MODEL)
        await apply_text(kube, isvc_yaml("s", "m", "vllm", "  maxPodLifetimeSeconds: 1"))
        selector = "inference.llmkube.dev/inferenceservice=s"

        async def running() -> str | None:
            pods, _ = await kube.list(POD, "default", label_selector=selector)
            up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            return up[0]["metadata"]["name"] if len(up) == 1 else None

        first = await eventually(running, what="the first pod running")

        async def replaced() -> str | None:
            name = await running()
            return name if name and name != first else None

        await eventually(replaced, timeout=20, what="the expired pod replaced")

        async def recycled() -> list[Obj] | None:
            items, _ = await kube.list(EVENT, "default")
            # With a 1 s lifetime each pod is recycled in turn: wait for the first one's.
            found = [e for e in items if e["reason"] == "PodRecycled" and first in e["message"]]
            return found or None

        events = await eventually(recycled, what=f"the PodRecycled Event of {first}")
        assert events[0]["involvedObject"]["name"] == "s"
        isvc = await kube.get(INFERENCE_SERVICE, "default", "s")
        assert condition(isvc, "FieldsServed") is None
