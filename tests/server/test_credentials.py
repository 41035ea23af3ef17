"""Exec-plugin credentials against a test API server that enforces expiring tokens.

The server runs with --require-token; tests/support/exec_plugin.py is the kubeconfig's plugin
and mints tokens from it, logging each run. Without the refresh (the state of issue 22)
the first token was used forever: every request after its expiry answered 401.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_credentials.py.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
import yaml

from app.manifests import apply_text, install_crds
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.resources import MODEL, POD
from tests.support.manager import manager_for
from tests.support.manifests import model_yaml
from tests.support.paths import REPO
from tests.support.waiting import eventually, wait_condition
from testserver.process import ApiServerProcess

PLUGIN = str(REPO / "tests" / "support" / "exec_plugin.py")
V1 = "client.authentication.k8s.io/v1"


@pytest.fixture
async def secured() -> AsyncIterator[ApiServerProcess]:
    server = await ApiServerProcess.start("--bookmark-interval", "0.2", "--require-token")
    yield server
    await server.stop()


@pytest.fixture
async def admin(secured: ApiServerProcess) -> AsyncIterator[KubeClient]:
    """A client with a long-lived static token, to set up and to look."""
    token = (await secured.control("POST", "tokens", {"ttl": 3600}))["token"]
    client = await KubeClient.connect(secured.url, token=token)
    await install_crds(client)
    yield client
    await client.close()


def kubeconfig(
    tmp_path: Path,
    server: ApiServerProcess,
    ttl: float,
    *,
    api_version: str = V1,
    extra_env: dict[str, str] | None = None,
    exec_extra: dict[str, Any] | None = None,
) -> Path:
    env = {
        "LLMKUBE_TEST_SERVER": server.url,
        "LLMKUBE_TEST_TTL": str(ttl),
        "LLMKUBE_TEST_RUNS": str(tmp_path / "runs"),
        **(extra_env or {}),
    }
    exec_config: dict[str, Any] = {
        "apiVersion": api_version,
        "command": sys.executable,
        "args": [PLUGIN],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "interactiveMode": "Never",
        **(exec_extra or {}),
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server.url}}],
        "users": [{"name": "plugin", "user": {"exec": exec_config}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "plugin"}}],
        "current-context": "test",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def runs(tmp_path: Path) -> list[dict[str, Any]]:
    """KUBERNETES_EXEC_INFO of each plugin run so far."""
    path = tmp_path / "runs"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_model_created_after_the_token_expired_is_reconciled(
    secured: ApiServerProcess, admin: KubeClient, tmp_path: Path
) -> None:
    client = await KubeClient.connect(kubeconfig=str(kubeconfig(tmp_path, secured, ttl=5)))
    manager = manager_for(client)
    try:
        await manager.start()
        await manager.wait_synced()
        await apply_text(admin, model_yaml("before", "      enabled: true\n      count: 1"))
        await wait_condition(admin, MODEL, "before", "AcceleratorReady", "True", timeout=15)

        async def plugin_tokens_dead() -> bool:  # only the admin's token is live
            return bool((await secured.control("GET", "tokens"))["live"] == 1)

        await eventually(plugin_tokens_dead, timeout=20, what="the plugin's token to expire")
        # The informers' watches end now: their new watch requests need a new token too.
        await secured.control("POST", "expire-watches")
        await apply_text(admin, model_yaml("after", "      enabled: true\n      count: 1"))
        await wait_condition(admin, MODEL, "after", "AcceleratorReady", "True", timeout=15)
    finally:
        await manager.stop()
        await client.close()
    assert len(runs(tmp_path)) >= 2


async def test_a_401_runs_the_plugin_again_and_resends_once(
    secured: ApiServerProcess, admin: KubeClient, tmp_path: Path
) -> None:
    client = await KubeClient.connect(kubeconfig=str(kubeconfig(tmp_path, secured, ttl=3600)))
    try:
        assert await client.get(POD, "default", "none") is None
        before = len(runs(tmp_path))
        await secured.control("DELETE", "tokens")  # revoked long before their expiry
        assert await client.get(POD, "default", "none") is None
        assert len(runs(tmp_path)) == before + 1
        assert (await secured.control("GET", "tokens"))["rejected"] == 1
    finally:
        await client.close()


async def test_a_token_refused_again_fails_after_one_new_run(
    secured: ApiServerProcess, tmp_path: Path
) -> None:
    path = kubeconfig(tmp_path, secured, ttl=3600, extra_env={"LLMKUBE_TEST_BOGUS": "1"})
    client = await KubeClient.connect(kubeconfig=str(path))
    try:
        before = len(runs(tmp_path))
        with pytest.raises(ApiError) as caught:
            await client.get(POD, "default", "none")
        assert (caught.value.status, caught.value.reason) == (401, "Unauthorized")
        assert len(runs(tmp_path)) - before == 2  # the first use, and once after the 401
        assert (await secured.control("GET", "tokens"))["rejected"] == 2
    finally:
        await client.close()


async def test_concurrent_requests_share_one_plugin_run(
    secured: ApiServerProcess, tmp_path: Path
) -> None:
    # No expirationTimestamp: the token the loader got is not reused, the first request runs.
    path = kubeconfig(tmp_path, secured, ttl=3600, extra_env={"LLMKUBE_TEST_NO_EXPIRY": "1"})
    client = await KubeClient.connect(kubeconfig=str(path))
    try:
        before = len(runs(tmp_path))
        await asyncio.gather(*(client.get(POD, "default", f"p{i}") for i in range(20)))
        assert len(runs(tmp_path)) == before + 1
        await secured.control("DELETE", "tokens")
        await asyncio.gather(*(client.get(POD, "default", f"p{i}") for i in range(20)))
        assert len(runs(tmp_path)) == before + 2  # twenty 401s, one new run
    finally:
        await client.close()


async def test_the_plugin_gets_exec_info_env_and_the_cluster(
    secured: ApiServerProcess, tmp_path: Path
) -> None:
    path = kubeconfig(
        tmp_path,
        secured,
        ttl=3600,
        api_version="client.authentication.k8s.io/v1beta1",
        extra_env={"LLMKUBE_TEST_NO_EXPIRY": "1"},
        exec_extra={"provideClusterInfo": True},
    )
    client = await KubeClient.connect(kubeconfig=str(path))
    try:
        assert await client.get(POD, "default", "none") is None
    finally:
        await client.close()
    ours = runs(tmp_path)[-1]
    assert ours["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert ours["spec"]["interactive"] is False
    assert ours["spec"]["cluster"]["server"] == secured.url


@pytest.mark.server
async def test_a_client_certificate_from_the_plugin_is_renewed(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "serving.pem")
    )
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    certs = tmp_path / "certs"
    certs.mkdir()
    for name in ("a", "b"):
        issued = ca.issue_cert(f"{name}.client", common_name=f"run-{name}")
        issued.cert_chain_pems[0].write_to_path(str(certs / f"{name}.crt"))
        issued.private_key_pem.write_to_path(str(certs / f"{name}.key"))
    (certs / "current").write_text("a")
    server = await ApiServerProcess.start(
        "--tls-cert-file",
        str(tmp_path / "serving.pem"),
        "--tls-private-key-file",
        str(tmp_path / "serving.pem"),
        "--client-ca-file",
        str(tmp_path / "ca.pem"),
        "--require-token",
    )
    path = kubeconfig(tmp_path, server, ttl=2, extra_env={"LLMKUBE_TEST_CERT_DIR": str(certs)})
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"]["certificate-authority"] = str(tmp_path / "ca.pem")
    path.write_text(yaml.safe_dump(config))
    trusting = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))

    async def client_certs() -> dict[str, int]:  # the CNs the server saw, with counts
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{server.url}/_testserver/tokens", ssl=trusting) as answer,
        ):
            seen: dict[str, int] = (await answer.json())["clientCerts"]
            return seen

    client = await KubeClient.connect(kubeconfig=str(path))
    try:
        assert await client.get(POD, "default", "none") is None
        assert set(await client_certs()) == {"run-a"}
        (certs / "current").write_text("b")  # the plugin's next certificate

        async def renewed() -> bool:
            assert await client.get(POD, "default", "none") is None
            return "run-b" in await client_certs()

        await eventually(renewed, timeout=15, what="requests with the renewed certificate")
    finally:
        await client.close()
        await server.stop()
