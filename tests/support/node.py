"""Helpers of the node tier: files served inside the node's network namespace, namespaces
under Pod Security, the model cache on a local volume, and what a container really got.

The test process is inside the node's network namespace (devcluster/netns.py), so a
server it starts on the node's address is reachable from the pods and from nothing else.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devcluster import KubeCluster
from devcluster.node import RealNode
from devcluster.node_objects import GGUF as GGUF
from devcluster.node_objects import FileServer as FileServer
from devcluster.node_objects import local_cache_volume as local_cache_volume
from devcluster.node_objects import sha256 as sha256
from devcluster.node_objects import single_gpu_example as single_gpu_example
from devcluster.objects import ready
from objtypes import Obj

from .cluster_objects import get, items, wait_for


@contextmanager
def restricted_namespace(cluster: KubeCluster, hint: str) -> Iterator[str]:
    """A namespace whose pods Pod Security admits only at `restricted`, deleted after."""
    name = cluster.new_namespace(hint)
    labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn")}
    cluster.http(
        "PATCH",
        f"/api/v1/namespaces/{name}",
        {"metadata": {"labels": labels}},
        "application/merge-patch+json",
    )
    try:
        yield name
    finally:
        cluster.delete_namespace(name)


def pods(cluster: KubeCluster, namespace: str, selector: str = "") -> list[Obj]:
    query = f"?labelSelector={selector}" if selector else ""
    return items(cluster, f"/api/v1/namespaces/{namespace}/pods{query}")


def wait_ready_pods(cluster: KubeCluster, namespace: str, count: int) -> list[Obj]:
    def probe() -> list[Obj] | None:
        live = [p for p in pods(cluster, namespace) if not p["metadata"].get("deletionTimestamp")]
        done = [p for p in live if ready(p)]
        return done if len(done) >= count else None

    return wait_for(probe, f"{count} pod(s) Ready on the real node", cluster, timeout=300)


def container_process(node: RealNode, pod: Obj, container: str) -> dict[str, Any]:
    """What the runtime really started for `container` of `pod`: its pid on this host,
    environment, uid/gid and capabilities, read from /proc (CDI's edits included)."""
    sandboxes = node.crictl(
        "pods", "--name", pod["metadata"]["name"], "--namespace", pod["metadata"]["namespace"], "-q"
    ).stdout.split()
    assert sandboxes, f"no sandbox for {pod['metadata']['name']}"
    ids = node.crictl(
        "ps", "--pod", sandboxes[0], "--name", f"^{container}$", "--state", "Running", "-q"
    ).stdout.split()
    assert ids, f"no running container {container} in {pod['metadata']['name']}"
    info = json.loads(node.crictl("inspect", ids[0]).stdout)
    pid = int(info["info"]["pid"])
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
    status = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    return {"pid": pid, "env": env, "status": status, "argv": cmdline, "id": ids[0]}


def http_json(url: str, body: Obj | None = None, timeout: float = 30) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    if data:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def custom(cluster: KubeCluster, namespace: str, plural: str, name: str) -> Obj | None:
    return get(
        cluster, f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/{plural}/{name}"
    )
