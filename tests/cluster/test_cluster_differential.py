"""The differential check: one table of request sequences, each run against our test API
server (testserver/) and the real kube-apiserver 1.34 (devcluster/), their answers
compared as normalised views (tests/support/differential.py).

A row either agrees (the views are equal) or is a known difference: its reason is in
docs/testserver.md ("Differences from kube-apiserver") and each server's exact views are
asserted, so the row fails when either server changes. Each row runs in a namespace of
its own on both servers, the two side by side.

Here the tests that run on the real control plane; those that need no API server are in
tests/unit/test_cluster_differential.py.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from devcluster import KubeCluster
from objtypes import Obj
from tests.support.differential import (
    Row,
    Server,
    run_row,
)
from tests.support.differential_rows import (
    ROWS,
)
from tests.support.paths import REPO
from testserver.process import ApiServerProcess

CRDS = sorted((REPO / "charts/llmkube/crds").glob("*.yaml"))
pytestmark = pytest.mark.timeout(600)


# -- the servers ------------------------------------------------------------------------------


def admin_ssl(cluster: KubeCluster) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cluster.pki.ca))
    context.load_cert_chain(*cluster.admin_cert)
    return context


def kube_server_of(url: str, context: ssl.SSLContext, etcd_port: int) -> Server:
    """kube-apiserver; its history compacted as its own compactor does, through etcd's
    API (the gateway's /v3/kv/compaction at the current revision)."""

    async def compact(session: aiohttp.ClientSession) -> None:
        # A list without resourceVersion is a quorum read: its resourceVersion is etcd's
        # current revision.
        async with session.get(f"{url}/api/v1/namespaces?limit=1", ssl=context) as resp:
            revision = (await resp.json())["metadata"]["resourceVersion"]
        async with session.post(
            f"http://127.0.0.1:{etcd_port}/v3/kv/compaction",
            json={"revision": revision, "physical": True},
        ) as resp:
            assert resp.status == 200, await resp.text()

    return Server("kube-apiserver", url, context, compact)


async def our_server_of(url: str, session: aiohttp.ClientSession) -> Server:
    """Our test server with LLMKube's CRDs (the chart's files, as kube-apiserver gets)."""
    for path in CRDS:
        async with session.post(
            f"{url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            json=yaml.safe_load(path.read_text()),
        ) as resp:
            assert resp.status == 201, await resp.text()

    async def compact(session: aiohttp.ClientSession) -> None:
        async with session.post(f"{url}/_testserver/compact") as resp:
            assert resp.status == 200, await resp.text()

    return Server("testserver", url, None, compact)


async def make_namespace(server: Server, session: aiohttp.ClientSession, name: str) -> None:
    async with session.post(
        f"{server.url}/api/v1/namespaces",
        json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        ssl=server.ssl if server.ssl is not None else True,
    ) as resp:
        assert resp.status in (201, 409), await resp.text()


@pytest.fixture(scope="module")
def kube_server(kube_cluster: KubeCluster, llmkube_crds: list[Obj]) -> Server:
    return kube_server_of(kube_cluster.url, admin_ssl(kube_cluster), kube_cluster.etcd_port)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def test_server() -> AsyncIterator[Server]:
    """One test server for the module (rows use namespaces of their own)."""
    process = await ApiServerProcess.start("--bookmark-interval", "0.2")
    try:
        async with aiohttp.ClientSession() as session:
            server = await our_server_of(process.url, session)
        yield server
    finally:
        await process.stop()


def explain(row: Row, ours: list[Any], theirs: list[Any]) -> str:
    lines = [f"row {row.name}:"]
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        mark = "  " if a == b else "!="
        lines.append(f"{mark} step {i}\n   testserver:     {a}\n   kube-apiserver: {b}")
    return "\n".join(lines)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
async def test_both_servers_answer_alike(
    row: Row, kube_server: Server, test_server: Server, namespace: str
) -> None:
    async with aiohttp.ClientSession() as session:
        await make_namespace(test_server, session, namespace)
    ours, theirs = await run_row(row, [(test_server, namespace), (kube_server, namespace)])
    if row.difference is None:
        assert ours == theirs, explain(row, ours, theirs)
    else:
        assert (ours, theirs) == (row.difference.testserver, row.difference.kube), explain(
            row, ours, theirs
        )
