"""The controller writes what it owns with server-side apply, keeping other managers' fields.

Scenarios run kubectl against the test API server beside a running controller:
`kubectl rollout restart` and `kubectl label` must survive our next write, an edit of a
field we own is put back, a field we stop wanting goes away, and a reconcile whose
desired state already holds sends no write.
"""

from __future__ import annotations

from typing import Any

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, SERVICE
from reconcilers.inferenceservice.workload import CONTAINER
from reconcilers.writes.apply import FIELD_MANAGER
from tests.support.manager import reconciles
from tests.support.manifests import isvc_yaml, model_yaml, reapply
from tests.support.server_contract import kubectl
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
ENV = "  env:\n    - {name: HF_HUB_OFFLINE, value: '1'}"


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (e["manager"], e["operation"]): e["fieldsV1"]
        for e in obj["metadata"].get("managedFields") or []
    }


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return first


async def deployment(kube: KubeClient, name: str = "chat") -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        return await kube.get(DEPLOYMENT, "default", name)

    return await eventually(probe, what=f"Deployment {name}")


async def start(kube: KubeClient, extra: str = "") -> dict[str, Any]:
    await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await apply_text(kube, isvc_yaml("chat", "m", extra=extra))
    return await deployment(kube)


async def test_owned_objects_are_applied_by_llmkube_controller(
    kube: KubeClient, controller: Manager
) -> None:
    live = await start(kube)
    fields = managers(live)
    assert (FIELD_MANAGER, "Apply") in fields, fields
    containers = fields[(FIELD_MANAGER, "Apply")]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    ports = containers[f'k:{{"name":"{CONTAINER}"}}']["f:ports"]
    assert any(k.startswith('k:{"containerPort":') for k in ports), ports
    service = await eventually(lambda: kube.get(SERVICE, "default", "chat"), what="Service chat")
    assert (FIELD_MANAGER, "Apply") in managers(service)
    # Server-set fields we never apply (clusterIP) are nobody's business of ours.
    assert "f:clusterIP" not in str(managers(service)[(FIELD_MANAGER, "Apply")])


async def test_rollout_restart_and_foreign_labels_survive_our_next_apply(
    apiserver: ApiServerProcess, kube: KubeClient, controller: Manager
) -> None:
    await start(kube, extra=ENV)
    code, out = await kubectl(
        apiserver.url, "-n", "default", "rollout", "restart", "deployment/chat"
    )
    assert code == 0, out
    code, out = await kubectl(apiserver.url, "-n", "default", "label", "deployment/chat", "team=a")
    assert code == 0, out
    restarted = (await deployment(kube))["spec"]["template"]["metadata"]["annotations"][
        RESTARTED_AT
    ]

    # Something we own changes (replicas, and an env var we no longer want): we apply.
    await reapply(kube, isvc_yaml("chat", "m", extra="  replicas: 2"))

    async def applied() -> dict[str, Any] | None:
        live = await kube.get(DEPLOYMENT, "default", "chat")
        return live if live and live["spec"].get("replicas") == 2 else None

    live = await eventually(applied, what="replicas: 2 applied")
    await controller.wait_idle()
    live = await deployment(kube)
    # Other managers' fields are still there ...
    assert live["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT] == restarted
    assert live["metadata"]["labels"]["team"] == "a"
    fields = managers(live)
    assert ("kubectl-rollout", "Update") in fields and ("kubectl-label", "Update") in fields
    # ... and the field we stopped applying is gone (SSA removes what its manager drops).
    assert not any(e["name"] == "HF_HUB_OFFLINE" for e in container(live).get("env") or [])


async def test_an_edited_field_we_own_is_put_back(
    apiserver: ApiServerProcess, kube: KubeClient, controller: Manager
) -> None:
    image = container(await start(kube))["image"]
    code, out = await kubectl(
        apiserver.url, "-n", "default", "set", "image", "deployment/chat", "inference=evil:1"
    )
    assert code == 0, out

    async def restored() -> dict[str, Any] | None:
        live = await kube.get(DEPLOYMENT, "default", "chat")
        return live if live and container(live)["image"] == image else None

    live = await eventually(restored, what="image put back")
    # force took the field back: kubectl no longer owns it.
    assert "f:image" not in str(managers(live).get(("kubectl-set", "Update"), {}))


async def test_no_write_when_the_desired_state_holds(
    apiserver: ApiServerProcess, kube: KubeClient, controller: Manager
) -> None:
    await start(kube)
    await controller.wait_idle()
    before = await apiserver.requests()
    reconciled = reconciles(controller, "inferenceservice")
    rv = (await deployment(kube))["metadata"]["resourceVersion"]
    # A label on the InferenceService passes the predicate: a reconcile runs, wanting
    # the same Deployment and Service as before.
    code, out = await kubectl(
        apiserver.url, "-n", "default", "label", "inferenceservice/chat", "touched=yes"
    )
    assert code == 0, out

    async def reconciled_again() -> bool:
        return reconciles(controller, "inferenceservice") > reconciled

    await eventually(reconciled_again, what="a reconcile after the label")
    await controller.wait_idle()
    after = await apiserver.requests()
    writes = {
        k: after.get(k, 0) - before.get(k, 0)
        for k in after
        if k.startswith("PATCH /apis/apps/v1/")
        or k.startswith("PATCH /api/v1/namespaces/default/services")
    }
    assert not any(writes.values()), writes
    assert (await deployment(kube))["metadata"]["resourceVersion"] == rv


async def test_a_cpu_model_turned_gpu_switches_the_deployment_to_recreate(
    kube: KubeClient, controller: Manager
) -> None:
    """RollingUpdate (CPU) to Recreate (GPU): the apiserver defaults rollingUpdate and
    refuses it next to Recreate, so we apply it ourselves to own it and drop it."""
    await apply_text(kube, model_yaml("m", "      enabled: false"))
    await apply_text(kube, isvc_yaml("chat", "m"))
    live = await deployment(kube)
    assert live["spec"]["strategy"]["type"] == "RollingUpdate"
    await reapply(kube, model_yaml("m", "      enabled: true\n      count: 1"))

    async def recreate() -> dict[str, Any] | None:
        dep = await kube.get(DEPLOYMENT, "default", "chat")
        strategy = ((dep or {}).get("spec") or {}).get("strategy") or {}
        return dep if strategy == {"type": "Recreate"} else None

    await eventually(recreate, what="the Deployment switched to Recreate")
