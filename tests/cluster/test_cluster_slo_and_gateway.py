"""spec.slo and spec.endpoint.gateway on the real control plane.

The real CRDs, from their projects' Go modules (devcluster/modules.py; skipped, saying
why, without go or the proxy): Gateway API v1.5.1's GatewayClass and Gateway, Envoy
Gateway v1.8.1's Backend, Envoy AI Gateway v1.0.0's AIServiceBackend and AIGatewayRoute,
Pyrra v0.10.1's ServiceLevelObjective. A real Gateway is created; the chart's controller
(pyrra.enabled, under the chart ServiceAccount's token: a missing rule is a 403) applies
the ServiceLevelObjective and the route objects, the real kube-apiserver validates them
against those schemas, and kube-controller-manager's garbage collector deletes them with
the InferenceService.
"""

from __future__ import annotations

import urllib.error
from collections.abc import Callable
from pathlib import Path

import pytest

from devcluster import KubeCluster, modules
from objtypes import Obj
from reconcilers.writes.apply import FIELD_MANAGER
from tests.support.cluster_objects import SMALL_MODEL, apply_yaml, get, model_cache_volume, wait_for
from tests.support.kube_cluster import ControllerProcess
from tests.support.waiting import condition

pytestmark = pytest.mark.timeout(600)

GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public}
spec:
  gatewayClassName: envoy
  listeners:
    - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Same}}}
"""
SERVICE = (
    SMALL_MODEL
    + """---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: small}
spec:
  modelRef: small
  replicas: 1
  slo: {objective: "99.5"}
  endpoint:
    gateway:
      enabled: true
      gatewayRef: {name: public}
      modelName: small-chat
"""
)
ISVC = "/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices/small"
OBJECTS = {
    "ServiceLevelObjective": "/apis/pyrra.dev/v1alpha1/namespaces/{ns}/servicelevelobjectives/"
    "small-availability",
    "Backend": "/apis/gateway.envoyproxy.io/v1alpha1/namespaces/{ns}/backends/small",
    "AIServiceBackend": "/apis/aigateway.envoyproxy.io/v1beta1/namespaces/{ns}/"
    "aiservicebackends/small",
    "AIGatewayRoute": "/apis/aigateway.envoyproxy.io/v1beta1/namespaces/{ns}/aigatewayroutes/small",
}


def crd_files() -> list[Path]:
    """The projects' own CRD files, or the test skipped saying why."""
    sources: list[Callable[[], list[Path] | Path]] = [
        modules.gateway_api_crds,
        modules.envoy_gateway_backend_crd,
        modules.ai_gateway_crds,
        modules.pyrra_crd,
    ]
    paths: list[Path] = []
    for source in sources:
        try:
            found = source()
        except modules.ModuleUnavailable as e:
            pytest.skip(str(e))
        paths += found if isinstance(found, list) else [found]
    return paths


@pytest.fixture(scope="module")
def foreign_crds(kube_cluster: KubeCluster) -> list[Obj]:
    """The five CRDs, created on the real apiserver and Established."""
    return kube_cluster.install_crds(crd_files())


def test_slo_and_route_are_accepted_owned_and_collected_with_the_service(
    kube_cluster: KubeCluster,
    foreign_crds: list[Obj],
    chart_controller: ControllerProcess,
    namespace: str,
) -> None:
    chart_controller.forget_errors()
    apply_yaml(kube_cluster, GATEWAY, namespace)
    model_cache_volume(kube_cluster, namespace)
    apply_yaml(kube_cluster, SERVICE, namespace)

    seen: list[Obj] = []

    def integrated() -> Obj | None:
        isvc = get(kube_cluster, ISVC.format(ns=namespace)) or {}
        seen[:] = [isvc]
        ready = [(condition(isvc, t) or {}).get("status") for t in ("SLOReady", "GatewayReady")]
        return isvc if ready == ["True", "True"] else None

    try:
        isvc = wait_for(integrated, "SLOReady and GatewayReady True", kube_cluster)
    except AssertionError as e:
        conditions = ((seen[0] if seen else {}).get("status") or {}).get("conditions")
        ours = [line for line in chart_controller.log().splitlines() if namespace in line]
        raise AssertionError(f"{conditions}\n" + "\n".join(ours[-40:])) from e
    assert isvc["status"]["gateway"] == {"routeReady": True, "modelName": "small-chat"}
    uid = isvc["metadata"]["uid"]
    for kind, path in OBJECTS.items():
        obj = get(kube_cluster, path.format(ns=namespace))
        assert obj is not None, kind
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("InferenceService", uid, True)
        managers = {f["manager"] for f in obj["metadata"]["managedFields"]}
        assert FIELD_MANAGER in managers, (kind, managers)
    route = get(kube_cluster, OBJECTS["AIGatewayRoute"].format(ns=namespace)) or {}
    # The apiserver applied the CRD's defaults: a Gateway parent in the Gateway API group.
    parent = route["spec"]["parentRefs"][0]
    assert (parent["name"], parent["kind"], parent["group"]) == (
        "public",
        "Gateway",
        "gateway.networking.k8s.io",
    )
    assert (
        get(
            kube_cluster,
            f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/gateways/public",
        )
        is not None
    )
    assert chart_controller.denied() == []
    assert chart_controller.api_errors(namespace) == []

    kube_cluster.http("DELETE", ISVC.format(ns=namespace))

    def collected() -> list[str] | None:
        left = [k for k, p in OBJECTS.items() if get(kube_cluster, p.format(ns=namespace))]
        return None if left else ["all gone"]

    wait_for(collected, "the garbage collector deleting the service's objects", kube_cluster)


@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ({"objective": "40"}, "objective must be a number between 50 and 99.999"),
        ({"objective": "99.9999"}, "objective must be a number between 50 and 99.999"),
        (
            {"objective": "95", "indicator": "latency"},
            "latencyThreshold is required when indicator is latency",
        ),
        ({"objective": "99", "window": "28 days"}, "spec.slo.window"),
    ],
)
def test_the_apiserver_refuses_llmkubes_invalid_slos(
    kube_cluster: KubeCluster, llmkube_crds: list[Obj], namespace: str, slo: Obj, message: str
) -> None:
    """LLMKube's CEL rules and patterns on spec.slo, compiled and run by kube-apiserver."""
    doc = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "bad-slo", "namespace": namespace},
        "spec": {"modelRef": "m", "slo": slo},
    }
    with pytest.raises(urllib.error.HTTPError) as refused:
        kube_cluster.apply(doc)
    body = str(refused.value.msg)  # the Status, which names the field and the rule
    assert refused.value.code == 422 and message in body, body
