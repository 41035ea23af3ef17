"""Proxies from the environment, as client-go's http.ProxyFromEnvironment.

The proxy here is a tiny one on 127.0.0.1 that counts what it carries: CONNECT tunnels
(https servers) and forwarded connections (http servers, absolute-form requests). It
maps every name to 127.0.0.1, so a server URL like https://kube.test:PORT is reachable
only through it: a client that ignored HTTPS_PROXY could not even resolve the name.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_proxy.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import trustme
from kubernetes_asyncio import client as k8s_client

from controller.kube import KubeClient
from controller.resources import SECRET
from testserver.process import ApiServerProcess


@dataclass
class CountingProxy:
    port: int = 0
    tunnels: list[str] = field(default_factory=list)  # CONNECT authorities
    forwarded: list[str] = field(default_factory=list)  # first request lines, plain http
    authorizations: list[str] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ")
            for line in lines[1:]:
                if line.lower().startswith("proxy-authorization:"):
                    self.authorizations.append(line.split(":", 1)[1].strip())
            if method == "CONNECT":
                self.tunnels.append(target)
                port = int(target.rsplit(":", 1)[1])
            else:  # absolute-form: http://name:port/path
                self.forwarded.append(lines[0])
                port = int(target.split("/")[2].rsplit(":", 1)[1])
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(head)
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[CountingProxy]:
    counting = CountingProxy()
    server = await asyncio.start_server(counting.serve, "127.0.0.1", 0)
    counting.port = server.sockets[0].getsockname()[1]
    yield counting
    server.close()


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[ApiServerProcess, Path]]:
    ca = trustme.CA()
    ca.issue_cert("kube.test").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "serving.pem")
    )
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    server = await ApiServerProcess.start(
        "--tls-cert-file",
        str(tmp_path / "serving.pem"),
        "--tls-private-key-file",
        str(tmp_path / "serving.pem"),
        "--bookmark-interval",
        "0.2",
    )
    yield server, tmp_path / "ca.pem"
    await server.stop()


def client_for(url: str, ca: Path | None = None) -> KubeClient:
    configuration = k8s_client.Configuration()
    configuration.host = url
    configuration.ssl_ca_cert = str(ca) if ca else None
    return KubeClient(configuration, timeout=10)


async def exercise(client: KubeClient) -> None:
    """A write and a list on the lean transport, a watch on aiohttp."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default"},
    }
    await client.create(SECRET, secret)
    items, rv = await client.list(SECRET, "default")
    assert [i["metadata"]["name"] for i in items] == ["s"]
    async for _ in client.watch(SECRET, rv, "default", timeout_seconds=1):
        pass


async def test_https_goes_through_the_https_proxy_of_the_environment(
    tls_server: tuple[ApiServerProcess, Path],
    proxy: CountingProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, ca = tls_server
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:p%40ss@127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "other.test,.example.com,10.0.0.0/8")
    client = client_for(f"https://kube.test:{server.port}", ca)
    try:
        assert client.lean  # CONNECT tunnels carry our own connections too
        await exercise(client)
        # No proxy lookup (or ~/.netrc read) in a thread per request: none was made.
        assert asyncio.get_running_loop()._default_executor is None  # type: ignore[attr-defined]
    finally:
        await client.close()
    assert proxy.tunnels.count(f"kube.test:{server.port}") >= 2  # lean pool and the watch
    assert set(proxy.authorizations) == {"Basic dXNlcjpwQHNz"}  # user:p@ss


async def test_no_proxy_sends_the_server_directly(
    tls_server: tuple[ApiServerProcess, Path],
    proxy: CountingProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, ca = tls_server
    monkeypatch.setenv("https_proxy", f"127.0.0.1:{proxy.port}")
    monkeypatch.setenv("no_proxy", "example.com, .test")
    client = client_for(f"https://kube.test:{server.port}", ca)
    try:
        assert client.proxy is None
        with pytest.raises(aiohttp.ClientOSError):  # kube.test resolves nowhere: direct
            await client.list(SECRET, "default")
    finally:
        await client.close()
    assert proxy.tunnels == []


async def test_http_goes_through_the_http_proxy_in_absolute_form(
    apiserver: ApiServerProcess, proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{proxy.port}")  # no scheme: http://
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # for https servers only
    client = client_for(f"http://kube.test:{apiserver.port}")
    try:
        await exercise(client)
    finally:
        await client.close()
    assert proxy.forwarded and proxy.tunnels == []
    assert all(f"http://kube.test:{apiserver.port}/api/v1/" in f for f in proxy.forwarded)


async def test_a_loopback_server_is_never_proxied(
    apiserver: ApiServerProcess, proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    client = client_for(apiserver.url)
    try:
        assert client.proxy is None
        await exercise(client)
    finally:
        await client.close()
    assert (proxy.forwarded, proxy.tunnels) == ([], [])
