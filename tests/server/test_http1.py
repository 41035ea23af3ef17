"""The lean HTTP/1.1 transport (controller.http1) against real sockets.

Every other test already sends the controller's short requests through it to the test
API server; these cover what that server never does: chunked answers, interim answers,
closes at the worst moment, garbage, silence, TLS with a named server, and the pool's
bounds. The peer is a scripted HTTP server on a real socket, so each case is exact.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_http1.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import trustme
from kubernetes_asyncio import client as k8s_client

from controller.errors import Fenced
from controller.kube import KubeClient
from controller.resources import SECRET
from testserver.process import ApiServerProcess

# -- the client over HTTPS, against the test API server ---------------------------


@pytest.fixture
async def tls_apiserver(tmp_path: Path) -> AsyncIterator[tuple[ApiServerProcess, trustme.CA]]:
    ca = trustme.CA()
    cert = ca.issue_cert("kube.test")  # not the address we dial: the name must be asked for
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "serving.pem"))
    server = await ApiServerProcess.start(
        "--tls-cert-file",
        str(tmp_path / "serving.pem"),
        "--tls-private-key-file",
        str(tmp_path / "serving.pem"),
    )
    yield server, ca
    server.proc.terminate()
    await server.proc.wait()


def https_client(server: ApiServerProcess, ca_file: Path, name: str | None) -> KubeClient:
    configuration = k8s_client.Configuration()
    configuration.host = server.url
    configuration.ssl_ca_cert = str(ca_file)
    configuration.tls_server_name = name
    return KubeClient(configuration, timeout=10)


async def test_https_with_the_cluster_ca_and_server_name(
    tls_apiserver: tuple[ApiServerProcess, trustme.CA], tmp_path: Path
) -> None:
    server, ca = tls_apiserver
    assert server.url.startswith("https://")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client = https_client(server, tmp_path / "ca.pem", "kube.test")
    try:
        assert client.lean
        items, rv = await client.list(SECRET, "default")  # the lean transport
        assert items == [] and rv
        stream = client.watch(SECRET, rv, "default", timeout_seconds=1)  # aiohttp
        async for _ in stream:
            pass
    finally:
        await client.close()


@pytest.mark.parametrize("case", ["other CA", "name not asked for"])
async def test_https_refuses_an_unverified_server(
    tls_apiserver: tuple[ApiServerProcess, trustme.CA], tmp_path: Path, case: str
) -> None:
    server, ca = tls_apiserver
    trusted = trustme.CA() if case == "other CA" else ca
    trusted.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client = https_client(server, tmp_path / "ca.pem", "kube.test" if case == "other CA" else None)
    try:
        with pytest.raises(aiohttp.ClientOSError, match="certificate"):
            await client.list(SECRET, "default")
    finally:
        await client.close()


async def test_a_write_that_waited_for_a_connection_is_fenced_when_leadership_ended(
    apiserver: ApiServerProcess,
) -> None:
    """The fence is asked again right before the send, not only before the wait."""
    client = await KubeClient.connect(apiserver.url, pool_size=1)
    leading = True
    client.fence = lambda path: leading
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}}
    try:
        await client.create(SECRET, {**secret, "metadata": {"name": "s", "namespace": "default"}})
        await apiserver.fault(path="/secrets/slow$", method="GET", delay=0.5)
        slow = asyncio.create_task(client.get(SECRET, "default", "slow"))  # holds the one slot
        await asyncio.sleep(0.1)
        write = asyncio.create_task(client.patch(SECRET, "default", "s", {"data": {"a": "YQ=="}}))
        await asyncio.sleep(0.1)  # the write passed the first check and waits for the slot
        leading = False
        with pytest.raises(Fenced):
            await write
        await slow
    finally:
        await client.close()
    assert "PATCH /api/v1/namespaces/default/secrets/s" not in await apiserver.requests()
