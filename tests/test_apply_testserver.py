"""The test server's server-side apply where the controller relies on it, as kube-apiserver.

Built-in kinds merge lists by kube's list-map keys (containers and env by name, container
ports by containerPort+protocol, protocol defaulting to TCP), an apply that changes
nothing is no write, a conflict names the field as kube does, and a manager's dropped
fields go away without leaving empty lists behind.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from testserver.process import ApiServerProcess

from .testserver_support import call, kubectl

APPLY = "application/apply-patch+yaml"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(**container: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "main", "image": "img:1", **container}]},
                },
            },
        }
    )


async def apply(url: str, body: str, manager: str, force: bool = False) -> tuple[int, Any]:
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return await call(url, "PATCH", f"{DEPLOYMENTS}/d{query}", body, APPLY)


def container_fields(obj: dict[str, Any], manager: str) -> Any:
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    containers = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    return containers['k:{"name":"main"}']


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
