"""GPUQuota vramBytes (the Model's hardware.gpu.memory x GPUs, or a shared GPU's
gpuSharing.memoryLimitGiB) and minPriority.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_gpuquota_vram_priority.py.
"""

from __future__ import annotations

from typing import Any

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE
from objtypes import Obj
from tests.support.manifests import isvc_yaml as service_yaml
from tests.support.manifests import model_yaml, quota_yaml, reapply
from tests.support.quota import replicas
from tests.support.waiting import condition, eventually, wait_condition

GI = 2**30


async def quota(kube: KubeClient, want: dict[str, Any]) -> Obj:
    async def probe() -> Obj | None:
        q = await kube.get(GPU_QUOTA, "default", "team")
        status = (q or {}).get("status") or {}
        return q if all(status.get(k) == v for k, v in want.items()) else None

    return await eventually(probe, what=f"GPUQuota status {want}")


async def test_vram_cap_admits_what_fits_of_the_models_memory(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(
        kube, model_yaml("m", "      enabled: true\n      count: 1\n      memory: 24Gi")
    )
    await apply_text(kube, quota_yaml(8, scope=f"namespaceRef: default, vramBytes: {60 * GI}"))
    await apply_text(kube, service_yaml("s", "m", extra="  replicas: 3"))
    await replicas(kube, "s", 2)  # 2 x 24Gi fit in 60Gi; the GPUs alone would admit 3
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "s", "QuotaAdmitted", "False", "QuotaExceeded"
    )
    message = condition(isvc, "QuotaAdmitted")["message"]  # type: ignore[index]
    assert message.startswith("GPUQuota vramBytes: 2 of 3 replicas admitted"), message
    q = await quota(kube, {"usedVRAMBytes": 48 * GI, "usedGPUCount": 2})
    (row,) = q["status"]["services"]
    assert (row["vramBytes"], row["heldBy"]) == (48 * GI, "vramBytes")
    assert condition(q, "WithinLimit")["status"] == "False"  # type: ignore[index]
    assert condition(q, "FieldsServed") is None, "vramBytes is served"

    # More room: all three run, nothing is held back.
    await reapply(kube, quota_yaml(8, scope=f"namespaceRef: default, vramBytes: {80 * GI}"))
    await replicas(kube, "s", 3)
    q = await quota(kube, {"usedVRAMBytes": 72 * GI})
    assert "heldBy" not in q["status"]["services"][0]


async def test_min_priority_admits_only_services_at_or_above_it(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, model_yaml("m", "      enabled: true\n      count: 1"))
    await apply_text(kube, quota_yaml(8, scope="namespaceRef: default, minPriority: high"))
    await apply_text(kube, service_yaml("low", "m", extra="  replicas: 2"))
    await apply_text(kube, service_yaml("top", "m", extra="  replicas: 2\n  priority: critical"))
    await replicas(kube, "top", 2)
    await replicas(kube, "low", 0)
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "low", "QuotaAdmitted", "False", "BelowMinPriority"
    )
    assert "spec.priority 'normal'" in condition(isvc, "QuotaAdmitted")["message"]  # type: ignore[index]
    await reapply(kube, service_yaml("low", "m", extra="  replicas: 2\n  priority: high"))
    await replicas(kube, "low", 2)


async def test_a_shared_gpu_is_charged_the_memory_limit_it_declares(
    kube: KubeClient, controller: Manager
) -> None:
    """LLMKube's podVRAMBytes: in mode shared, gpuSharing.memoryLimitGiB is what one
    replica counts against vramBytes, not the Model's whole-GPU memory."""
    await apply_text(
        kube, model_yaml("m", "      enabled: true\n      count: 1\n      memory: 24Gi")
    )
    await apply_text(kube, quota_yaml(8, scope=f"namespaceRef: default, vramBytes: {25 * GI}"))
    sharing = "  replicas: 3\n  resources: {gpuSharing: {mode: shared, memoryLimitGiB: 10}}"
    await apply_text(kube, service_yaml("s", "m", extra=sharing))
    await replicas(kube, "s", 2)  # 2 x 10Gi fit in 25Gi (2 x 24Gi would not)
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "s", "QuotaAdmitted", "False", "QuotaExceeded"
    )
    message = condition(isvc, "QuotaAdmitted")["message"]  # type: ignore[index]
    assert f"at {10 * GI} bytes of GPU memory each" in message, message
    assert "spec.resources.gpuSharing.memoryLimitGiB" in message, message
    q = await quota(kube, {"usedVRAMBytes": 20 * GI, "usedGPUCount": 2})
    assert q["status"]["services"][0]["vramBytes"] == 20 * GI
    assert condition(isvc, "FieldsServed") is None, "memoryLimitGiB is served"
