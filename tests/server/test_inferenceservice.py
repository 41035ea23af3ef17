"""InferenceService reconciler: workload, claims, Model problems, ownership, drift."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.manifests import install_crds
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import (
    DEPLOYMENT,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    SERVICE,
)
from objtypes import Obj
from tests.support.manager import manager_for, reconciles
from tests.support.manifests import TWO_GPU_CLAIMS, gpu_template, isvc_yaml, model_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

CLAIMS_GPU = TWO_GPU_CLAIMS
PLUGIN_GPU = """\
      enabled: true
      count: 2"""


def multinode(*nodes: str) -> str:
    """spec.multiNode of an InferenceService (LLMKube's shape), the head's address set."""
    members = ", ".join(
        f"{{node: {n}, fabric: {{address: 10.0.0.{i + 1}}}}}" for i, n in enumerate(nodes)
    )
    return f"  multiNode: {{members: [{members}]}}"


async def deployment(kube: KubeClient, name: str, ns: str = "default") -> Obj:
    async def probe() -> Obj | None:
        return await kube.get(DEPLOYMENT, ns, name)

    return await eventually(probe, what=f"Deployment {name}")


def container(dep: Obj) -> Obj:
    result: Obj = dep["spec"]["template"]["spec"]["containers"][0]
    return result


async def test_device_plugin_model_gets_the_gpu_limit(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, model_yaml("m", PLUGIN_GPU))
    await reapply(kube, isvc_yaml("svc", "m"))
    dep = await deployment(kube, "svc")
    assert container(dep)["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert "resourceClaims" not in dep["spec"]["template"]["spec"]
    assert "claims" not in container(dep)["resources"]
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "svc", "ModelResolved", "True")
    assert isvc["status"]["gpuAttachment"] == "device-plugin"
    # LLMKube's endpoint: the Service port (endpoint.port, default 8080) and the mode's path.
    assert isvc["status"]["endpoint"] == (
        "http://svc.default.svc.cluster.local:8080/v1/chat/completions"
    )


async def test_missing_model_then_created(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, isvc_yaml("svc", "later"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "ModelResolved", "False", "ModelNotFound"
    )
    assert condition(isvc, "ModelResolved")["message"] == (  # type: ignore[index]
        "Model 'later' not found in namespace default"
    )
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
    await reapply(kube, model_yaml("later", PLUGIN_GPU))
    await deployment(kube, "svc")
    await wait_condition(kube, INFERENCE_SERVICE, "svc", "ModelResolved", "True")


async def test_multinode_with_claims_is_rejected_at_reconcile_time(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", CLAIMS_GPU))
    await reapply(kube, isvc_yaml("svc", "m", extra=multinode("node-a", "node-b")))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "ModelResolved", "False", "InvalidSpec"
    )
    assert "run DRA models single-node" in condition(isvc, "Ready")["message"]  # type: ignore[index]
    assert isvc["status"]["phase"] == "Failed"
    await controller.wait_idle()
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
    pods, _ = await kube.list(POD, "default")
    assert pods == [], "no pod may be pinned with nodeName next to claims"


async def test_multinode_without_claims_pins_one_pod_per_node(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, model_yaml("m", PLUGIN_GPU))
    await reapply(kube, isvc_yaml("svc", "m", extra=multinode("node-a", "node-b", "node-c")))

    async def members() -> list[Obj] | None:
        pods, _ = await kube.list(POD, "default")
        return pods if len(pods) == 3 else None

    pods = sorted(
        await eventually(members, what="3 member pods"), key=lambda p: p["metadata"]["name"]
    )
    assert [p["spec"]["nodeName"] for p in pods] == ["node-a", "node-b", "node-c"]
    assert [p["metadata"]["name"] for p in pods] == ["svc-0", "svc-1", "svc-2"]
    env = {e["name"]: e["value"] for e in pods[1]["spec"]["containers"][0]["env"]}
    assert env["LLMKUBE_NODE_RANK"] == "1" and env["LLMKUBE_WORLD_SIZE"] == "3"
    assert env["LLMKUBE_LEADER_ADDRESS"] == "10.0.0.1"
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
    # Dropping a member removes its pod.
    await reapply(kube, isvc_yaml("svc", "m", extra=multinode("node-a", "node-b")))

    async def two_members() -> list[Obj] | None:
        pods, _ = await kube.list(POD, "default")
        names = sorted(p["metadata"]["name"] for p in pods)
        return pods if names == ["svc-0", "svc-1"] else None

    await eventually(two_members, what="2 member pods")


async def test_missing_claim_template_blocks_until_created(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, model_yaml("m", CLAIMS_GPU))
    await reapply(kube, isvc_yaml("svc", "m"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "ModelResolved", "False", "AcceleratorNotReady"
    )
    assert "ResourceClaimTemplate 'two-gpus'" in condition(isvc, "ModelResolved")["message"]  # type: ignore[index]
    assert await kube.get(DEPLOYMENT, "default", "svc") is None
    await reapply(kube, gpu_template("two-gpus", 2))
    dep = await deployment(kube, "svc")
    assert "limits" not in container(dep)["resources"]
    await wait_condition(kube, INFERENCE_SERVICE, "svc", "ClaimsPresent", "True")
    # The template going away under the running workload: its own condition, the
    # workload stays and still scales; Ready keeps following the pods.
    await kube.delete(RESOURCE_CLAIM_TEMPLATE, "default", "two-gpus")
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "ClaimsPresent", "False", "AcceleratorNotReady"
    )
    assert "ResourceClaimTemplate 'two-gpus'" in condition(isvc, "ClaimsPresent")["message"]  # type: ignore[index]
    assert condition(isvc, "ModelResolved")["status"] == "True"  # type: ignore[index]
    assert await kube.get(DEPLOYMENT, "default", "svc") is not None
    await reapply(kube, isvc_yaml("svc", "m", extra="  replicas: 3"))

    async def scaled() -> Obj | None:
        d = await kube.get(DEPLOYMENT, "default", "svc")
        return d if d and d["spec"]["replicas"] == 3 else None

    await eventually(scaled, what="scaled to 3 with the template gone")


async def test_switching_from_claims_to_device_plugin_rewrites_the_pod(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", CLAIMS_GPU))
    await reapply(kube, isvc_yaml("svc", "m"))
    dep = await deployment(kube, "svc")
    assert dep["spec"]["template"]["spec"]["resourceClaims"]
    await reapply(kube, model_yaml("m", PLUGIN_GPU))

    async def rewritten() -> Obj | None:
        d = await kube.get(DEPLOYMENT, "default", "svc")
        pod = (d or {}).get("spec", {}).get("template", {}).get("spec", {})
        return d if d and "resourceClaims" not in pod else None

    dep = await eventually(rewritten, what="claims removed")
    assert container(dep)["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    # And back: the limit goes, the claims come.
    await reapply(kube, model_yaml("m", CLAIMS_GPU))

    async def back() -> Obj | None:
        d = await kube.get(DEPLOYMENT, "default", "svc")
        return d if d and "limits" not in container(d)["resources"] else None

    dep = await eventually(back, what="limit removed")
    assert container(dep)["resources"]["claims"] == [{"name": "gpus"}]


async def test_drift_in_owned_fields_is_repaired(kube: KubeClient, controller: Manager) -> None:
    await reapply(kube, model_yaml("m", PLUGIN_GPU))
    await reapply(kube, isvc_yaml("svc", "m"))
    dep = await deployment(kube, "svc")
    want = container(dep)["args"]
    dep["spec"]["template"]["spec"]["containers"][0]["args"] = ["--hacked"]
    dep["spec"]["replicas"] = 7
    await kube.replace(DEPLOYMENT, dep)

    async def repaired() -> Obj | None:
        d = await kube.get(DEPLOYMENT, "default", "svc")
        return d if d and container(d)["args"] == want and d["spec"]["replicas"] == 1 else None

    await eventually(repaired, what="drift repaired")


async def test_workload_not_owned_is_left_alone(kube: KubeClient, controller: Manager) -> None:
    theirs = await kube.create(
        DEPLOYMENT,
        {
            "metadata": {"name": "svc", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "theirs"}},
                "template": {
                    "metadata": {"labels": {"app": "theirs"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        },
    )
    await reapply(kube, model_yaml("m", PLUGIN_GPU))
    await reapply(kube, isvc_yaml("svc", "m"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "Ready", "False", "WorkloadConflict"
    )
    assert "not owned" in condition(isvc, "Ready")["message"]  # type: ignore[index]
    await controller.wait_idle()
    live = await kube.get(DEPLOYMENT, "default", "svc")
    assert live is not None
    assert live["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]


async def test_invalid_service_spec_gets_a_condition(
    kube: KubeClient, controller: Manager, apiserver: ApiServerProcess
) -> None:
    await apiserver.control("PUT", "schema-validation", {"enforce": False})  # older CRDs
    await reapply(kube, model_yaml("m", PLUGIN_GPU))
    await reapply(kube, isvc_yaml("svc", "m", runtime="ollama", extra="  replicas: -3"))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "svc", "Ready", "False", "InvalidSpec")
    message = condition(isvc, "Ready")["message"]  # type: ignore[index]
    assert "spec.runtime: 'ollama' is not one of" in message
    assert "spec.replicas: must be at least 0, got -3" in message
    assert await kube.get(DEPLOYMENT, "default", "svc") is None


async def test_steady_state_writes_nothing(
    kube: KubeClient, controller: Manager, apiserver: ApiServerProcess
) -> None:
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", CLAIMS_GPU))
    await reapply(kube, isvc_yaml("svc", "m"))
    await deployment(kube, "svc")
    await wait_condition(kube, INFERENCE_SERVICE, "svc", "ModelResolved", "True")
    await controller.wait_idle(settle=0.3)
    await apiserver.control("DELETE", "requests")
    runs = reconciles(controller, "inferenceservice")
    # Touch the Model's labels: everything is woken, nothing needs changing.
    model = await kube.get(MODEL, "default", "m")
    assert model is not None
    await kube.patch(MODEL, "default", "m", {"metadata": {"labels": {"touched": "yes"}}})
    await controller.wait_idle(settle=0.3)
    assert reconciles(controller, "inferenceservice") > runs
    writes = {
        k: v
        for k, v in (await apiserver.requests()).items()
        if k.split()[0] in ("PUT", "POST", "PATCH", "DELETE")
    }
    assert writes == {"PATCH /apis/inference.llmkube.dev/v1alpha1/namespaces/default/models/m": 1}


# -- on a simulated DRA-only cluster ----------------------------------------------------


@pytest.fixture
async def dra_cluster() -> AsyncIterator[tuple[KubeClient, Manager]]:
    server = await ApiServerProcess.start("--simulate-cluster", "dra=4,plugin=0")
    client = await KubeClient.connect(server.url)
    await install_crds(client)
    manager = manager_for(client)
    await manager.start()
    await manager.wait_synced()
    yield client, manager
    await manager.stop()
    await client.close()
    await server.stop()


async def test_claims_run_where_a_gpu_limit_would_stay_pending(
    dra_cluster: tuple[KubeClient, Manager],
) -> None:
    kube, _ = dra_cluster
    await reapply(kube, gpu_template("one-gpu", 1))
    await reapply(
        kube,
        model_yaml(
            "dra",
            """\
      enabled: true
      count: 1
      resourceClaims:
        - {name: gpu, resourceClaimTemplateName: one-gpu}""",
        ),
    )
    await reapply(kube, isvc_yaml("dra", "dra", extra="  replicas: 2"))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "dra", "Ready", "True", "Serving")
    assert isvc["status"]["readyReplicas"] == 2
    # A template gives each pod a claim of its own.
    claims, _ = await kube.list(RESOURCE_CLAIM, "default")
    assert len(claims) == 2
    assert all(c["status"]["allocation"]["devices"]["results"] for c in claims)

    # The same model without claims, where a device-plugin limit would stay Pending (the
    # #2059 failure mode): served through a template the controller makes for it.
    await reapply(kube, model_yaml("plugin", "      enabled: true\n      count: 1"))
    await reapply(kube, isvc_yaml("plugin", "plugin"))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "plugin", "Ready", "True", "Serving")
    assert isvc["status"]["gpuAttachment"] == "dra"
    assert isvc["status"]["managedClaims"]["count"] == 1
    assert await kube.get(SERVICE, "default", "plugin") is not None


async def test_shared_claim_across_replicas_is_flagged_not_blocked(
    kube: KubeClient, controller: Manager
) -> None:
    await kube.create(
        RESOURCE_CLAIM,
        {
            "metadata": {"name": "gpu-claim", "namespace": "default"},
            "spec": {"devices": {"requests": []}},
        },
    )
    await reapply(
        kube,
        model_yaml(
            "m",
            """\
      enabled: true
      resourceClaims:
        - {name: gpu, resourceClaimName: gpu-claim}""",
        ),
    )
    await reapply(kube, isvc_yaml("svc", "m", extra="  replicas: 3"))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "ClaimsPerPod", "False", "SharedClaimAcrossReplicas"
    )
    assert "use resourceClaimTemplateName" in condition(isvc, "ClaimsPerPod")["message"]  # type: ignore[index]
    dep = await deployment(kube, "svc")
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["template"]["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimName": "gpu-claim"}
    ]
    await reapply(kube, isvc_yaml("svc", "m", extra="  replicas: 1"))
    await wait_condition(kube, INFERENCE_SERVICE, "svc", "ClaimsPerPod", "True")


async def test_kueue_managed_service_with_count_next_to_claims_is_flagged(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, gpu_template("two-gpus", 2))
    await reapply(kube, model_yaml("m", CLAIMS_GPU))
    kueue = isvc_yaml("svc", "m").replace(
        "metadata: {name: svc}", "metadata: {name: svc, labels: {kueue.x-k8s.io/queue-name: q}}"
    )
    await reapply(kube, kueue)
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "svc", "KueueCompatible", "False", "CountWithClaims"
    )
    assert "leave count out" in condition(isvc, "KueueCompatible")["message"]  # type: ignore[index]
    await reapply(
        kube,
        model_yaml(
            "m",
            """\
      enabled: true
      resourceClaims:
        - {name: gpus, resourceClaimTemplateName: two-gpus}""",
        ),
    )
    await wait_condition(kube, INFERENCE_SERVICE, "svc", "KueueCompatible", "True")
