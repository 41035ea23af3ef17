"""InferenceServices sized for GPUQuota tests, and waiting for their Deployment's scale."""

from __future__ import annotations

from controller.kube import KubeClient
from controller.resources import DEPLOYMENT

from .manifests import isvc_yaml as service_yaml
from .waiting import eventually


def isvc_yaml(name: str, model: str, replicas: int, gpu: int | None = None) -> str:
    resources = f"\n  resources: {{gpu: {gpu}}}" if gpu is not None else ""
    return service_yaml(name, model, extra=f"  replicas: {replicas}{resources}")


async def replicas(kube: KubeClient, name: str, want: int) -> None:
    async def probe() -> bool:
        d = await kube.get(DEPLOYMENT, "default", name)
        return bool(d and d["spec"]["replicas"] == want)

    await eventually(probe, what=f"{name} at {want} replicas")
