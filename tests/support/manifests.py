"""Manifests the tests apply: Models, InferenceServices, GPUQuotas, claim templates, the
DRA objects of a one-node cluster, and applying them again across conflicts."""

from __future__ import annotations

import asyncio

from app.manifests import apply_text
from controller.errors import ApiError
from controller.kube import KubeClient


def model_yaml(name: str, gpu: str, extra: str = "") -> str:
    """A Model manifest; gpu is the YAML body under spec.hardware.gpu, indented 6."""
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: {name}}}
spec:
  source: Qwen/Qwen3-8B
  format: safetensors
  hardware:
    accelerator: cuda
    gpu:
{gpu}
{extra}
"""


def isvc_yaml(name: str, model: str, runtime: str = "vllm", extra: str = "") -> str:
    """An InferenceService manifest; extra is more YAML under spec, indented 2."""
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: {name}}}
spec:
  modelRef: {model}
  runtime: {runtime}
{extra}
"""


# spec.hardware.gpu of a Model with count 2 on the per-pod template "two-gpus".
def two_gpu_claims(count: int | None = None) -> str:
    """spec.hardware.gpu (indented 6) of a Model on the two-gpus template; count if given."""
    counted = f"      count: {count}\n" if count is not None else ""
    return (
        f"      enabled: true\n{counted}      resourceClaims:\n"
        "        - {name: gpus, resourceClaimTemplateName: two-gpus}"
    )


TWO_GPU_CLAIMS = two_gpu_claims(2)


def quota_yaml(limit: int, name: str = "team", scope: str = "namespaceRef: default") -> str:
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: GPUQuota
metadata: {{name: {name}}}
spec: {{gpuCount: {limit}, {scope}}}
"""


def claim_template(name: str, requests: str) -> str:
    """A ResourceClaimTemplate manifest; requests is the YAML list under
    spec.spec.devices.requests, indented 8."""
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: {name}}}
spec:
  spec:
    devices:
      requests:
{requests}
"""


def gpu_template(name: str, count: int) -> str:
    """A template asking for exactly count GPUs of the simulated cluster's class."""
    exactly = f"{{deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: {count}}}"
    return claim_template(name, f"        - name: gpu\n          exactly: {exactly}")


# What the NVIDIA DRA driver publishes on a cluster with one 4-GPU node: the DeviceClass
# and the node's ResourceSlice (the simulated cluster seeds the same objects).
DRA_CLUSTER_YAML = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
    - cel: {expression: 'device.driver == "gpu.nvidia.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-node-1-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: gpu-node-1
  pool: {name: gpu-node-1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}, {name: gpu-3}]
"""


async def reapply(client: KubeClient, text: str, namespace: str = "default") -> None:
    """apply_text, retried on 409: a replace can race the controller's status writes."""
    for attempt in range(10):
        try:
            await apply_text(client, text, namespace)
            return
        except ApiError as e:
            if e.status != 409 or attempt == 9:
                raise
            await asyncio.sleep(0.05)
