"""The composition root wires the manager: reconcilers, the webhook and a separate /metrics
server as runnables, probes on their own address."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import aiohttp
import trustme

from app.cli import manager_for, parse
from controller.kube import KubeClient
from tests.support.waiting import eventually


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def status_of(url: str, context: ssl.SSLContext | None = None) -> int | None:
    try:
        async with aiohttp.ClientSession() as s, s.get(url, ssl=context or False) as r:
            return r.status
    except aiohttp.ClientError:
        return None


async def test_run_wires_reconcilers_webhook_and_metrics_as_runnables(
    kube: KubeClient, tmp_path: Path
) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    webhook_port, metrics_port = free_port(), free_port()
    args = parse(
        [
            f"--webhook-port={webhook_port}",
            f"--webhook-cert-dir={tmp_path}",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            "--health-probe-bind-address=127.0.0.1:0",
            "--workers=2",
        ]
    )
    manager = manager_for(kube, args)
    assert set(manager.reconcilers) == {"model", "inferenceservice", "gpuquota"}
    context = ssl.create_default_context()
    ca.configure_trust(context)
    await manager.start()
    try:
        probes = f"http://127.0.0.1:{manager.http_port}"

        async def ready() -> bool:
            return await status_of(f"{probes}/readyz") == 200

        await eventually(ready, timeout=15, what="readyz")
        webhook = f"https://127.0.0.1:{webhook_port}/healthz"

        async def webhook_up() -> bool:
            return await status_of(webhook, context) == 200

        await eventually(webhook_up, timeout=15, what="webhook serving")
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://127.0.0.1:{metrics_port}/metrics") as r,
        ):
            text = await r.text()
        assert 'workqueue_depth{controller="model",name="model"}' in text
    finally:
        await manager.stop()
    assert await status_of(webhook, context) is None  # stopped with the manager


async def test_a_webhook_without_certificate_fails_liveness_and_is_never_ready(
    kube: KubeClient, tmp_path: Path
) -> None:
    """Ready means every server the pod runs answers: synced caches alone are not enough
    while the webhook does not listen (the Service would route admission calls to it)."""
    args = parse(
        [
            f"--webhook-port={free_port()}",
            f"--webhook-cert-dir={tmp_path / 'missing'}",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=127.0.0.1:0",
        ]
    )
    manager = manager_for(kube, args)
    await manager.start()
    try:
        url = f"http://127.0.0.1:{manager.http_port}/healthz"

        async def unhealthy() -> bool:
            return await status_of(url) == 500

        await eventually(unhealthy, timeout=15, what="healthz 500")

        async def synced() -> bool:
            return manager.cache.synced()

        await eventually(synced, timeout=15, what="caches synced")
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://127.0.0.1:{manager.http_port}/readyz") as r,
        ):
            assert r.status == 503
            assert "check webhook: not ready" in await r.text()
    finally:
        await manager.stop()
