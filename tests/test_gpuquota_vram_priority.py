"""GPUQuota vramBytes (the Model's hardware.gpu.memory x GPUs) and minPriority."""

from __future__ import annotations

from typing import Any

import pytest

from api import InvalidSpec, parse_model
from api.gpuquota import GPUQuotaSpec
from api.quantity import bytes_of
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import GPU_QUOTA, INFERENCE_SERVICE
from objtypes import Obj
from reconcilers.quota.rule import Demand, allocate, floors_of, limits_of

from .conftest import condition, eventually, model_yaml, quota_yaml, reapply, wait_condition
from .conftest import isvc_yaml as service_yaml
from .support.quota import replicas

GI = 2**30


def test_sizes_read_as_kubernetes_quantities_and_the_units_people_write() -> None:
    assert bytes_of("80Gi") == 80 * GI
    assert bytes_of("24GB") == bytes_of("24G") == 24 * 10**9
    assert bytes_of("0.5Gi") == GI // 2 and bytes_of("1.5e9") == 1_500_000_000
    assert bytes_of("lots") is None and bytes_of("10X") is None


def test_a_gpu_memory_that_says_no_size_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidSpec) as raised:
        parse_model({"source": "Qwen/Qwen3-8B", "hardware": {"gpu": {"memory": "big"}}})
    assert raised.value.errors == [
        "spec.hardware.gpu.memory: 'big' is not a size (e.g. 80Gi, 24GB)"
    ]
    model = parse_model({"source": "Qwen/Qwen3-8B", "hardware": {"gpu": {"memory": "24Gi"}}})
    assert model.gpu.memory_bytes == 24 * GI


def test_the_rule_caps_vram_and_refuses_low_priorities() -> None:
    specs = {
        "q": GPUQuotaSpec(gpu_count=10, namespace_ref="ns", vram_bytes=100),
        "p": GPUQuotaSpec(gpu_count=10, namespace_ref="ns", min_priority="high"),
    }

    def demand(name: str, created: str, quotas: tuple[str, ...], **kw: Any) -> Demand:
        return Demand(name, created, 3, 1, quotas, namespace="ns", **kw)

    got = allocate(
        limits_of(specs),
        [
            demand("a", "1", ("q",), vram_per_replica=40),  # 2 of 3 fit in 100 bytes
            demand("b", "2", ("q",), vram_per_replica=20),  # 20 left: 1
            demand("c", "3", ("p",), priority="normal"),  # below high: none
            demand("d", "4", ("p",), priority="critical"),
        ],
        floors_of(specs),
    )
    admitted = {k[1]: (a.admitted_replicas, a.held_by) for k, a in got.items()}
    assert admitted == {
        "a": (2, "vramBytes"),
        "b": (1, "vramBytes"),
        "c": (0, "minPriority"),
        "d": (3, ""),
    }
    assert got["ns", "a"].vram_bytes == 80


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
