"""The test server enforces CRD structural schemas as kube-apiserver does (own CRDs)."""

from __future__ import annotations

from tests.support.server_contract import (
    GIZMO_CRD,
    WIDGET_CRD,
    WIDGETS,
    call,
    install,
    kubectl,
    widget,
)
from testserver.process import ApiServerProcess


async def test_defaults_and_pruning(apiserver: ApiServerProcess) -> None:
    await install(apiserver.url, WIDGET_CRD)
    obj = widget("w", free={"anything": {"goes": 1}}, tags={"a": "b"})
    obj["spec"]["unknownField"] = 1
    obj["topLevelJunk"] = True
    status, body = await call(apiserver.url, "POST", WIDGETS, obj)
    assert status == 201, body
    assert "unknownField" not in body["spec"] and "topLevelJunk" not in body
    assert body["spec"]["replicas"] == 1 and body["spec"]["minReplicas"] == 0
    assert body["spec"]["free"] == {"anything": {"goes": 1}}
    assert body["spec"]["tags"] == {"a": "b"}


async def test_openapi_keywords_answer_422_with_causes(apiserver: ApiServerProcess) -> None:
    await install(apiserver.url, WIDGET_CRD)
    bad = widget("bad", size="huge", replicas=11, owner="UPPER", ports=[{"port": 0}, {}, {}])
    del bad["spec"]["size"]
    bad["spec"]["replicas"] = "three"
    status, body = await call(apiserver.url, "POST", WIDGETS, bad)
    assert status == 422, body
    assert body["kind"] == "Status" and body["reason"] == "Invalid" and body["code"] == 422
    assert body["details"]["kind"] == "Widget" and body["details"]["group"] == "example.test"
    assert body["details"]["name"] == "bad"
    causes = {c["field"]: c for c in body["details"]["causes"]}
    assert causes["spec.size"]["reason"] == "FieldValueRequired"
    assert "must be of type integer" in causes["spec.replicas"]["message"]
    assert "should match '^[a-z]+$'" in causes["spec.owner"]["message"]
    assert causes["spec.ports"]["reason"] == "FieldValueTooMany"
    assert "greater than or equal to 1" in causes["spec.ports[0].port"]["message"]
    assert causes["spec.ports[1].port"]["reason"] == "FieldValueRequired"
    assert body["message"].startswith('Widget.example.test "bad" is invalid: [')

    status, body = await call(apiserver.url, "POST", WIDGETS, widget("e", size="huge"))
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "field": "spec.size",
            "message": 'Unsupported value: "huge": supported values: "small", "large"',
        },
        # The CRD has CEL rules, which kube-apiserver skips after such an error, saying so.
        {
            "reason": "FieldValueInvalid",
            "field": "<nil>",
            "message": "Invalid value: null: some validation rules were not checked because "
            "the object was invalid; correct the existing errors to complete validation",
        },
    ]
    status, body = await call(apiserver.url, "POST", WIDGETS, widget("m", replicas=11))
    assert body["message"] == (
        'Widget.example.test "m" is invalid: spec.replicas: Invalid value: 11: '
        "spec.replicas in body should be less than or equal to 10"
    )


async def test_cel_rules_and_transition_rules(apiserver: ApiServerProcess) -> None:
    await install(apiserver.url, WIDGET_CRD)
    status, body = await call(
        apiserver.url, "POST", WIDGETS, widget("c", replicas=1, minReplicas=3)
    )
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec",
            "message": 'Invalid value: "object": replicas must be at least minReplicas',
        }
    ]
    status, body = await call(apiserver.url, "POST", WIDGETS, widget("t", immutableId="a"))
    assert status == 201, body  # a transition rule does not run on create
    status, body = await call(
        apiserver.url,
        "PATCH",
        f"{WIDGETS}/t",
        {"spec": {"immutableId": "b"}},
        "application/merge-patch+json",
    )
    assert status == 422 and "immutableId is immutable" in body["message"]
    status, body = await call(
        apiserver.url,
        "PATCH",
        f"{WIDGETS}/t",
        {"spec": {"owner": "x"}},
        "application/merge-patch+json",
    )
    assert status == 200, body


async def test_status_writes_are_validated_and_dry_run_stores_nothing(
    apiserver: ApiServerProcess,
) -> None:
    await install(apiserver.url, WIDGET_CRD)
    await call(apiserver.url, "POST", WIDGETS, widget("s"))
    status, body = await call(
        apiserver.url,
        "PATCH",
        f"{WIDGETS}/s/status",
        {"status": {"replicas": "x"}},
        "application/merge-patch+json",
    )
    assert status == 422 and body["details"]["causes"][0]["field"] == "status.replicas"
    status, body = await call(
        apiserver.url, "POST", f"{WIDGETS}?dryRun=All", widget("d", size="huge")
    )
    assert status == 422
    status, body = await call(apiserver.url, "POST", f"{WIDGETS}?dryRun=All", widget("d"))
    assert status == 201 and body["spec"]["replicas"] == 1
    status, _ = await call(apiserver.url, "GET", f"{WIDGETS}/d")
    assert status == 404


async def test_unchanged_invalid_values_ratchet(apiserver: ApiServerProcess) -> None:
    """An object stored before a stricter schema stays writable (validation ratcheting)."""
    await install(apiserver.url, GIZMO_CRD)
    path = "/apis/example.test/v1/gizmos"
    status, _ = await call(apiserver.url, "POST", path, {"metadata": {"name": "g"}, "n": -1})
    assert status == 201
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.example.test"
    status, crd = await call(apiserver.url, "GET", crd_path)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "m": {"type": "string"}},
    }
    status, _ = await call(apiserver.url, "PUT", crd_path, crd)
    assert status == 200
    status, body = await call(
        apiserver.url, "PATCH", f"{path}/g", {"m": "x"}, "application/merge-patch+json"
    )
    assert status == 200, body
    status, body = await call(
        apiserver.url, "PATCH", f"{path}/g", {"n": -2}, "application/merge-patch+json"
    )
    assert status == 422 and body["details"]["causes"][0]["field"] == "n"


async def test_kubectl_prints_the_crd_message(apiserver: ApiServerProcess) -> None:
    await install(apiserver.url, WIDGET_CRD)
    manifest = (
        "apiVersion: example.test/v1\nkind: Widget\nmetadata: {name: k, namespace: default}\n"
        "spec: {size: small, replicas: 1, minReplicas: 2}\n"
    )
    code, out = await kubectl(apiserver.url, "apply", "-f", "-", stdin=manifest)
    assert code != 0
    assert 'The Widget "k" is invalid: spec: Invalid value: "object": ' in out, out
    assert "replicas must be at least minReplicas" in out
