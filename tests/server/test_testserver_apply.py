"""The test server's server-side apply, as kube-apiserver does it.

managedFields per manager and operation, conflicts between managers (naming the field
as kube does) and force, fields a manager drops going away (without leaving empty lists
behind), built-in kinds merging lists by kube's list-map keys (containers and env by
name, container ports by containerPort+protocol, protocol defaulting to TCP), an apply
that changes nothing being no write, and kubectl apply --server-side.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests.support.server_contract import WIDGET_CRD, WIDGETS, call, install, kubectl
from testserver.process import ApiServerProcess

APPLY = "application/apply-patch+yaml"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(
    image: str = "img:1",
    replicas: int | None = None,
    labels: dict[str, str] | None = None,
    **container: Any,
) -> str:
    """Deployment "d" with one container "main"; container holds more of its fields."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "main", "image": image, **container}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    metadata: dict[str, Any] = {"name": "d"}
    if labels is not None:
        metadata["labels"] = labels
    return yaml.safe_dump(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}
    )


async def apply(url: str, body: str, manager: str, force: bool = False) -> tuple[int, Any]:
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return await call(url, "PATCH", f"{DEPLOYMENTS}/d{query}", body, APPLY)


def container_fields(obj: dict[str, Any], manager: str) -> Any:
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    containers = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    return containers['k:{"name":"main"}']


async def test_managers_own_fields_and_conflict(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    status, obj = await apply(url, deployment(replicas=2), "ops")
    assert status == 201, obj
    entry = obj["metadata"]["managedFields"][0]
    assert entry["manager"] == "ops" and entry["operation"] == "Apply"
    assert "f:replicas" in entry["fieldsV1"]["f:spec"]
    containers = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert 'k:{"name":"main"}' in containers

    # Another manager setting the same field to another value conflicts.
    status, body = await apply(url, deployment(replicas=5), "autoscaler")
    assert status == 409 and body["reason"] == "Conflict", body
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "ops"',  # an Apply manager: no "using <apiVersion>"
            "field": ".spec.replicas",
        }
    ]
    assert body["message"].startswith("Apply failed with 1 conflict")
    # Same value: shared ownership, no conflict.
    status, _ = await apply(url, deployment(replicas=2), "other")
    assert status == 200
    # force takes the field over.
    status, obj = await apply(url, deployment(replicas=5), "autoscaler", force=True)
    assert status == 200 and obj["spec"]["replicas"] == 5
    owners = {e["manager"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}
    assert "f:replicas" in owners["autoscaler"]["f:spec"]
    assert "f:replicas" not in owners["ops"].get("f:spec", {})


async def test_fields_dropped_from_the_config_are_removed(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    await apply(url, deployment(replicas=2, labels={"team": "a"}), "ops")
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


async def test_list_map_keys_of_built_ins(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    status, obj = await apply(url, deployment(ports=[{"containerPort": 8080}]), "ctl")
    assert status == 201, obj
    # kube keys container ports by containerPort and protocol, protocol defaulting to TCP.
    ports = container_fields(obj, "ctl")["f:ports"]
    assert 'k:{"containerPort":8080,"protocol":"TCP"}' in ports, ports
    # Another manager's env var and port are items of their own, beside ours.
    other = deployment(
        env=[{"name": "INJECTED", "value": "1"}],
        ports=[{"containerPort": 9090, "protocol": "TCP"}],
    )
    status, obj = await apply(url, other, "injector")
    assert status == 200, obj
    status, obj = await apply(url, deployment(ports=[{"containerPort": 8080}]), "ctl")
    assert status == 200, obj
    main = obj["spec"]["template"]["spec"]["containers"][0]
    assert main["env"] == [{"name": "INJECTED", "value": "1"}]
    assert sorted(p["containerPort"] for p in main["ports"]) == [8080, 9090]


async def test_an_apply_that_changes_nothing_is_no_write(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    _, first = await apply(url, deployment(), "ctl")
    code, out = await kubectl(url, "-n", "default", "rollout", "restart", "deployment/d")
    assert code == 0, out
    _, restarted = await call(url, "GET", f"{DEPLOYMENTS}/d")
    assert first["metadata"]["resourceVersion"] != restarted["metadata"]["resourceVersion"]
    status, again = await apply(url, deployment(), "ctl")
    assert status == 200
    assert again["metadata"]["resourceVersion"] == restarted["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == restarted["metadata"]["managedFields"]


async def test_dropped_fields_leave_no_empty_lists(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    await apply(url, deployment(resources={"claims": [{"name": "gpu"}]}), "ctl")
    status, obj = await apply(url, deployment(resources={"limits": {"cpu": "1"}}), "ctl")
    assert status == 200, obj
    assert obj["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}
    status, obj = await apply(url, deployment(), "ctl")
    assert "resources" not in obj["spec"]["template"]["spec"]["containers"][0]
    # A field another manager also sets stays when we drop it.
    await apply(url, deployment(args=["--a"]), "ctl")
    await apply(url, deployment(args=["--a"]), "other")
    status, obj = await apply(url, deployment(), "ctl")
    assert obj["spec"]["template"]["spec"]["containers"][0]["args"] == ["--a"]


async def test_conflicts_without_force_and_force_takes_over(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    await apply(url, deployment(), "ctl")
    code, out = await kubectl(url, "-n", "default", "set", "image", "deployment/d", "main=img:2")
    assert code == 0, out
    status, body = await apply(url, deployment(), "ctl")
    assert status == 409, body
    # kube-apiserver's spelling of the field, with the item's key.
    assert [c["field"] for c in body["details"]["causes"]] == [
        '.spec.template.spec.containers[name="main"].image'
    ]
    assert 'conflict with "kubectl-set"' in body["message"]
    status, obj = await apply(url, deployment(), "ctl", force=True)
    assert status == 200 and obj["spec"]["template"]["spec"]["containers"][0]["image"] == "img:1"


async def test_owner_references_merge_by_uid(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    uids = {}
    for name in ("ours", "theirs"):  # owners that exist, or GC collects the Deployment
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        _, created = await call(url, "POST", "/api/v1/namespaces/default/configmaps", cm)
        uids[name] = created["metadata"]["uid"]

    def owned_by(name: str) -> str:
        body = yaml.safe_load(deployment())
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uids[name]}
        body["metadata"]["ownerReferences"] = [ref]
        return yaml.safe_dump(body)

    def owners(obj: dict[str, Any]) -> list[str]:
        return [r["name"] for r in obj["metadata"].get("ownerReferences") or []]

    await apply(url, owned_by("ours"), "ctl")
    status, obj = await apply(url, owned_by("theirs"), "other")
    assert status == 200, obj
    status, obj = await apply(url, owned_by("ours"), "ctl")
    assert owners(obj) == ["ours", "theirs"]
    # Dropping ours leaves theirs.
    status, obj = await apply(url, deployment(), "ctl")
    assert owners(obj) == ["theirs"]


async def test_apply_bodies_in_json_and_in_flow_yaml(apiserver: ApiServerProcess) -> None:
    """JSON (what controllers send, decoded fast) and YAML that merely starts with a
    brace (flow style) are both apply bodies."""
    as_json = json.dumps(yaml.safe_load(deployment()))
    status, obj = await apply(apiserver.url, as_json, "ctl")
    assert status in (200, 201), obj
    flow = yaml.safe_dump(yaml.safe_load(deployment()), default_flow_style=True)
    assert flow.startswith("{") and not flow.startswith('{"')
    status, obj = await apply(apiserver.url, flow, "other")
    assert status == 200, obj
    assert {e["manager"] for e in obj["metadata"]["managedFields"]} >= {"ctl", "other"}
