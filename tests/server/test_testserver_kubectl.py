"""kubectl against the test server: discovery, Table output, protobuf bodies, scale."""

from __future__ import annotations

from app.manifests import apply_text
from controller.kube import KubeClient
from tests.support.manifests import isvc_yaml, model_yaml
from tests.support.server_contract import WIDGET_CRD, WIDGETS, call, install, kubectl, widget
from testserver.process import ApiServerProcess

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def test_kubectl_create_namespace_sends_protobuf(apiserver: ApiServerProcess) -> None:
    code, out = await kubectl(apiserver.url, "create", "namespace", "team-a")
    assert code == 0, out
    assert "namespace/team-a created" in out
    status, ns = await call(apiserver.url, "GET", "/api/v1/namespaces/team-a")
    assert status == 200 and ns["metadata"]["name"] == "team-a"
    code, out = await kubectl(
        apiserver.url, "create", "configmap", "c", "-n", "team-a", "--from-literal=k=v"
    )
    assert code == 0, out
    _, cm = await call(apiserver.url, "GET", "/api/v1/namespaces/team-a/configmaps/c")
    assert cm["data"] == {"k": "v"}
    code, out = await kubectl(apiserver.url, "get", "ns")
    assert code == 0 and "team-a" in out and "Active" in out, out


async def test_short_names_categories_and_printer_columns(apiserver: ApiServerProcess) -> None:
    await install(apiserver.url, WIDGET_CRD)
    await call(apiserver.url, "POST", WIDGETS, widget("w1", size="large", replicas=3))
    await call(
        apiserver.url,
        "PATCH",
        f"{WIDGETS}/w1/status",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        "application/merge-patch+json",
    )
    for noun in ("wdg", "widgets", "gadgets"):
        code, out = await kubectl(apiserver.url, "get", noun)
        assert code == 0, out
        header, row = out.splitlines()[:2]
        assert header.split() == ["NAME", "SIZE", "REPLICAS", "READY", "AGE"], out
        assert row.split()[:4] == ["w1", "large", "3", "True"], out
    status, table = await call(apiserver.url, "GET", WIDGETS, headers={"Accept": TABLE})
    assert status == 200 and table["kind"] == "Table"
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    _, discovery = await call(apiserver.url, "GET", "/apis/example.test/v1")
    main = next(r for r in discovery["resources"] if r["name"] == "widgets")
    assert main["shortNames"] == ["wdg"] and main["categories"] == ["gadgets"]
    assert {r["name"] for r in discovery["resources"]} >= {"widgets/status", "widgets/scale"}


async def test_kubectl_get_isvc_with_our_crds(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await apply_text(kube, isvc_yaml("svc", "m"))
    code, out = await kubectl(apiserver.url, "get", "isvc", "-n", "default")
    assert code == 0, out
    assert out.splitlines()[0].startswith("NAME") and "svc" in out
    code, out = await kubectl(apiserver.url, "get", "mdl", "-n", "default")
    assert code == 0 and "m " in out and "ACCELERATOR" in out, out


async def test_kubectl_get_nodes(apiserver: ApiServerProcess) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
        "status": {
            "capacity": {"cpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0"},
        },
    }
    status, body = await call(apiserver.url, "POST", "/api/v1/nodes", node)
    assert status == 201, body
    code, out = await kubectl(apiserver.url, "get", "nodes")
    assert code == 0, out
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert out.splitlines()[1].split()[:3] == ["n1", "Ready", "worker"], out


async def test_kubectl_scale_a_custom_resource(apiserver: ApiServerProcess) -> None:
    await install(apiserver.url, WIDGET_CRD)
    await call(apiserver.url, "POST", WIDGETS, widget("w", replicas=1))
    code, out = await kubectl(apiserver.url, "scale", "widget/w", "--replicas=4", "-n", "default")
    assert code == 0, out
    _, obj = await call(apiserver.url, "GET", f"{WIDGETS}/w")
    assert obj["spec"]["replicas"] == 4 and obj["metadata"]["generation"] == 2
    _, scale = await call(apiserver.url, "GET", f"{WIDGETS}/w/scale")
    assert scale["kind"] == "Scale" and scale["spec"] == {"replicas": 4}
    # The scale goes through the schema: maximum 10.
    code, out = await kubectl(apiserver.url, "scale", "widget/w", "--replicas=11", "-n", "default")
    assert code != 0 and "less than or equal to 10" in out, out


async def test_kubectl_scale_isvc_with_our_crds(
    kube: KubeClient, apiserver: ApiServerProcess
) -> None:
    """`kubectl scale isvc` goes through the InferenceService CRD's scale subresource."""
    await apply_text(kube, isvc_yaml("svc", "m", extra="  replicas: 1"))
    code, out = await kubectl(apiserver.url, "scale", "isvc", "svc", "--replicas=3")
    assert code == 0, out
    assert "scaled" in out, out
    status, body = await call(
        apiserver.url,
        "GET",
        "/apis/inference.llmkube.dev/v1alpha1/namespaces/default/inferenceservices/svc/scale",
    )
    assert status == 200, body
    assert body["spec"]["replicas"] == 3, body
    code, out = await kubectl(apiserver.url, "scale", "isvc", "svc", "--replicas=11")
    assert code != 0 and "replicas" in out, out  # above LLMKube's maximum of 10
