"""spec.slo and spec.endpoint.gateway through the controller, on the test API server with
the real CRDs of Pyrra v0.10.1, Envoy Gateway v1.8.1 and Envoy AI Gateway v1.0.0, read
from their Go modules (devcluster/modules.py; skipped, saying why, without go or the
proxy): applied and owned, renamed, removed with the field or the service, each missing
CRD named on a condition, and every request covered by the chart's RBAC."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from app.controllers import reconcilers
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE
from devcluster import modules
from objtypes import Obj
from reconcilers.inferenceservice.gateway import AI_GATEWAY_ROUTE, AI_SERVICE_BACKEND, BACKEND
from reconcilers.inferenceservice.slo import PYRRA_SLO
from reconcilers.settings import Settings
from tests.support.chart import find, render, rules_of
from tests.support.manifests import isvc_yaml, model_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition
from testserver.process import ApiServerProcess

GPU_MODEL = model_yaml("m", "      enabled: true\n      count: 1")
SLO = '  slo: {objective: "99.5"}'
LATENCY = '  slo: {objective: "95", indicator: latency, latencyThreshold: "2"}'
GATEWAY = """  endpoint:
    gateway:
      enabled: {enabled}
      gatewayRef: {{name: public, namespace: gateways}}
      modelName: qwen3-8b"""
WAIT = 20.0


def crd_files(*sources: Callable[[], list[Path] | Path]) -> list[Path]:
    """The CRD files from the projects' modules, or the test skipped saying why."""
    paths: list[Path] = []
    for source in sources:
        try:
            found = source()
        except modules.ModuleUnavailable as e:
            pytest.skip(str(e))
        paths += found if isinstance(found, list) else [found]
    return paths


async def install(kube: KubeClient, paths: list[Path]) -> None:
    for path in paths:
        await apply_text(kube, path.read_text())


def gateway_crds() -> list[Path]:
    return crd_files(modules.envoy_gateway_backend_crd, modules.ai_gateway_crds)


@pytest.fixture
async def pyrra_controller(kube: KubeClient) -> AsyncIterator[Manager]:
    """The controller with --enable-pyrra-slo."""
    config = ManagerConfig(http_port=0, http_host="127.0.0.1", workers=2, watch_timeout=30)
    manager = Manager(kube, config, reconcilers=reconcilers(Settings(pyrra_slo=True)))
    await manager.start()
    await manager.wait_synced()
    yield manager
    await manager.stop()


async def slos(kube: KubeClient) -> dict[str, Obj]:
    items, _ = await kube.list(PYRRA_SLO, "default")
    return {i["metadata"]["name"]: i for i in items}


async def slo_names_become(kube: KubeClient, want: set[str]) -> dict[str, Obj]:
    async def probe() -> list[dict[str, Obj]] | None:
        found = await slos(kube)
        return [found] if set(found) == want else None  # a list: {} is an answer too

    return (await eventually(probe, WAIT, what=f"ServiceLevelObjectives {sorted(want)}"))[0]


async def condition_gone(kube: KubeClient, type_: str) -> Obj:
    async def probe() -> Obj | None:
        isvc = await kube.get(INFERENCE_SERVICE, "default", "chat")
        return isvc if isvc and condition(isvc, type_) is None else None

    return await eventually(probe, WAIT, what=f"{type_} taken off the status")


# -- the requests, against the chart's RBAC --------------------------------------------------

VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
VERBS["WATCH"] = "watch"


def permission(entry: str) -> tuple[str, str, str] | None:
    """'PATCH /apis/g/v/namespaces/n/things/x' -> ('g', 'things', 'patch'); None for
    discovery (/apis/g/v), which every authenticated user may read."""
    method, path = entry.split(" ", 1)
    parts = [p for p in path.split("?")[0].split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if not rest:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] + ("/" + rest[2] if len(rest) == 3 else "")
    verb = VERBS[method]
    return group, resource, "list" if verb == "get" and len(rest) == 1 else verb


async def forbidden(apiserver: ApiServerProcess) -> tuple[set[tuple[str, str, str]], set[Any]]:
    """(the requests the chart with pyrra.enabled would refuse, all the requests made)."""
    used = {
        p for e in await apiserver.requests() if "/_testserver" not in e if (p := permission(e))
    }
    allowed = rules_of(find(render({"pyrra": {"enabled": True}}), "ClusterRole"))
    # The test's own writes and reads of what it applies.
    mine = {
        (g, r, v)
        for g, r in (
            ("inference.llmkube.dev", "models"),
            ("inference.llmkube.dev", "inferenceservices"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
        )
        for v in ("get", "create", "update", "delete")
    }
    return used - allowed - mine, used


# -- spec.slo ----------------------------------------------------------------------------------


async def test_slo_is_applied_owned_renamed_and_removed(
    kube: KubeClient, apiserver: ApiServerProcess, pyrra_controller: Manager
) -> None:
    await install(kube, crd_files(modules.pyrra_crd))
    await apiserver.control("DELETE", "requests")
    await reapply(kube, GPU_MODEL)
    await reapply(kube, isvc_yaml("chat", "m", "vllm", SLO))
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "chat", "SLOReady", "True", "SLOCreated")
    assert condition(isvc, "FieldsServed") is None  # nothing reported unserved
    assert condition(isvc, "RuntimeConfigured")["status"] == "True"  # type: ignore[index]
    slo = (await slo_names_become(kube, {"chat-availability"}))["chat-availability"]
    owner = slo["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "InferenceService",
        isvc["metadata"]["uid"],
        True,
    )
    assert slo["spec"]["target"] == "99.5" and slo["spec"]["window"] == "28d"
    assert slo["spec"]["indicator"]["bool_gauge"]["metric"] == (
        'llmkube_inferenceservice_ready{namespace="default",inferenceservice="chat"}'
    )

    # Another indicator is another name: the old object goes.
    await reapply(kube, isvc_yaml("chat", "m", "vllm", LATENCY))
    latency = (await slo_names_become(kube, {"chat-latency"}))["chat-latency"]
    assert 'le="2.0"' in latency["spec"]["indicator"]["latency"]["success"]["metric"]
    isvc = await wait_condition(kube, INFERENCE_SERVICE, "chat", "SLOReady", "True")
    assert "chat-latency" in condition(isvc, "SLOReady")["message"]  # type: ignore[index]

    # No latency histogram on SGLang: said so, and no stale SLO keeps alerting.
    await reapply(kube, isvc_yaml("chat", "m", "sglang", LATENCY))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "chat", "SLOReady", "False", "IndicatorUnsupportedForRuntime"
    )
    await slo_names_become(kube, set())

    # Back, then spec.slo cleared: the object and the condition go.
    await reapply(kube, isvc_yaml("chat", "m", "vllm", SLO))
    await slo_names_become(kube, {"chat-availability"})
    await reapply(kube, isvc_yaml("chat", "m", "vllm"))
    await slo_names_become(kube, set())
    await condition_gone(kube, "SLOReady")

    # Set again, then the service deleted: the owner reference takes the SLO with it.
    await reapply(kube, isvc_yaml("chat", "m", "vllm", SLO))
    await slo_names_become(kube, {"chat-availability"})
    await pyrra_controller.wait_idle()
    refused, used = await forbidden(apiserver)
    assert not refused, f"requests the chart's RBAC would forbid: {sorted(refused)}"
    # (An apply that creates is a PATCH here; kube-apiserver also asks for create, which the
    # cluster tier's real authorizer checks.)
    for verb in ("get", "list", "patch", "delete"):
        assert ("pyrra.dev", "servicelevelobjectives", verb) in used, verb
    await kube.delete(INFERENCE_SERVICE, "default", "chat")
    await slo_names_become(kube, set())


async def test_slo_without_the_switch_is_reported_and_nothing_is_made(
    kube: KubeClient, controller: Manager
) -> None:
    await install(kube, crd_files(modules.pyrra_crd))
    await reapply(kube, GPU_MODEL)
    await reapply(kube, isvc_yaml("chat", "m", "vllm", SLO))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "chat", "SLOReady", "False", "IntegrationDisabled"
    )
    assert "--enable-pyrra-slo" in condition(isvc, "SLOReady")["message"]  # type: ignore[index]
    assert await kube.get(DEPLOYMENT, "default", "chat") is not None  # the rest is served
    await controller.wait_idle()
    assert await slos(kube) == {}
    await reapply(kube, isvc_yaml("chat", "m", "vllm"))
    await condition_gone(kube, "SLOReady")


async def test_missing_crds_are_named_and_the_workload_is_served(
    kube: KubeClient, pyrra_controller: Manager
) -> None:
    await reapply(kube, GPU_MODEL)
    extra = SLO + "\n" + GATEWAY.format(enabled="true")
    await reapply(kube, isvc_yaml("chat", "m", "vllm", extra))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "chat", "SLOReady", "False", "PyrraNotInstalled"
    )
    message = condition(isvc, "SLOReady")["message"]  # type: ignore[index]
    assert "servicelevelobjectives.pyrra.dev" in message
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "chat", "GatewayReady", "False", "GatewayCRDsNotInstalled"
    )
    message = condition(isvc, "GatewayReady")["message"]  # type: ignore[index]
    for crd in (
        "backends.gateway.envoyproxy.io",
        "aiservicebackends.aigateway.envoyproxy.io",
        "aigatewayroutes.aigateway.envoyproxy.io",
    ):
        assert crd in message, message
    assert isvc["status"]["gateway"] == {"routeReady": False, "modelName": "qwen3-8b"}
    assert condition(isvc, "RuntimeConfigured")["status"] == "True"  # type: ignore[index]
    assert await kube.get(DEPLOYMENT, "default", "chat") is not None


# -- spec.endpoint.gateway -----------------------------------------------------------------------


async def gateway_objects(kube: KubeClient) -> dict[str, Obj | None]:
    return {
        rt.kind: await kube.get(rt, "default", "chat")
        for rt in (BACKEND, AI_SERVICE_BACKEND, AI_GATEWAY_ROUTE)
    }


async def test_gateway_route_is_applied_owned_and_removed_when_disabled(
    kube: KubeClient, apiserver: ApiServerProcess, controller: Manager
) -> None:
    await install(kube, gateway_crds())
    await apiserver.control("DELETE", "requests")
    await reapply(kube, GPU_MODEL)
    await reapply(kube, isvc_yaml("chat", "m", "vllm", GATEWAY.format(enabled="true")))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "chat", "GatewayReady", "True", "Exposed", timeout=WAIT
    )
    assert isvc["status"]["gateway"] == {"routeReady": True, "modelName": "qwen3-8b"}
    found = await gateway_objects(kube)
    for kind, obj in found.items():
        assert obj is not None, kind
        assert obj["metadata"]["ownerReferences"][0]["uid"] == isvc["metadata"]["uid"], kind
    route = found["AIGatewayRoute"]
    assert route["spec"]["parentRefs"][0]["name"] == "public"  # type: ignore[index]
    header = route["spec"]["rules"][0]["matches"][0]["headers"][0]  # type: ignore[index]
    assert (header["name"], header["value"]) == ("x-ai-eg-model", "qwen3-8b")

    await reapply(kube, isvc_yaml("chat", "m", "vllm", GATEWAY.format(enabled="false")))

    async def removed() -> bool:
        return all(o is None for o in (await gateway_objects(kube)).values())

    await eventually(removed, WAIT, what="the three gateway objects deleted")
    isvc = await condition_gone(kube, "GatewayReady")
    assert "gateway" not in isvc["status"]

    await reapply(kube, isvc_yaml("chat", "m", "vllm", GATEWAY.format(enabled="true")))
    await wait_condition(kube, INFERENCE_SERVICE, "chat", "GatewayReady", "True", timeout=WAIT)
    await controller.wait_idle()
    refused, used = await forbidden(apiserver)
    assert not refused, f"requests the chart's RBAC would forbid: {sorted(refused)}"
    for resource in ("backends", "aiservicebackends", "aigatewayroutes"):
        for verb in ("get", "patch", "delete"):
            assert any(u[1:] == (resource, verb) for u in used), (resource, verb)
    await kube.delete(INFERENCE_SERVICE, "default", "chat")
    await eventually(removed, WAIT, what="the gateway objects collected with the service")


async def test_an_object_of_that_name_not_ours_is_left_alone_and_named(
    kube: KubeClient, controller: Manager
) -> None:
    await install(kube, gateway_crds())
    theirs: Obj = {
        "apiVersion": BACKEND.api_version,
        "kind": BACKEND.kind,
        "metadata": {"name": "chat", "namespace": "default"},
        "spec": {"endpoints": [{"fqdn": {"hostname": "elsewhere.example.com", "port": 443}}]},
    }
    await kube.create(BACKEND, theirs)
    await reapply(kube, GPU_MODEL)
    await reapply(kube, isvc_yaml("chat", "m", "vllm", GATEWAY.format(enabled="true")))
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "chat", "GatewayReady", "False", "ObjectNotOwned"
    )
    assert "Backend chat exists" in condition(isvc, "GatewayReady")["message"]  # type: ignore[index]
    backend = await kube.get(BACKEND, "default", "chat")
    assert backend is not None and backend["spec"]["endpoints"] == theirs["spec"]["endpoints"]
    assert "ownerReferences" not in backend["metadata"]
    assert await kube.get(AI_GATEWAY_ROUTE, "default", "chat") is None
