"""Helpers of the node tier: files served inside the node's network namespace, namespaces
under Pod Security, the model cache on a local volume, and what a container really got.

The test process is inside the node's network namespace (devcluster/netns.py), so a
server it starts on the node's address is reachable from the pods and from nothing else.
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from devcluster import KubeCluster
from devcluster.node import RealNode
from objtypes import Obj

from .cluster_objects import get, items, wait_for


class FileServer:
    """A folder served over plain HTTP on the node's address; counts the GETs per path
    (a second replica that downloads again shows as a second GET)."""

    def __init__(self, directory: Path, address: str) -> None:
        self.gets: Counter[str] = Counter()
        gets = self.gets

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                gets[self.path] += 1
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((address, 0), partial(Handler, directory=str(directory)))
        self.url = f"http://{address}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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


def local_cache_volume(node: RealNode, namespace: str) -> Path:
    """A `local` PersistentVolume on the node, bound ahead to the namespace's model cache
    claim: the kubelet applies the pod's fsGroup to it, as on most real volumes."""
    path = node.dir / "volumes" / namespace
    path.mkdir(parents=True, exist_ok=True)
    node.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"cache-{namespace}"},
            "spec": {
                "capacity": {"storage": "1Ti"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": str(path)},
                "claimRef": {"namespace": namespace, "name": "llmkube-model-cache"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": [node.name],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    return path


def pods(cluster: KubeCluster, namespace: str, selector: str = "") -> list[Obj]:
    query = f"?labelSelector={selector}" if selector else ""
    return items(cluster, f"/api/v1/namespaces/{namespace}/pods{query}")


def ready(obj: Obj | None) -> bool:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


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
