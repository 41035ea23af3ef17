"""LLMKube's InferenceService fields at work: suspend, mode, pod passthrough, endpoint."""

from __future__ import annotations

from typing import Any

from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, MODEL, SERVICE
from objtypes import Obj
from tests.support.manifests import isvc_yaml, model_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition

ONE_GPU = "      enabled: true\n      count: 1"
CPU_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: cpu}
spec:
  source: https://example.com/m.gguf
  resources: {cpu: "2", memory: 4Gi}
"""


async def deployment_where(kube: KubeClient, name: str, test: Any, what: str) -> Obj:
    async def probe() -> Obj | None:
        d = await kube.get(DEPLOYMENT, "default", name)
        return d if d and test(d) else None

    return await eventually(probe, what=what)


async def test_suspend_scales_to_zero_and_resumes(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", ONE_GPU))
    await reapply(kube, isvc_yaml("svc", "m", extra="  replicas: 2\n  suspend: true"))
    await deployment_where(kube, "svc", lambda d: d["spec"]["replicas"] == 0, "suspended")
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "svc", "Suspended", "True")
    assert condition(isvc, "Ready")["reason"] == "Suspended"  # type: ignore[index]
    assert isvc["status"]["phase"] == "Suspended"
    assert isvc["status"]["desiredReplicas"] == 0
    await reapply(kube, isvc_yaml("svc", "m", extra="  replicas: 2\n  suspend: false"))
    await deployment_where(kube, "svc", lambda d: d["spec"]["replicas"] == 2, "resumed")
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "svc", "Suspended", "False")
    assert isvc["status"]["selector"] == "inference.llmkube.dev/inferenceservice=svc"


async def test_replicas_zero_is_stopped(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", ONE_GPU))
    await reapply(kube, isvc_yaml("svc", "m", extra="  replicas: 0"))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "svc", "Ready", "False", "ScaledToZero")
    assert isvc["status"]["phase"] == "Stopped"


async def test_embedding_mode_sets_flags_and_endpoint(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, CPU_MODEL)
    await reapply(kube, isvc_yaml("emb", "cpu", runtime="llamacpp", extra="  mode: embedding"))
    dep = await deployment_where(kube, "emb", lambda d: True, "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert " ".join(args).endswith("--embedding --pooling last")
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "emb", "ModelResolved", "True")

    async def endpoint() -> str | None:
        obj = await kube.get(INFERENCE_SERVICE, "default", "emb")
        return ((obj or {}).get("status") or {}).get("endpoint")

    assert await eventually(endpoint) == "http://emb.default.svc.cluster.local:8080/v1/embeddings"
    assert isvc["status"]["mode"] == "embedding"


async def test_cpu_model_gets_no_gpu_and_model_resources(
    kube: KubeClient, controller: Manager
) -> None:
    """accelerator defaults to cpu: no device-plugin limit, so it schedules on a DRA-only
    cluster; the Model's cpu/memory reach the container."""
    await reapply(kube, CPU_MODEL)
    await reapply(kube, isvc_yaml("svc", "cpu", runtime="llamacpp"))
    dep = await deployment_where(kube, "svc", lambda d: True, "Deployment")
    resources = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    model = await wait_condition(kube, MODEL, "cpu", "AcceleratorReady", "True")
    assert model["status"]["acceleratorReady"] is True


PASSTHROUGH = """\
  image: registry.example.com/vllm:custom
  resources: {cpu: "8", memory: 32Gi}
  endpoint: {port: 9000, type: NodePort, nodePort: 30900}
  tolerations:
    - {key: dedicated, operator: Equal, value: llm, effect: NoSchedule}
  nodeSelector: {pool: gpu}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: pool, operator: In, values: [gpu]}]
  podLabels: {team: search, app.kubernetes.io/managed-by: someone-else}
  podAnnotations: {example.com/owner: search}
  env:
    - {name: LOG_LEVEL, value: debug}
  imagePullSecrets: [{name: registry}]
  priorityClassName: llmkube-high
  runtimeClassName: nvidia"""


async def test_pod_fields_pass_through(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", ONE_GPU))
    await reapply(kube, isvc_yaml("svc", "m", extra=PASSTHROUGH))
    dep = await deployment_where(kube, "svc", lambda d: True, "Deployment")
    template = dep["spec"]["template"]
    pod, container = template["spec"], template["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/vllm:custom"
    assert container["resources"]["requests"] == {"cpu": "8", "memory": "32Gi"}
    assert container["resources"]["limits"] == {"memory": "32Gi", "nvidia.com/gpu": "1"}
    assert container["env"] == [{"name": "LOG_LEVEL", "value": "debug"}]
    assert pod["tolerations"] == [  # the GPU nodes' taint first (a GPU pod), then the user's
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"},
    ]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["affinity"]["nodeAffinity"]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["priorityClassName"] == "llmkube-high"
    assert pod["runtimeClassName"] == "nvidia"
    labels = template["metadata"]["labels"]
    assert labels["team"] == "search"
    assert labels["app.kubernetes.io/managed-by"] == "llmkube", "our selector labels win"
    assert template["metadata"]["annotations"] == {"example.com/owner": "search"}
    svc = await kube.get(SERVICE, "default", "svc")
    assert svc is not None
    assert svc["spec"]["type"] == "NodePort"
    assert svc["spec"]["ports"][0]["port"] == 9000
    assert svc["spec"]["ports"][0]["nodePort"] == 30900
