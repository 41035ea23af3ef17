"""What a node demo or test puts on the real node: the model file served from inside
the node's network namespace, the model cache on a local volume, and the seed guide's
single-GPU example pointed at that file."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from .node import RealNode

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


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


GGUF = "Qwen3-Embedding-0.6B-Q8_0.gguf"


def single_gpu_example(source: str, digest: str) -> list[dict[str, Any]]:
    """examples/single-gpu.yaml as it is, with the source moved to the local server (and
    its digest pinned)."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "single-gpu.yaml").read_text()) if d]
    model = next(d for d in docs if d["kind"] == "Model")
    model["spec"]["source"] = source
    model["spec"]["sha256"] = digest
    return docs
