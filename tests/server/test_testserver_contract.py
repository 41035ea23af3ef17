"""The test server's REST contract: selectors, patches, conflicts, generation, paging, GC.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_testserver_contract.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tests.support.server_contract import GIZMO_CRD, WIDGET_CRD, WIDGETS, call, install, widget
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess

CMS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
MERGE = "application/merge-patch+json"


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": name}}


async def names(url: str, path: str) -> list[str]:
    status, body = await call(url, "GET", path)
    assert status == 200, body
    return [o["metadata"]["name"] for o in body["items"]]


async def test_label_and_field_selectors(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    await call(url, "POST", CMS, cm("a", tier="web", env="prod"))
    await call(url, "POST", CMS, cm("b", tier="db", env="prod"))
    await call(url, "POST", CMS, cm("c", tier="web"))
    assert await names(url, f"{CMS}?labelSelector=tier%3Dweb") == ["a", "c"]
    assert await names(url, f"{CMS}?labelSelector=tier%20in%20(web,db),env") == ["a", "b"]
    assert await names(url, f"{CMS}?labelSelector=!env") == ["c"]
    assert await names(url, f"{CMS}?labelSelector=tier!%3Dweb") == ["b"]
    assert await names(url, f"{CMS}?fieldSelector=metadata.name%3Db") == ["b"]


async def test_patch_formats(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    await call(url, "POST", CMS, cm("p"))
    status, body = await call(url, "PATCH", f"{CMS}/p", {"data": {"x": "1", "k": None}}, MERGE)
    assert status == 200 and body["data"] == {"x": "1"}
    ops = [
        {"op": "test", "path": "/data/x", "value": "1"},
        {"op": "add", "path": "/data/y", "value": "2"},
    ]
    status, body = await call(url, "PATCH", f"{CMS}/p", ops, "application/json-patch+json")
    assert status == 200 and body["data"] == {"x": "1", "y": "2"}
    ops = [{"op": "test", "path": "/data/x", "value": "9"}]
    status, _ = await call(url, "PATCH", f"{CMS}/p", ops, "application/json-patch+json")
    assert status == 422
    status, _ = await call(url, "PATCH", f"{CMS}/p", {}, "application/xml")
    assert status == 415


async def test_conflicts_and_generation(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    await install(url, WIDGET_CRD, GIZMO_CRD)
    _, w = await call(url, "POST", WIDGETS, widget("w"))
    assert w["metadata"]["generation"] == 1
    stale = w["metadata"]["resourceVersion"]
    _, w = await call(url, "PATCH", f"{WIDGETS}/w", {"spec": {"replicas": 2}}, MERGE)
    assert w["metadata"]["generation"] == 2
    w["metadata"]["resourceVersion"] = stale
    status, body = await call(url, "PUT", f"{WIDGETS}/w", w)
    assert status == 409 and body["reason"] == "Conflict"
    # With a status subresource: status and metadata changes leave generation alone.
    _, w = await call(url, "PATCH", f"{WIDGETS}/w/status", {"status": {"replicas": 2}}, MERGE)
    assert w["metadata"]["generation"] == 2 and w["status"] == {"replicas": 2}
    # The status subresource changes status only; a stale resourceVersion is a conflict.
    # What it ignores is not validated either: neither is valid here.
    ignored: list[dict[str, Any]] = [
        {"spec": {"replicas": 99}},
        {"metadata": {"labels": {"s": "not valid!"}}},
    ]
    for n, other in enumerate(ignored):
        patch = {**other, "status": {"replicas": n + 3}}
        _, w = await call(url, "PATCH", f"{WIDGETS}/w/status", patch, MERGE)
        assert w["spec"]["replicas"] == 2 and "labels" not in w["metadata"]
        assert w["status"] == {"replicas": n + 3}
    stale_status = {"metadata": {"resourceVersion": stale}, "status": {"replicas": 4}}
    status, _ = await call(url, "PATCH", f"{WIDGETS}/w/status", stale_status, MERGE)
    assert status == 409
    _, w = await call(url, "PATCH", f"{WIDGETS}/w/status", {"status": {"replicas": 2}}, MERGE)
    _, w = await call(url, "PATCH", f"{WIDGETS}/w", {"metadata": {"labels": {"a": "b"}}}, MERGE)
    assert w["metadata"]["generation"] == 2
    _, w = await call(url, "PATCH", f"{WIDGETS}/w", {"status": {"replicas": 5}}, MERGE)
    assert w["status"] == {"replicas": 2}  # status is ignored on the main resource
    # Without one, status is an ordinary field: it bumps generation.
    gizmos = "/apis/example.test/v1/gizmos"
    _, g = await call(url, "POST", gizmos, {"metadata": {"name": "g"}, "spec": {"a": 1}})
    _, g = await call(url, "PATCH", f"{gizmos}/g", {"status": {"ok": True}}, MERGE)
    assert g["metadata"]["generation"] == 2 and g["status"] == {"ok": True}
    _, g = await call(url, "PATCH", f"{gizmos}/g", {"metadata": {"labels": {"x": "y"}}}, MERGE)
    assert g["metadata"]["generation"] == 2


async def test_paged_lists_are_snapshots(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    for i in range(5):
        await call(url, "POST", CMS, cm(f"c{i}"))
    status, page = await call(url, "GET", f"{CMS}?limit=2")
    assert [o["metadata"]["name"] for o in page["items"]] == ["c0", "c1"]
    list_rv = page["metadata"]["resourceVersion"]
    # Writes between pages do not show through, and nothing is skipped.
    await call(url, "DELETE", f"{CMS}/c2")
    await call(url, "PATCH", f"{CMS}/c3", {"data": {"k": "changed"}}, MERGE)
    seen = [o["metadata"]["name"] for o in page["items"]]
    while token := page["metadata"].get("continue"):
        status, page = await call(url, "GET", f"{CMS}?limit=2&continue={token}")
        assert status == 200 and page["metadata"]["resourceVersion"] == list_rv
        seen += [o["metadata"]["name"] for o in page["items"]]
        for o in page["items"]:
            assert o["data"]["k"] == o["metadata"]["name"]
    assert seen == ["c0", "c1", "c2", "c3", "c4"]
    _, page = await call(url, "GET", f"{CMS}?limit=2")
    await call(url, "POST", CMS, cm("after"))
    await apiserver.control("POST", "compact")  # history before "after" is gone
    status, body = await call(url, "GET", f"{CMS}?limit=2&continue={page['metadata']['continue']}")
    assert status == 410 and body["reason"] == "Expired"
    status, body = await call(url, "GET", f"{CMS}?limit=2&continue=bm90LWEtdG9rZW4=")
    assert status == 400


async def test_gc_collects_dependents_of_missing_owners(apiserver: ApiServerProcess) -> None:
    url = apiserver.url
    _, owner = await call(url, "POST", CMS, cm("owner"))
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    child = {**cm("child"), "metadata": {"name": "child", "ownerReferences": [ref]}}
    assert (await call(url, "POST", CMS, child))[0] == 201
    await call(url, "DELETE", f"{CMS}/owner")
    assert "child" not in await names(url, CMS)
    # Created after its owner was deleted: collected as well, not orphaned.
    late = {**cm("late"), "metadata": {"name": "late", "ownerReferences": [ref]}}
    status, _ = await call(url, "POST", CMS, late)
    assert status == 201

    async def collected() -> bool:
        return "late" not in await names(url, CMS)

    await eventually(collected, what="late dependent collected")
    # One live owner among several keeps a dependent.
    _, alive = await call(url, "POST", CMS, cm("alive"))
    ref2 = {**ref, "name": "alive", "uid": alive["metadata"]["uid"]}
    kept = {**cm("kept"), "metadata": {"name": "kept", "ownerReferences": [ref, ref2]}}
    await call(url, "POST", CMS, kept)
    await asyncio.sleep(0.2)
    assert "kept" in await names(url, CMS)


async def test_reads_and_watches_ahead_of_the_server_as_kube_apiserver(
    apiserver: ApiServerProcess,
) -> None:
    """After an etcd restore the server is behind its clients' resourceVersions. A read
    asking for more is refused with 504 Timeout, cause ResourceVersionTooLarge: a paged
    list at once (kube-apiserver reads it from etcd), any other after the watch cache's
    wait, with Retry-After 1. A watch from it is accepted and sends nothing (not even a
    bookmark) at or below it."""
    url = apiserver.url
    _, created = await call(url, "POST", CMS, cm("a"))
    rv = int(created["metadata"]["resourceVersion"])
    ahead = rv + 3
    query = f"limit=1&resourceVersion={ahead}&resourceVersionMatch=NotOlderThan"
    status, body = await call(url, "GET", f"{CMS}?{query}")
    assert status == 504, body
    assert body["reason"] == "Timeout"
    assert body["message"] == f"Timeout: Too large resource version: {ahead}, current: {rv}"
    too_large = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    assert body["details"] == {"causes": [too_large]}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{url}{CMS}?resourceVersion={ahead}") as resp,
    ):
        assert resp.status == 504 and resp.headers["Retry-After"] == "1"
        assert (await resp.json())["details"] == {"causes": [too_large], "retryAfterSeconds": 1}
    status, _ = await call(url, "GET", f"{CMS}?limit=1&resourceVersion={rv}")
    assert status == 200  # reached: served

    watch = f"{url}{CMS}?watch=true&allowWatchBookmarks=true&resourceVersion={ahead}"
    seen: list[tuple[str, str, int]] = []
    async with aiohttp.ClientSession() as session, session.get(watch) as resp:
        assert resp.status == 200
        for name in "bcde":  # resourceVersions rv+1 .. rv+4
            await call(url, "POST", CMS, cm(name))
        while not any(name == "e" for _, name, _ in seen):
            line = await asyncio.wait_for(resp.content.readline(), 10)
            event = json.loads(line)
            meta = event["object"]["metadata"]
            seen.append((event["type"], meta.get("name", ""), int(meta["resourceVersion"])))
    assert [(t, n) for t, n, _ in seen if t != "BOOKMARK"] == [("ADDED", "e")]
    assert all(v > ahead for _, _, v in seen)
