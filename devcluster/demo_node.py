"""`make demo-node` (python -m devcluster.demo_node): the seed guide's single-GPU example
on a real node, ending in a real answer from /v1/embeddings.

It starts the control plane and a real node (devcluster/node.py) in a network namespace
of its own, installs charts/llmkube with the real helm CLI (the controller image built
from the Dockerfile runs as a Pod), serves a tiny GGUF from inside the namespace, applies
examples/single-gpu.yaml in a namespace under Pod Security `restricted` (its source moved
to that file, its sha256 pinned) and asks the real llama-server, in the pod the
controller made, for an embedding through the Service's ClusterIP. Everything is stopped
and removed at the end. Root is needed, as for the node tier.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .cluster import KubeCluster
from .cluster import binaries_dir as kube_binaries_dir
from .helm import Helm, webhook_values
from .images import ImageBuildError, build_images
from .node import RealNode, binaries_dir, images_dir, missing, start_node_cluster
from .node_objects import GGUF, FileServer, local_cache_volume, sha256, single_gpu_example
from .objects import ready
from .tiny_gguf import write_tiny_gguf

T = TypeVar("T")
NAMESPACE = "demo"
SERVICE = "qwen3-embedding"
GROUP = "/apis/inference.llmkube.dev/v1alpha1"


def _say(text: str) -> None:
    print(text, flush=True)


def _wait(what: str, probe: Callable[[], T | None], timeout: float = 300) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = probe()
        except urllib.error.HTTPError:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(1)


def _embedding(url: str, text: str) -> list[float] | None:
    req = urllib.request.Request(
        url, json.dumps({"input": text}).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            vector: list[float] = json.loads(resp.read())["data"][0]["embedding"]
            return vector
    except (urllib.error.URLError, OSError, KeyError, ValueError):
        return None


def run(cluster: KubeCluster, node: RealNode, workdir: Path) -> None:
    helm = Helm(binaries_dir() / "helm", cluster, workdir / "helm")
    (workdir / "helm").mkdir(parents=True, exist_ok=True)
    _say("helm install llmkube charts/llmkube (the controller image built from the Dockerfile)")
    helm.install(webhook_values(cluster))
    labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn")}
    cluster.http("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE, "labels": labels}})
    files = workdir / "files"
    files.mkdir()
    gguf = write_tiny_gguf(files / GGUF)
    with FileServer(files, node.address) as server:
        local_cache_volume(node, NAMESPACE)
        for doc in single_gpu_example(f"{server.url}/{GGUF}", sha256(gguf)):
            doc["metadata"]["namespace"] = NAMESPACE
            cluster.apply(doc)
        _say(f"applied examples/single-gpu.yaml in namespace {NAMESPACE} (Pod Security restricted)")
        path = f"{GROUP}/namespaces/{NAMESPACE}/inferenceservices/{SERVICE}"

        def served() -> dict[str, Any] | None:
            obj: dict[str, Any] = cluster.http("GET", path)
            return obj if ready(obj) else None

        isvc = _wait("the InferenceService Ready", served)
        svc = cluster.http("GET", f"/api/v1/namespaces/{NAMESPACE}/services/{SERVICE}")
        url = f"http://{svc['spec']['clusterIP']}:{svc['spec']['ports'][0]['port']}/v1/embeddings"
        vector = _wait("an embedding", lambda: _embedding(url, "Hello from a real node"), 120)
        pods = cluster.http("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
        allocation = isvc["status"].get("allocation") or {}
        devices = [d["device"] for p in allocation.get("pods", []) for d in p.get("devices", [])]
        _say("")
        _say(
            f"InferenceService {NAMESPACE}/{SERVICE}: Ready, allocation {allocation.get('summary')}"
        )
        for pod in pods:
            _say(
                f"  pod {pod['metadata']['name']} on {pod['spec']['nodeName']}, device(s) {devices}"
            )
        _say(f"  loader downloads of {GGUF}: {server.gets[f'/{GGUF}']}")
        _say(f"POST {url}")
        shown = ", ".join(f"{x:.4f}" for x in vector[:4])
        _say(f"embedding: a vector of length {len(vector)} [{shown}, ...]")
        _say(f"answered by llama-server in the pod on {node.name}")


def main() -> int:
    lacks = missing(kube_binaries_dir(), binaries_dir())
    if lacks:
        _say("the node demo needs: " + "; ".join(lacks))
        _say("build them with: make node-binaries (as root)")
        return 2
    try:
        images = build_images(images_dir())
    except ImageBuildError as e:
        _say(f"the node images could not be built: {e}")
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="lkn-", dir="/tmp"))
    started = start_node_cluster(workdir, images)
    try:
        _say(
            f"real node {started.node.name} Ready at {started.node.address} "
            "(containerd, runc, kubelet, the DRA example plugin)"
        )
        run(started.cluster, started.node, workdir)
        return 0
    finally:
        started.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
