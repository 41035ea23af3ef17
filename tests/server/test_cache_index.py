"""Cache indexes (add_index / by_index), kept from an informer's events on the test server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import pytest

from controller.cache import Cache
from controller.informer import Informer
from controller.kube import KubeClient
from controller.resources import POD
from objtypes import Obj
from reconcilers.inferenceservice.pods import index_pods, service_pods
from reconcilers.model.pods import index_model_pods, model_pods
from reconcilers.ownership import MODEL_LABEL, SERVICE_LABEL
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess

APP = "app"


def by_app(obj: Obj) -> Iterable[str]:
    value = (obj["metadata"].get("labels") or {}).get(APP)
    return [value] if value else []


def pod(name: str, app: str | None, ns: str = "default") -> Obj:
    labels = {APP: app} if app else {}
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {}}


def names(cache: Cache, value: str, ns: str | None = "default") -> list[str]:
    return sorted(p["metadata"]["name"] for p in cache.by_index(POD, APP, value, ns))


@pytest.fixture
async def cache(kube: KubeClient) -> AsyncIterator[Cache]:
    cache = Cache()
    cache.add_index(POD, APP, by_app)  # before the informer exists, as reconcilers do
    informer = Informer(kube, POD, min_backoff=0.01, max_backoff=0.05, watch_timeout=30)
    cache.add(informer)
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 10)
    yield cache
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def until(cache: Cache, value: str, want: list[str], ns: str | None = "default") -> None:
    async def probe() -> bool:
        return names(cache, value, ns) == want

    await eventually(probe, what=f"index {value} = {want}")


async def test_add_relabel_and_delete_move_the_object(kube: KubeClient, cache: Cache) -> None:
    await kube.create(POD, pod("a-1", "a"))
    await kube.create(POD, pod("a-2", "a"))
    await kube.create(POD, pod("b-1", "b"))
    await kube.create(POD, pod("a-other", "a", ns="other"))
    await kube.create(POD, pod("none", None))
    await until(cache, "a", ["a-1", "a-2"])
    assert names(cache, "b") == ["b-1"]
    assert names(cache, "a", None) == ["a-1", "a-2", "a-other"]  # every namespace
    assert names(cache, "a", "other") == ["a-other"]

    # An update that changes the label moves the pod; one that does not leaves it.
    await kube.patch(POD, "default", "a-2", {"metadata": {"labels": {APP: "b"}}})
    await until(cache, "b", ["a-2", "b-1"])
    assert names(cache, "a") == ["a-1"]
    await kube.patch(POD, "default", "a-1", {"metadata": {"annotations": {"x": "1"}}})
    await eventually(
        lambda: _true(cache.get(POD, "default", "a-1"), "annotations"), what="a-1 annotated"
    )
    found = cache.by_index(POD, APP, "a", "default")
    assert [p["metadata"].get("annotations") for p in found] == [{"x": "1"}]  # the current copy

    # Losing the label takes it out; deleting takes it out.
    await kube.patch(POD, "default", "b-1", {"metadata": {"labels": {APP: None}}})
    await until(cache, "b", ["a-2"])
    await kube.delete(POD, "default", "a-2")
    await until(cache, "b", [])
    assert names(cache, "a", None) == ["a-1", "a-other"]


async def test_relist_files_what_changed_unseen(
    kube: KubeClient, cache: Cache, apiserver: ApiServerProcess
) -> None:
    """Events missed while the watch was down arrive through a relist: the index follows."""
    await kube.create(POD, pod("stays", "a"))
    await kube.create(POD, pod("goes", "a"))
    await kube.create(POD, pod("moves", "a"))
    await until(cache, "a", ["goes", "moves", "stays"])
    informer = cache.informers[POD]
    await apiserver.fault(path="/api/v1/pods", watch=True, status=500, times=-1)
    await apiserver.control("POST", "expire-watches")
    await kube.delete(POD, "default", "goes")
    await kube.patch(POD, "default", "moves", {"metadata": {"labels": {APP: "b"}}})
    await kube.create(POD, pod("new", "a"))
    await apiserver.control("POST", "compact")
    await apiserver.control("DELETE", "faults")
    await eventually(lambda: _true(informer.lists >= 2), what="a relist")
    await until(cache, "a", ["new", "stays"])
    assert names(cache, "b") == ["moves"]


async def test_an_index_added_late_files_what_is_cached(kube: KubeClient, cache: Cache) -> None:
    await kube.create(POD, pod("a-1", "a"))
    await until(cache, "a", ["a-1"])

    def by_name(obj: Obj) -> list[str]:
        return [obj["metadata"]["name"]]

    cache.add_index(POD, "name", by_name)
    assert [p["metadata"]["name"] for p in cache.by_index(POD, "name", "a-1")] == ["a-1"]
    cache.add_index(POD, "name", by_name)  # the same again: nothing happens
    with pytest.raises(ValueError, match="another function"):
        cache.add_index(POD, "name", lambda obj: [])
    with pytest.raises(KeyError):
        cache.by_index(POD, "nope", "a-1")


async def _true(value: Any, key: str | None = None) -> bool:
    if key is not None:
        return bool(value and value["metadata"].get(key))
    return bool(value)


async def test_the_reconcilers_find_their_pods_by_label(kube: KubeClient, cache: Cache) -> None:
    """A Model's pods by the model label, a service's by the service label, per namespace."""
    index_model_pods(cache)
    index_pods(cache)

    def labelled(name: str, ns: str, **labels: str) -> Obj:
        return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {}}

    await kube.create(POD, labelled("svc-a-1", "default", **{MODEL_LABEL: "m", SERVICE_LABEL: "a"}))
    await kube.create(POD, labelled("svc-b-1", "default", **{MODEL_LABEL: "m", SERVICE_LABEL: "b"}))
    await kube.create(POD, labelled("prefetch-m", "default", **{MODEL_LABEL: "m"}))
    await kube.create(POD, labelled("other-ns", "other", **{MODEL_LABEL: "m"}))
    await kube.create(POD, labelled("other-model", "default", **{MODEL_LABEL: "n"}))

    def of_model() -> list[str]:
        return sorted(p["metadata"]["name"] for p in model_pods(cache, "default", "m"))

    await eventually(lambda: _ready(of_model, ["prefetch-m", "svc-a-1", "svc-b-1"]), what="m")
    isvc = {"metadata": {"name": "a", "namespace": "default", "uid": "u"}}
    assert [p["metadata"]["name"] for p in service_pods(cache, isvc)] == ["svc-a-1"]
    assert [p["metadata"]["name"] for p in model_pods(cache, "other", "m")] == ["other-ns"]


async def _ready(found: Callable[[], list[str]], want: list[str]) -> bool:
    return found() == want
