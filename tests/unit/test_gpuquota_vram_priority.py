"""GPUQuota vramBytes (the Model's hardware.gpu.memory x GPUs, or a shared GPU's
gpuSharing.memoryLimitGiB) and minPriority.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_gpuquota_vram_priority.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from api.gpuquota import GPUQuotaSpec
from api.quantity import bytes_of
from reconcilers.quota.rule import Demand, allocate, floors_of, limits_of

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


def test_memory_limit_is_only_for_a_shared_gpu() -> None:
    """LLMKube's CEL rule on gpuSharing: memoryLimitGiB only with mode shared."""
    with pytest.raises(InvalidSpec) as raised:
        parse_inference_service(
            {"modelRef": "m", "resources": {"gpuSharing": {"memoryLimitGiB": 8}}}
        )
    assert raised.value.errors == [
        "spec.resources.gpuSharing: memoryLimitGiB is only valid when mode is shared"
    ]
