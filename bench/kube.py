"""The real control plane as the bench's API server (devcluster/: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok nodes).

One control plane serves the whole bench run; our CRDs are installed once. Each run gets
the namespaces its workload writes to, made afresh, and deletes them afterwards, waiting
until the real namespace controller has emptied and removed them: the next run starts
with nothing of ours on the server, as a fresh test server would. The systems under test
and the bench connect as the cluster admin (client certificate over TLS; system:masters,
which API Priority and Fairness exempts), all alike. Pods the workload creates are
scheduled by the real scheduler and made Running and Ready by kwok before the system
under test starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from app.manifests import CRD_DIR
from controller.kube import KubeClient
from controller.resources import NAMESPACE, POD, ResourceType
from devcluster import KubeCluster, binaries_dir, missing_binaries, start_cluster
from objtypes import Obj

from .harness import Target, namespaces_of
from .workload import Workload

SERVICE_ACCOUNT = ResourceType("", "v1", "serviceaccounts", "ServiceAccount")
PODS_PER_NODE = 100  # devcluster's kwok nodes take 110
NAMESPACE_GONE_TIMEOUT = 600.0


def unavailable() -> str | None:
    """Why the real control plane cannot run here, in one line (None: it can)."""
    try:
        bin_dir = binaries_dir()
    except (OSError, subprocess.CalledProcessError) as e:
        return f"scripts/build-kube.sh --path failed: {e}"
    missing = missing_binaries(bin_dir)
    if missing:
        return (
            f"Kubernetes binaries not built ({', '.join(missing)} missing in {bin_dir}): "
            "run `make kube-binaries`"
        )
    return None


def nodes_for(pods: int) -> int:
    """kwok nodes enough for `pods` running pods (at least devcluster's 2)."""
    return max(2, -(-pods // PODS_PER_NODE))


def _version(cluster: KubeCluster) -> str:
    out = subprocess.run(
        [str(cluster.bin / "kube-apiserver"), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip().removeprefix("Kubernetes ") or "?"


async def _until(what: str, done: Callable[[], Awaitable[bool]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"real apiserver: {what} not reached in {timeout:g} s")
        await asyncio.sleep(0.2)


class KubeServer:
    """The bench's runs on one started control plane."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.name = f"kube-apiserver {_version(cluster)}"

    @classmethod
    async def start(cls, *, nodes: int) -> KubeServer:
        workdir = Path(tempfile.mkdtemp(prefix="llmkube-bench-kube-"))
        try:
            cluster = await asyncio.to_thread(start_cluster, workdir, nodes=nodes)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        try:
            await asyncio.to_thread(cluster.install_crds, sorted(CRD_DIR.glob("*.yaml")))
            return cls(cluster)
        except BaseException:
            await asyncio.to_thread(cluster.stop)
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    async def stop(self) -> None:
        await asyncio.to_thread(self.cluster.stop)
        shutil.rmtree(self.cluster.dir, ignore_errors=True)

    def _pids(self) -> list[int]:
        """The server's processes: the apiserver and its storage."""
        pids = []
        for name in ("kube-apiserver", "etcd"):
            proc = self.cluster.components[name].proc
            if proc is not None:
                pids.append(proc.pid)
        return pids

    @contextlib.asynccontextmanager
    async def fresh(self, workload: Workload, count: int) -> AsyncIterator[Target]:
        target = Target(self.cluster.url, str(self.cluster.admin_kubeconfig), self._pids())
        client = await target.connect()
        names = namespaces_of(workload, count)
        try:
            try:
                for name in names:
                    namespace = {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": name},
                    }
                    await client.create(NAMESPACE, namespace)

                # Pods are refused until the serviceaccount controller made `default`.
                async def accounts() -> bool:
                    found = [await client.get(SERVICE_ACCOUNT, n, "default") for n in names]
                    return all(found)

                await _until("ServiceAccount default in each namespace", accounts, 120)
                yield target
            finally:
                for name in names:
                    await client.delete(NAMESPACE, None, name)

                async def gone() -> bool:
                    return not any([await client.get(NAMESPACE, None, n) for n in names])

                await _until(f"namespaces {', '.join(names)} deleted", gone, NAMESPACE_GONE_TIMEOUT)
        finally:
            await client.close()

    async def settle(self, client: KubeClient, created: list[tuple[ResourceType, Obj]]) -> None:
        """The workload's pods scheduled and made Running and Ready (kwok)."""
        pods = {
            (obj["metadata"]["namespace"], obj["metadata"]["name"])
            for rt, obj in created
            if rt == POD
        }
        namespaces = sorted({ns for ns, _ in pods})

        async def running() -> bool:
            ready = set()
            for ns in namespaces:
                items, _ = await client.list(POD, ns)
                ready |= {
                    (ns, p["metadata"]["name"])
                    for p in items
                    if (p.get("status") or {}).get("phase") == "Running"
                    and any(
                        c.get("type") == "Ready" and c.get("status") == "True"
                        for c in p["status"].get("conditions") or []
                    )
                }
            return pods <= ready

        if pods:
            await _until(f"{len(pods)} pods Running and Ready", running, 120 + len(pods) / 5)
