"""Faults a real node shows and kwok hides: the runtime process killed (the kubelet
restarts it, our status follows), a model file failing its sha256 (the loader init
container fails, the runtime never starts, our condition names the digest), and the
controller pod deleted (its replacement takes over and writes nothing to steady objects).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from api import conditions as c
from devcluster.node import NodeCluster
from devcluster.tiny_gguf import write_tiny_gguf
from objtypes import Obj
from reconcilers.inferenceservice.workload import CONTAINER
from reconcilers.sources.loader import LOADER_NAME
from tests.support.cluster_objects import get, wait_for
from tests.support.helm import NAMESPACE, PodController
from tests.support.node import (
    GGUF,
    FileServer,
    container_process,
    custom,
    local_cache_volume,
    pods,
    restricted_namespace,
    sha256,
    single_gpu_example,
    wait_ready_pods,
)
from tests.support.waiting import condition

pytestmark = pytest.mark.timeout(900)
SERVICE = "qwen3-embedding"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/llmkube-controller"


def test_the_runtime_killed_is_restarted_and_our_status_follows(
    node_cluster: NodeCluster, node_controller: PodController, tmp_path: Path
) -> None:
    cluster, node = node_cluster.cluster, node_cluster.node
    gguf = write_tiny_gguf(tmp_path / GGUF)
    with FileServer(tmp_path, node.address) as files, restricted_namespace(cluster, "kill") as ns:
        local_cache_volume(node, ns)
        for doc in single_gpu_example(f"{files.url}/{GGUF}", sha256(gguf)):
            doc["metadata"]["namespace"] = ns
            cluster.apply(doc)
        (pod,) = wait_ready_pods(cluster, ns, 1)
        wait_for(
            lambda: (
                (condition(custom(cluster, ns, "inferenceservices", SERVICE), "Ready") or {}).get(
                    "status"
                )
                == "True"
                or None
            ),
            "the service Ready",
            cluster,
        )
        runtime = container_process(node, pod, CONTAINER)
        os.kill(runtime["pid"], signal.SIGKILL)

        # Not Ready while it restarts, and the Ready condition says how its last run ended.
        trace: list[tuple[str | None, str | None]] = []
        deadline = time.monotonic() + 120
        said = "the runtime restarted 1 time(s), last: Error, exit code 137"
        while not any(t[0] == "False" and said in (t[1] or "") for t in trace):
            assert time.monotonic() < deadline, f"no Ready=False naming the restart: {trace}"
            isvc = custom(cluster, ns, "inferenceservices", SERVICE) or {}
            ready = condition(isvc, "Ready") or {}
            trace.append((ready.get("status"), ready.get("message")))
            time.sleep(0.5)

        def recovered() -> Obj | None:
            isvc = custom(cluster, ns, "inferenceservices", SERVICE) or {}
            ok = (condition(isvc, "Ready") or {}).get("status") == "True"
            return isvc if ok and isvc["status"].get("restarts") == 1 else None

        isvc = wait_for(recovered, "Ready again with 1 restart counted", cluster, timeout=180)
        assert isvc["status"]["readyReplicas"] == 1
        (again,) = [p for p in pods(cluster, ns) if not p["metadata"].get("deletionTimestamp")]
        assert again["metadata"]["uid"] == pod["metadata"]["uid"], "the same pod, restarted"
        (status,) = [s for s in again["status"]["containerStatuses"] if s["name"] == CONTAINER]
        assert status["restartCount"] == 1
        assert status["lastState"]["terminated"]["exitCode"] == 137
        assert container_process(node, again, CONTAINER)["pid"] != runtime["pid"]
        assert files.gets[f"/{GGUF}"] == 1  # the restart did not download again


def test_a_file_failing_its_sha256_fails_the_loader_and_never_starts_the_runtime(
    node_cluster: NodeCluster, node_controller: PodController, tmp_path: Path
) -> None:
    cluster, node = node_cluster.cluster, node_cluster.node
    write_tiny_gguf(tmp_path / GGUF)
    wrong = "0" * 64
    with FileServer(tmp_path, node.address) as files, restricted_namespace(cluster, "digest") as ns:
        local_cache_volume(node, ns)
        for doc in single_gpu_example(f"{files.url}/{GGUF}", wrong):
            doc["metadata"]["namespace"] = ns
            cluster.apply(doc)

        def refused() -> Obj | None:
            model = custom(cluster, ns, "models", SERVICE) or {}
            found: list[Obj] = (model.get("status") or {}).get("conditions") or []
            return next((x for x in found if x.get("reason") == c.INTEGRITY_CHECK_FAILED), None)

        cond = wait_for(refused, "the Model's condition naming the digest", cluster, timeout=240)
        assert cond["status"] == "False"
        assert "spec.sha256" in cond["message"] and f"expected {wrong}" in cond["message"]
        assert files.gets[f"/{GGUF}"] >= 1
        (pod,) = [p for p in pods(cluster, ns) if not p["metadata"].get("deletionTimestamp")]
        (loader,) = [s for s in pod["status"]["initContainerStatuses"] if s["name"] == LOADER_NAME]
        ended = loader["state"].get("terminated") or loader["lastState"].get("terminated")
        assert ended["exitCode"] == 1, loader
        (runtime,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == CONTAINER]
        assert "running" not in runtime["state"] and runtime["restartCount"] == 0, runtime
        assert not runtime.get("started")
        # The file that failed was removed, not left for the runtime.
        cached = list((node.dir / "volumes" / ns).rglob(GGUF))
        assert cached == [], cached


def _versions(cluster: object, ns: str) -> dict[str, str]:
    paths = {
        "model": f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/models/m",
        "service": f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices/s",
        "deployment": f"/apis/apps/v1/namespaces/{ns}/deployments/s",
        "svc": f"/api/v1/namespaces/{ns}/services/s",
    }
    out = {}
    for what, path in paths.items():
        obj = get(cluster, path)  # type: ignore[arg-type]
        assert obj is not None, what
        out[what] = obj["metadata"]["resourceVersion"]
    return out


def test_a_replacement_controller_pod_takes_over_without_writing_steady_objects(
    node_cluster: NodeCluster, node_controller: PodController
) -> None:
    cluster = node_cluster.cluster
    old = node_controller.wait_ready()["metadata"]["name"]
    ns = cluster.new_namespace("takeover")
    cluster.apply(
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": "m", "namespace": ns},
            "spec": {"source": "https://example.com/m.gguf", "format": "gguf"},
        }
    )
    cluster.apply(
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "metadata": {"name": "s", "namespace": ns},
            "spec": {"modelRef": "m", "runtime": "llamacpp", "replicas": 0},
        }
    )

    def settled() -> dict[str, str] | None:
        isvc = custom(cluster, ns, "inferenceservices", "s") or {}
        if (isvc.get("status") or {}).get("observedGeneration") != isvc["metadata"]["generation"]:
            return None
        if get(cluster, f"/apis/apps/v1/namespaces/{ns}/deployments/s") is None:
            return None
        return _versions(cluster, ns)

    wait_for(settled, "the service reconciled", cluster)
    time.sleep(3)
    before = _versions(cluster, ns)

    cluster.http("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{old}")
    new = wait_for(
        lambda: (
            [p["metadata"]["name"] for p in node_controller.pods() if p["metadata"]["name"] != old]
            or None
        ),
        "a replacement controller pod",
        cluster,
    )[0]
    wait_for(
        lambda: (get(cluster, LEASE) or {}).get("spec", {}).get("holderIdentity") == new or None,
        "the replacement holding the Lease",
        cluster,
        timeout=120,
    )
    node_controller.wait_ready()
    time.sleep(5)  # it has listed and reconciled everything once as leader
    assert _versions(cluster, ns) == before
