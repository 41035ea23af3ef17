"""What the quota accounting reads from: the cache's transform and its parse memo."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from api import InvalidSpec, parse_model
from controller.cache import Cache
from controller.informer import Informer
from controller.kube import KubeClient
from controller.resources import MODEL
from objtypes import Obj
from tests.support.manifests import model_yaml
from tests.support.server_contract import kubectl
from tests.support.waiting import eventually
from testserver.process import ApiServerProcess


@pytest.fixture
async def cache(kube: KubeClient) -> AsyncIterator[Cache]:
    cache = Cache()
    informer = Informer(kube, MODEL, watch_timeout=30)
    cache.add(informer)
    task = asyncio.create_task(informer.run())
    await informer.synced.wait()
    yield cache
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _cached(cache: Cache, name: str, rv: str | None = None) -> Obj:
    async def probe() -> Obj | None:
        obj = cache.get(MODEL, "default", name)
        if obj is None or (rv is not None and obj["metadata"]["resourceVersion"] != rv):
            return None
        return obj

    return await eventually(probe, what=f"model {name} in the cache")


async def test_cache_holds_no_managed_fields_and_shares_keys(
    apiserver: ApiServerProcess, kube: KubeClient, cache: Cache
) -> None:
    for name in ("a", "b"):
        text = model_yaml(name, "      enabled: true\n      count: 1")
        code, out = await kubectl(
            apiserver.url, "apply", "--server-side", "-n", "default", "-f", "-", stdin=text
        )
        assert code == 0, out
    stored = await kube.get(MODEL, "default", "a")
    assert stored is not None and stored["metadata"].get("managedFields")  # the server has them
    a, b = await _cached(cache, "a"), await _cached(cache, "b")
    assert "managedFields" not in a["metadata"] and "managedFields" not in b["metadata"]
    # Compacted: the keys and short values both objects repeat are the same objects.
    key_a = next(k for k in a["spec"] if k == "source")
    key_b = next(k for k in b["spec"] if k == "source")
    assert key_a is key_b
    assert a["spec"]["format"] is b["spec"]["format"]
    # Nothing else is lost.
    assert {k: v for k, v in stored.items() if k != "metadata"} == {
        k: v for k, v in a.items() if k != "metadata"
    }


async def test_parse_memo_parses_once_per_generation(kube: KubeClient, cache: Cache) -> None:
    calls: list[Any] = []

    def parse(spec: Any) -> Any:
        calls.append(spec)
        return parse_model(spec)

    created = await kube.create(
        MODEL,
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": "m", "namespace": "default"},
            "spec": {"source": "Qwen/Qwen3-8B", "format": "safetensors"},
        },
    )
    obj = await _cached(cache, "m", created["metadata"]["resourceVersion"])
    first = cache.parsed(MODEL, obj, parse)
    assert cache.parsed(MODEL, obj, parse) is first
    assert len(calls) == 1
    # A status write (a new resourceVersion, the same generation) is not parsed again.
    written = await kube.patch(
        MODEL, "default", "m", {"status": {"phase": "Ready"}}, subresource="status"
    )
    obj = await _cached(cache, "m", written["metadata"]["resourceVersion"])
    assert cache.parsed(MODEL, obj, parse) is first
    assert len(calls) == 1
    changed = await kube.patch(MODEL, "default", "m", {"spec": {"format": "gguf"}})
    obj = await _cached(cache, "m", changed["metadata"]["resourceVersion"])
    assert cache.parsed(MODEL, obj, parse) is not first
    assert len(calls) == 2

    def invalid(spec: Any) -> Any:
        calls.append(spec)
        raise InvalidSpec(["spec: no"])

    for _ in range(2):  # an error is remembered like a value
        with pytest.raises(InvalidSpec):
            cache.parsed(MODEL, obj, invalid)
    assert len(calls) == 3
    await kube.delete(MODEL, "default", "m")

    async def gone() -> bool:
        return cache.get(MODEL, "default", "m") is None

    await eventually(gone, what="m gone")
    assert not any(("default", "m") in memo for memo in cache._parsed[MODEL].values())
