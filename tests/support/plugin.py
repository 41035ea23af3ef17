"""`kubectl llmkube` against a simulated DRA cluster with the controller running."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.manifests import install_crds
from controller.kube import KubeClient
from testserver.process import ApiServerProcess

from .manager import manager_for

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{{name: test, cluster: {{server: "{url}"}}}}]
users: [{{name: test, user: {{}}}}]
contexts: [{{name: test, context: {{cluster: test, user: test, namespace: team-a}}}}]
current-context: test
"""


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[KubeClient, dict[str, str]]]:
    """A simulated DRA-only cluster with the controller running, and the environment in
    which `kubectl llmkube` is on PATH and the kubeconfig points at the cluster."""
    server = await ApiServerProcess.start("--simulate-cluster", "dra=4,plugin=0")
    client = await KubeClient.connect(server.url)
    await install_crds(client)
    manager = manager_for(client)
    await manager.start()
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG.format(url=server.url))
    env = {
        **os.environ,
        # The console script sits beside the interpreter running the tests.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(config),
    }
    try:
        await manager.wait_synced()
        yield client, env
    finally:
        await manager.stop()
        await client.close()
        await server.stop()


async def kubectl(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()
