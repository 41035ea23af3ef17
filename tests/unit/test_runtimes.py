"""Runtime flags derived from count, GPU-only flags, and explicit settings winning."""

from __future__ import annotations

from typing import Any

import pytest

from api import parse_inference_service, parse_model
from reconcilers.quota.rule import gpus_per_replica
from runtimes.command import runtime_command
from runtimes.gpu import gpu_attachment

CLAIMS = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]


def model(count: int | None = None, claims: Any = CLAIMS, **gpu: Any) -> Any:
    g: dict[str, Any] = {"enabled": True, "vendor": "nvidia", **gpu}
    if count is not None:
        g["count"] = count
    if claims:
        g["resourceClaims"] = claims
    return parse_model({"source": "Qwen/Qwen3-32B", "hardware": {"accelerator": "cuda", "gpu": g}})


def args(runtime: str, m: Any, **spec: Any) -> list[str]:
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, **spec})
    return runtime_command(service, m, "Qwen/Qwen3-32B", "m").args


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.parametrize(
    ("runtime", "name"),
    [("vllm", "--tensor-parallel-size"), ("sglang", "--tp-size"), ("tgi", "--num-shard")],
)
def test_count_sizes_parallelism(runtime: str, name: str) -> None:
    assert flag(args(runtime, model(count=2)), name) == "2"
    assert flag(args(runtime, model(count=4)), name) == "4"
    # One device has nothing to split; without count the runtime runs on one device.
    assert name not in args(runtime, model(count=1))
    assert name not in args(runtime, model(count=None))


def test_user_tensor_parallel_size_wins_over_count() -> None:
    assert (
        flag(
            args("vllm", model(count=2), vllmConfig={"tensorParallelSize": 4}),
            "--tensor-parallel-size",
        )
        == "4"
    )
    assert (
        flag(args("sglang", model(count=4), sglangConfig={"tensorParallelSize": 2}), "--tp-size")
        == "2"
    )
    # TGI has no numShard field in LLMKube: extraArgs is how a user sets it.
    assert flag(args("tgi", model(count=4), extraArgs=["--num-shard", "1"]), "--num-shard") == "1"
    # On releases without count, the guide's workaround: explicit size, no count.
    assert (
        flag(
            args("vllm", model(count=None), vllmConfig={"tensorParallelSize": 2}),
            "--tensor-parallel-size",
        )
        == "2"
    )


def test_extra_args_replace_derived_flags_under_any_spelling() -> None:
    a = args("vllm", model(count=2), extraArgs=["-tp", "8"])
    assert "--tensor-parallel-size" not in a and a[-2:] == ["-tp", "8"]
    a = args("sglang", model(count=2), extraArgs=["--tp-size=2"])
    assert a.count("--tp-size") == 0 and a[-1] == "--tp-size=2"
    a = args("llamacpp", model(count=2), extraArgs=["-ngl", "10", "-sm", "row"])
    assert "--n-gpu-layers" not in a and "--split-mode" not in a
    assert flag(a, "--tensor-split") == "1,1"


def test_llamacpp_splits_only_above_one_device() -> None:
    two = args("llamacpp", model(count=2))
    assert flag(two, "--split-mode") == "layer"
    assert flag(two, "--tensor-split") == "1,1"
    assert flag(args("llamacpp", model(count=3)), "--tensor-split") == "1,1,1"
    for single in (args("llamacpp", model(count=1)), args("llamacpp", model(count=None))):
        assert "--split-mode" not in single and "--tensor-split" not in single
        assert flag(single, "--n-gpu-layers") == "99"


def test_llamacpp_model_layers_and_sharding_win() -> None:
    m = model(count=2, layers=20, sharding={"strategy": "tensor", "layerSplit": ["0-29", "30-39"]})
    a = args("llamacpp", m)
    assert (flag(a, "--n-gpu-layers"), flag(a, "--split-mode"), flag(a, "--tensor-split")) == (
        "20",
        "tensor",  # b10068 -sm tensor (issue 27 item 19)
        "30,10",
    )
    a = args("llamacpp", model(count=2, sharding={"strategy": "none"}))
    assert flag(a, "--split-mode") == "none" and "--tensor-split" not in a
    a = args("llamacpp", model(count=2, sharding={"strategy": "pipeline"}))
    assert flag(a, "--split-mode") == "layer"
    assert flag(args("llamacpp", model(count=2, layers=-1)), "--n-gpu-layers") == "99"


@pytest.mark.parametrize(
    ("runtime", "mode", "flags"),
    [
        ("llamacpp", "embedding", ["--embedding", "--pooling", "last"]),
        ("llamacpp", "rerank", ["--reranking", "--embedding", "--pooling", "rank"]),
        ("sglang", "embedding", ["--is-embedding"]),
    ],
)
def test_mode_adds_the_runtime_flags(runtime: str, mode: str, flags: list[str]) -> None:
    a = args(runtime, model(count=1), mode=mode)
    joined = " ".join(a)
    assert " ".join(flags) in joined
    assert " ".join(flags) not in " ".join(args(runtime, model(count=1), mode="chat"))


def test_vllm_flags_that_changed_by_0_34() -> None:
    """0.34 dropped VLLM_ATTENTION_BACKEND for --attention-backend and spells a boolean's
    off side --disable-x (its help no longer lists --no-enable-x)."""
    service = parse_inference_service(
        {
            "modelRef": "m",
            "runtime": "vllm",
            "vllmConfig": {
                "attentionBackend": "FLASHINFER",
                "enablePrefixCaching": False,
                "enableChunkedPrefill": False,
                "enableExpertParallel": True,
            },
        }
    )
    rt = runtime_command(service, model(count=1), "Qwen/Qwen3-32B", "m")
    assert flag(rt.args, "--attention-backend") == "FLASHINFER"
    assert rt.env == []
    assert "--disable-prefix-caching" in rt.args and "--disable-chunked-prefill" in rt.args
    assert "--enable-expert-parallel" in rt.args
    assert not any(a.startswith("--no-") for a in rt.args)
    # A user's hidden spelling still owns the option: ours is left out.
    user = args(
        "vllm",
        model(count=1),
        vllmConfig={"enablePrefixCaching": False},
        extraArgs=["--no-enable-prefix-caching"],
    )
    assert user.count("--no-enable-prefix-caching") == 1
    assert "--disable-prefix-caching" not in user


def test_claims_without_count_still_get_gpu_flags() -> None:
    m = model(count=None)
    assert m.is_gpu_model
    assert flag(args("llamacpp", m), "--n-gpu-layers") == "99"
    v = args("vllm", m, vllmConfig={"gpuMemoryUtilization": 0.85, "cpuOffloadGB": 4})
    assert flag(v, "--gpu-memory-utilization") == "0.85"
    assert flag(v, "--cpu-offload-gb") == "4"
    s = args("sglang", m, sglangConfig={"memFractionStatic": 0.8})
    assert flag(s, "--mem-fraction-static") == "0.8"


def test_cpu_models_get_no_gpu_flags() -> None:
    cpu = parse_model({"source": "/models/x.gguf", "hardware": {"accelerator": "cpu"}})
    assert not cpu.is_gpu_model
    a = args("llamacpp", cpu)
    assert "--n-gpu-layers" not in a
    v = args("vllm", cpu, vllmConfig={"gpuMemoryUtilization": 0.9})
    assert "--gpu-memory-utilization" not in v
    service = parse_inference_service({"modelRef": "m", "runtime": "llamacpp"})
    assert runtime_command(service, cpu, "/models/x.gguf", "m").image.endswith(":server-b10068")


def test_claims_add_no_device_plugin_limit() -> None:
    service = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    attach = gpu_attachment(model(count=2), service)
    assert attach.limits == {}
    assert attach.pod_claims == [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    assert attach.container_claims == [{"name": "gpus"}]
    shared = gpu_attachment(
        model(claims=[{"name": "g", "resourceClaimName": "shared-claim"}]), service
    )
    assert shared.pod_claims == [{"name": "g", "resourceClaimName": "shared-claim"}]


def test_device_plugin_path_gets_the_limit() -> None:
    service = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    assert gpu_attachment(model(count=2, claims=None), service).limits == {"nvidia.com/gpu": "2"}
    assert gpu_attachment(model(claims=None), service).limits == {"nvidia.com/gpu": "1"}
    amd = model(count=1, claims=None, vendor="amd")
    assert gpu_attachment(amd, service).limits == {"amd.com/gpu": "1"}
    one = model(count=1, claims=None)
    mig = parse_inference_service(
        {
            "modelRef": "m",
            "resources": {"gpuSharing": {"mode": "partitioned", "profile": "1g.10gb"}},
        }
    )
    assert gpu_attachment(one, mig).limits == {"nvidia.com/mig-1g.10gb": "1"}
    shared = parse_inference_service(
        {"modelRef": "m", "resources": {"gpuSharing": {"mode": "shared"}}}
    )
    assert gpu_attachment(one, shared).limits == {"nvidia.com/gpu.shared": "1"}
    # gpu.enabled: false and accelerator: cpu mean no GPU, whatever the count.
    off = model(count=2, claims=None, enabled=False)
    assert gpu_attachment(off, service).limits == {}
    cpu = parse_model({"source": "org/m", "hardware": {"accelerator": "cpu", "gpu": {"count": 2}}})
    assert gpu_attachment(cpu, service).limits == {}


def test_quota_charge_per_replica() -> None:
    plain = parse_inference_service({"modelRef": "m"})
    with_gpu = parse_inference_service({"modelRef": "m", "resources": {"gpu": 2}})
    assert gpus_per_replica(model(count=2), plain) == 2
    assert gpus_per_replica(model(count=None), plain) == 0, "claims, no count: not charged"
    assert gpus_per_replica(model(count=None), with_gpu) == 2
    assert gpus_per_replica(model(count=None, claims=None), plain) == 1
