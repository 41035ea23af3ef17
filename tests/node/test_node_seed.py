"""The seed guide's single-GPU example on a real node: containers really run.

The controller (the chart's args, under the chart ServiceAccount's token) writes the
Deployment; the real ReplicaSet, scheduler (DRA allocation from the example driver's
ResourceSlice) and kubelet take it from there: the cache-prep and loader init containers
run in the loader image (curl really downloads the tiny GGUF from a server inside the
node's network namespace, checked against spec.sha256, into the cache volume), the DRA
plugin prepares the claim, containerd injects the device through CDI, the real
llama-server b10068 starts from our argv under Pod Security `restricted`, the kubelet's
probes pass, and /v1/embeddings answers through the pod IP and the Service's ClusterIP
(kube-proxy's iptables rules).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster.node import EXAMPLE_DRIVER, NodeCluster
from devcluster.tiny_gguf import N_EMBD, write_tiny_gguf
from objtypes import Obj
from reconcilers.inferenceservice.workload import CONTAINER
from reconcilers.sources.loader import LOADER_NAME
from tests.support.cluster_objects import get, wait_for
from tests.support.helm import PodController
from tests.support.node import (
    GGUF,
    FileServer,
    container_process,
    custom,
    http_json,
    local_cache_volume,
    restricted_namespace,
    sha256,
    single_gpu_example,
    wait_ready_pods,
)
from tests.support.waiting import condition

pytestmark = pytest.mark.timeout(900)


def published_memory(cluster: Any, result: Obj) -> str | None:
    """The memory capacity the driver's ResourceSlice gives the allocated device."""
    for item in cluster.http("GET", "/apis/resource.k8s.io/v1/resourceslices")["items"]:
        spec = item["spec"]
        if spec["driver"] != result["driver"] or spec["pool"]["name"] != result["pool"]:
            continue
        for device in spec.get("devices") or []:
            if device["name"] == result["device"]:
                capacity = device.get("capacity") or {}
                memory = capacity.get("memory") or capacity.get(f"{spec['driver']}/memory")
                return str(memory["value"]) if memory else None
    return None


def test_seed_single_gpu_example_serves_embeddings_from_a_real_pod(
    node_cluster: NodeCluster, node_controller: PodController, tmp_path: Path
) -> None:
    cluster, node = node_cluster.cluster, node_cluster.node
    weights = tmp_path / "files"
    weights.mkdir()
    gguf = write_tiny_gguf(weights / GGUF)
    with FileServer(weights, node.address) as files, restricted_namespace(cluster, "seed") as ns:
        local_cache_volume(node, ns)
        for doc in single_gpu_example(f"{files.url}/{GGUF}", sha256(gguf)):
            doc["metadata"]["namespace"] = ns
            cluster.apply(doc)

        (pod,) = wait_ready_pods(cluster, ns, 1)
        spec = pod["spec"]
        assert spec["nodeName"] == node.name
        # Every init container ran to completion (the loader really downloaded).
        inits = {s["name"]: s for s in pod["status"]["initContainerStatuses"]}
        assert LOADER_NAME in inits
        for name, s in inits.items():
            assert s["state"]["terminated"]["exitCode"] == 0, (name, s)
        assert files.gets[f"/{GGUF}"] == 1

        # Admitted under restricted, and the defaults we write are what ran.
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        inference = next(c for c in spec["containers"] if c["name"] == CONTAINER)
        ctx = inference["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"]["drop"] == ["ALL"]
        seen = container_process(node, pod, CONTAINER)
        assert seen["status"]["CapEff"].strip() == "0000000000000000"
        assert seen["status"]["NoNewPrivs"].strip() == "1"
        assert seen["status"]["Seccomp"].strip() == "2"  # a filter, RuntimeDefault's
        assert Path(seen["argv"][0]).name == "llama-server"
        assert seen["argv"][1:] == inference["args"]

        # The claim: allocated by the scheduler, prepared by the plugin, seen through CDI.
        (claim_status,) = pod["status"]["resourceClaimStatuses"]
        claim = get(
            cluster,
            f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/"
            f"{claim_status['resourceClaimName']}",
        )
        assert claim is not None
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == EXAMPLE_DRIVER and result["pool"] == node.name
        env = seen["env"]
        assert env.get("DRA_RESOURCE_DRIVER_NAME") == EXAMPLE_DRIVER, env
        devices = {v for k, v in env.items() if k.startswith("GPU_DEVICE_") and k.count("_") == 2}
        assert devices == {result["device"]}, env

        # The real llama-server answers through the pod IP and through the Service.
        port = inference["ports"][0]["containerPort"]
        status, body = http_json(
            f"http://{pod['status']['podIP']}:{port}/v1/embeddings", {"input": "hello world"}
        )
        assert status == 200 and len(body["data"][0]["embedding"]) == N_EMBD, body
        svc = get(cluster, f"/api/v1/namespaces/{ns}/services/qwen3-embedding")
        assert svc is not None
        svc_port = svc["spec"]["ports"][0]["port"]

        def through_service() -> Any:
            status, body = http_json(
                f"http://{svc['spec']['clusterIP']}:{svc_port}/v1/embeddings", {"input": "hi"}, 5
            )
            return body if status == 200 else None

        body = wait_for(through_service, "an answer through the ClusterIP", cluster, timeout=60)
        assert len(body["data"][0]["embedding"]) == N_EMBD

        # Our status: Ready, with the device the scheduler allocated.
        def allocated() -> Obj | None:
            isvc = custom(cluster, ns, "inferenceservices", "qwen3-embedding") or {}
            alloc = (isvc.get("status") or {}).get("allocation") or {}
            ok = (condition(isvc, "Ready") or {}).get("status") == "True"
            return isvc if ok and alloc.get("summary") == "1/1" else None

        isvc = wait_for(allocated, "InferenceService Ready with 1/1 allocated", cluster)
        shown = isvc["status"]["allocation"]["pods"][0]
        assert [d["device"] for d in shown["devices"]] == [result["device"]]
        # The real example driver's slice gives the device's memory (it publishes no
        # productName: its model attribute is not NVIDIA's).
        published = published_memory(cluster, result)
        assert published and shown["devices"][0].get("memory") == published

        # A second replica reuses the cached file: no second download.
        cluster.http(
            "PATCH",
            f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices/qwen3-embedding",
            {"spec": {"replicas": 2}},
            "application/merge-patch+json",
        )
        wait_ready_pods(cluster, ns, 2)
        assert files.gets[f"/{GGUF}"] == 1
        assert node_controller.denied() == []
        assert node_controller.api_errors(ns) == []
