"""Synchronous helpers of the cluster tier: read, apply and wait on the real apiserver.

Nothing here decides a test by timing: `wait_for` polls until a generous deadline and then
fails with what it last saw and the tail of every component's log.
"""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Callable
from typing import Any, TypeVar

import yaml

from devcluster import KubeCluster
from objtypes import Obj

T = TypeVar("T")
# A one-GPU ResourceClaimTemplate and the Model `small` that claims from it.
SMALL_MODEL = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 1}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: small}
spec:
  source: https://example.com/small.gguf
  format: gguf
  hardware:
    accelerator: cuda
    gpu:
      enabled: true
      vendor: nvidia
      count: 1
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
"""
# Generous: the tier runs beside other builds on 2 cores; nothing here is timed.
DEADLINE = 180.0


def wait_for(
    probe: Callable[[], T | None], what: str, cluster: KubeCluster, timeout: float = DEADLINE
) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (AssertionError, urllib.error.HTTPError) as e:
            last = e
        else:
            if last:
                found: T = last
                return found
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}\n{cluster.logs()}")


def get(cluster: KubeCluster, path: str) -> Obj | None:
    try:
        found: Obj = cluster.http("GET", path)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
    return found


def items(cluster: KubeCluster, path: str) -> list[Obj]:
    found: list[Obj] = cluster.http("GET", path)["items"]
    return found


def apply_yaml(cluster: KubeCluster, text: str, namespace: str) -> None:
    for doc in yaml.safe_load_all(text):
        if doc:
            doc["metadata"]["namespace"] = namespace
            cluster.apply(doc)


def model_cache_volume(cluster: KubeCluster, namespace: str) -> None:
    """A PersistentVolume bound ahead to the namespace's model cache claim (the chart
    enables the shared cache; this cluster has no provisioner)."""
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"cache-{namespace}"},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": f"/tmp/llmkube-cache-{namespace}"},
                "claimRef": {"namespace": namespace, "name": "llmkube-model-cache"},
            },
        }
    )
