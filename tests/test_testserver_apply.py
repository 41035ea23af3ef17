"""Server-side apply: managedFields, conflicts between managers, force, kubectl --server-side."""

from __future__ import annotations

import json

import yaml

from testserver.process import ApiServerProcess

from .testserver_support import WIDGET_CRD, WIDGETS, call, install, kubectl

APPLY = "application/apply-patch+yaml"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(image: str, replicas: int | None = None, **labels: str) -> str:
    spec: dict[str, object] = {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "main", "image": image}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "labels": labels},
            "spec": spec,
        }
    )


async def apply(url: str, body: str, manager: str, force: bool = False) -> tuple[int, dict]:  # type: ignore[type-arg]
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return await call(url, "PATCH", f"{DEPLOYMENTS}/d{query}", body, APPLY)


async def test_managers_own_fields_and_conflict(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    status, obj = await apply(url, deployment("img:1", replicas=2), "ops")
    assert status == 201, obj
    entry = obj["metadata"]["managedFields"][0]
    assert entry["manager"] == "ops" and entry["operation"] == "Apply"
    assert "f:replicas" in entry["fieldsV1"]["f:spec"]
    containers = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert 'k:{"name":"main"}' in containers

    # Another manager setting the same field to another value conflicts.
    status, body = await apply(url, deployment("img:1", replicas=5), "autoscaler")
    assert status == 409 and body["reason"] == "Conflict", body
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "ops" using apps/v1',
            "field": ".spec.replicas",
        }
    ]
    assert body["message"].startswith("Apply failed with 1 conflict")
    # Same value: shared ownership, no conflict.
    status, _ = await apply(url, deployment("img:1", replicas=2), "other")
    assert status == 200
    # force takes the field over.
    status, obj = await apply(url, deployment("img:1", replicas=5), "autoscaler", force=True)
    assert status == 200 and obj["spec"]["replicas"] == 5
    owners = {e["manager"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}
    assert "f:replicas" in owners["autoscaler"]["f:spec"]
    assert "f:replicas" not in owners["ops"].get("f:spec", {})


async def test_fields_dropped_from_the_config_are_removed(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    await apply(url, deployment("img:1", replicas=2, team="a"), "ops")
    status, obj = await apply(url, deployment("img:2"), "ops")
    assert status == 200, obj
    assert "replicas" not in obj["spec"] and "team" not in obj["metadata"].get("labels", {})
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "img:2"
    # An Update by another writer records its own entry.
    status, obj = await call(
        url,
        "PATCH",
        f"{DEPLOYMENTS}/d?fieldManager=editor",
        {"metadata": {"labels": {"edited": "yes"}}},
        "application/merge-patch+json",
    )
    updates = [e for e in obj["metadata"]["managedFields"] if e["operation"] == "Update"]
    assert updates[0]["manager"] == "editor"
    assert "f:edited" in updates[0]["fieldsV1"]["f:metadata"]["f:labels"]


async def test_kubectl_apply_server_side(apiserver: ApiServerProcess) -> None:
    await install(apiserver.url, WIDGET_CRD)
    manifest = json.dumps(
        {
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"size": "small", "replicas": 2},
        }
    )
    code, out = await kubectl(apiserver.url, "apply", "--server-side", "-f", "-", stdin=manifest)
    assert code == 0 and "serverside-applied" in out, out
    _, obj = await call(apiserver.url, "GET", f"{WIDGETS}/w")
    assert obj["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert obj["spec"]["replicas"] == 2 and obj["spec"]["minReplicas"] == 0  # defaulted
    status, _ = await call(
        apiserver.url,
        "PATCH",
        f"{WIDGETS}/w?fieldManager=controller&force=true",
        {"apiVersion": "example.test/v1", "kind": "Widget", "spec": {"replicas": 3}},
        APPLY,
    )
    assert status == 200
    code, out = await kubectl(apiserver.url, "apply", "--server-side", "-f", "-", stdin=manifest)
    assert code != 0 and "conflict" in out.lower(), out
    code, out = await kubectl(
        apiserver.url, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest
    )
    assert code == 0, out
    _, obj = await call(apiserver.url, "GET", f"{WIDGETS}/w")
    assert obj["spec"]["replicas"] == 2
