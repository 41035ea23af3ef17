"""The eleven defects of the runtimes issue, one test (or group) each.

Each failed before its fix: the argv, ports, images, loader and multiNode pieces are
checked on the objects the controller builds (pod_spec, build_member_pods,
build_service), the refusals on the InferenceService a real reconcile writes.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_runtime_defects.py.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from api import InvalidSpec, parse_inference_service, parse_model
from app.manifests import EXAMPLES
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import (
    build_member_pods,
    build_service,
    pod_spec,
)
from reconcilers.sources.placement import model_placement
from runtimes import images
from runtimes.problems import runtime_problems

ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}
SAFETENSORS = {"source": "Qwen/Qwen3-8B", "format": "safetensors"}


def gpu_model(count: int = 1, vendor: str = "nvidia", **spec: Any) -> Any:
    hw = {"accelerator": "cuda", "gpu": {"enabled": True, "count": count, "vendor": vendor}}
    return parse_model({**SAFETENSORS, "hardware": hw, **spec})


def container(
    runtime: str, model: Any, images: images.Overrides = images.NO_OVERRIDES, **spec: Any
) -> Obj:
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, **spec})
    c: Obj = pod_spec(scope_for(ISVC, service, model, images=images))["containers"][0]
    return c


def value(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


# 1. The guide's embedding example is started as an embedding server.
def test_1_embedding_example_starts_llamacpp_with_embedding() -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "single-gpu.yaml").read_text()))
    model = parse_model(next(d for d in docs if d["kind"] == "Model")["spec"])
    service = parse_inference_service(
        next(d for d in docs if d["kind"] == "InferenceService")["spec"]
    )
    argv = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    assert "--embedding" in argv and value(argv, "--pooling") == "last"
    assert service.endpoint_path == "/v1/embeddings"


# 2. The container port, probes and Service follow a user --port.
@pytest.mark.parametrize(
    ("runtime", "extra", "port"),
    [
        ("vllm", ["--port", "9000"], 9000),
        ("sglang", ["--port=30000"], 30000),
        ("tgi", ["-p", "80"], 80),
        ("llamacpp", ["--port", "9090"], 9090),
    ],
)
def test_2_ports_follow_the_user_port(runtime: str, extra: list[str], port: int) -> None:
    model = (
        gpu_model()
        if runtime != "llamacpp"
        else parse_model(
            {"source": "https://example.com/m.gguf", "hardware": {"accelerator": "cpu"}}
        )
    )
    c = container(runtime, model, extraArgs=extra)
    assert c["ports"][0] == {"name": "http", "containerPort": port, "protocol": "TCP"}
    # Probes and the Service name the port: they reach what the runtime listens on.
    assert c["readinessProbe"]["httpGet"]["port"] == "http"
    assert c["startupProbe"]["httpGet"]["port"] == "http"
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, "extraArgs": extra})
    assert build_service(ISVC, service)["spec"]["ports"][0]["targetPort"] == "http"


# 3. extraArgs that crash-looped: TGI -p, a repeated --model-id, --hostname elsewhere.
def test_3_tgi_short_port_replaces_ours() -> None:
    argv = container("tgi", gpu_model(), extraArgs=["-p", "80"])["args"]
    assert "--port" not in argv and argv.count("-p") == 1


def test_3_user_model_id_is_the_only_one() -> None:
    argv = container("tgi", gpu_model(), extraArgs=["--model-id", "Qwen/Qwen3-8B-AWQ"])["args"]
    assert argv.count("--model-id") == 1 and value(argv, "--model-id") == "Qwen/Qwen3-8B-AWQ"


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_3_hostname_is_not_a_spelling_of_host_outside_tgi(runtime: str) -> None:
    argv = container(runtime, gpu_model(), extraArgs=["--hostname", "::"])["args"]
    assert value(argv, "--host") == "0.0.0.0"  # ours stays: --hostname is not --host there
    # ...and the runtime's parser would exit on it: refused, naming the entry.
    message = _refusal(gpu_model(), runtime, extraArgs=["--hostname", "::"])
    assert "InvalidRuntimeConfig: spec.extraArgs[0]: --hostname is not an option" in message
    tgi = container("tgi", gpu_model(), extraArgs=["--hostname", "::"])["args"]
    assert tgi.count("--hostname") == 1 and value(tgi, "--hostname") == "::"
    assert _refusal(gpu_model(), "tgi", extraArgs=["--hostname", "::"]) == ""


# 4. tensorSplit: malformed or more than 15 parts is refused at admission.
@pytest.mark.parametrize("split", ["", "a,b", ",".join(["1"] * 16), "1,-1", "nan"])
def test_4_bad_tensor_split_in_extra_args_is_invalid(split: str) -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_inference_service(
            {"modelRef": "m", "runtime": "llamacpp", "extraArgs": ["-ngl", "99", "-ts", split]}
        )
    assert any(err.startswith("spec.extraArgs[3]: -ts") for err in e.value.errors)
    with pytest.raises(InvalidSpec):
        parse_inference_service(
            {"modelRef": "m", "runtime": "llamacpp", "extraArgs": [f"--tensor-split={split}"]}
        )
    ok = parse_inference_service(
        {"modelRef": "m", "runtime": "llamacpp", "extraArgs": ["--tensor-split", "3/1"]}
    )
    assert ok.extra_args[-1] == "3/1"


def test_4_layer_split_over_15_parts_or_backwards_is_invalid() -> None:
    def model(split: list[str]) -> Any:
        gpu = {"enabled": True, "count": 2, "sharding": {"layerSplit": split}}
        return parse_model(
            {
                "source": "https://example.com/m.gguf",
                "hardware": {"accelerator": "cuda", "gpu": gpu},
            }
        )

    with pytest.raises(InvalidSpec) as e:
        model([f"{i}-{i}" for i in range(16)])
    assert "spec.hardware.gpu.sharding.layerSplit" in e.value.errors[0]
    with pytest.raises(InvalidSpec) as e:
        model(["0-19", "39-20"])
    assert e.value.errors[0].startswith("spec.hardware.gpu.sharding.layerSplit[1]")
    model([f"{i}-{i}" for i in range(15)])


def test_4_llamacpp_on_16_claimed_devices_gets_no_16_part_split() -> None:
    claims = [{"name": "g", "resourceClaimTemplateName": "t"}]
    gpu = {"enabled": True, "resourceClaims": claims}
    model = parse_model(
        {"source": "https://example.com/m.gguf", "hardware": {"accelerator": "cuda", "gpu": gpu}}
    )
    service = parse_inference_service({"modelRef": "m", "runtime": "llamacpp"})
    argv = pod_spec(scope_for(ISVC, service, model, 16))["containers"][0]["args"]
    split = value(argv, "--tensor-split")
    assert split is None or len(split.split(",")) <= 15


# 6. The image matches the accelerator and vendor; chart values and spec.image override.
def test_6_images_follow_accelerator_and_vendor() -> None:
    cpu = parse_model({**SAFETENSORS, "hardware": {"accelerator": "cpu"}})
    assert container("vllm", cpu)["image"] == images.PINS["vllm"]["cpu"]
    assert container("vllm", gpu_model())["image"] == "vllm/vllm-openai:v0.34.0"
    assert container("tgi", gpu_model(vendor="amd"))["image"].endswith("3.3.6-rocm")
    assert container("tgi", gpu_model(vendor="intel"))["image"].endswith("3.3.6-intel-xpu")
    assert container("sglang", gpu_model())["image"] == "lmsysorg/sglang:v0.5.23"
    amd = parse_inference_service({"modelRef": "m", "runtime": "sglang"})
    assert images.image_for(gpu_model(vendor="amd"), amd) is None  # no 0.5.23 ROCm pin
    chart = images.parse_overrides('{"vllm": {"rocm": "rocm/vllm:custom", "cpu": ""}}')
    assert container("vllm", gpu_model(vendor="amd"), chart)["image"] == "rocm/vllm:custom"
    assert container("vllm", cpu, chart)["image"] == images.PINS["vllm"]["cpu"]
    amd_own = container("vllm", gpu_model(vendor="amd"), chart, image="my/vllm:1")
    assert amd_own["image"] == "my/vllm:1"


# 7. The model form matches the runtime and format.
def test_7_llamacpp_takes_a_gguf_repo_with_hf_and_a_file_with_model() -> None:
    repo = parse_model({"source": "unsloth/Qwen3-8B-GGUF", "hardware": {"accelerator": "cpu"}})
    assert value(container("llamacpp", repo)["args"], "-hf") == "unsloth/Qwen3-8B-GGUF"


# 8. multiNode: per-rank vLLM flags, a headless Service for the rendezvous.
def _multinode_service(members: int = 3) -> Any:
    mn = {
        "members": [
            {"node": f"n{i}", **({"fabric": {"address": "10.0.0.1"}} if i == 0 else {})}
            for i in range(members)
        ],
        "rendezvousPort": 13345,
    }
    return parse_inference_service({"modelRef": "m", "runtime": "vllm", "multiNode": mn})


def test_8_members_get_their_rank_flags() -> None:
    pods = build_member_pods(scope_for(ISVC, _multinode_service(), gpu_model(count=2)), 1)
    argvs = [p["spec"]["containers"][0]["args"] for p in pods]
    assert len({tuple(a) for a in argvs}) == 3  # no longer the same argv everywhere
    for rank, argv in enumerate(argvs):
        assert value(argv, "--data-parallel-size") == "3"
        assert value(argv, "--data-parallel-address") == "10.0.0.1"
        assert value(argv, "--data-parallel-rpc-port") == "13345"
        assert value(argv, "--tensor-parallel-size") == "2"
        assert ("--headless" in argv) == (rank > 0)
        assert value(argv, "--data-parallel-start-rank") == (str(rank) if rank else None)
    # Headless members serve no HTTP: no HTTP probes there; the Service selects rank 0.
    assert "readinessProbe" in pods[0]["spec"]["containers"][0]
    assert "readinessProbe" not in pods[1]["spec"]["containers"][0]
    selector = build_service(ISVC, _multinode_service())["spec"]["selector"]
    assert selector["inference.llmkube.dev/member"] == "0"


@pytest.mark.parametrize("runtime", ["sglang", "tgi", "llamacpp"])
def test_8_multinode_is_refused_for_other_runtimes(runtime: str) -> None:
    mn = {"members": [{"node": "a", "fabric": {"address": "10.0.0.1"}}, {"node": "b"}]}
    with pytest.raises(InvalidSpec) as e:
        parse_inference_service({"modelRef": "m", "runtime": runtime, "multiNode": mn})
    assert "multiNode: only runtime vllm is supported" in "; ".join(e.value.errors)


# 9. SGLang gets --tp-size, never the --tp abbreviation.
def test_9_sglang_tensor_parallel_is_spelled_out() -> None:
    argv = container("sglang", gpu_model(count=2))["args"]
    assert value(argv, "--tp-size") == "2" and "--tp" not in argv
    user = container("sglang", gpu_model(count=2), extraArgs=["--tp", "2"])["args"]
    assert "--tp" not in user and user.count("--tp-size") == 1


# 10. Exact image tags, pulled only when missing.
@pytest.mark.parametrize("runtime", ["vllm", "sglang", "tgi", "llamacpp"])
def test_10_images_are_exact_and_pulled_if_not_present(runtime: str) -> None:
    gguf = parse_model(
        {"source": "https://h/x.gguf", "hardware": {"accelerator": "cuda", "gpu": {"count": 1}}}
    )
    pod = pod_spec(
        scope_for(
            ISVC,
            parse_inference_service({"modelRef": "m", "runtime": runtime}),
            gguf if runtime == "llamacpp" else gpu_model(),
        )
    )
    for c in [*pod["containers"], *pod.get("initContainers", [])]:
        assert c["imagePullPolicy"] == "IfNotPresent"
        tag = c["image"].rsplit(":", 1)[1]
        assert re.search(r"\d+\.\d+|b\d{4,}", tag), c["image"]  # a version, not server-cuda
    for variants in images.PINS.values():
        for image in variants.values():
            assert re.search(r":(v?\d+\.\d+\.\d+|server(-\w+)?-b\d+)", image), image


# 11. The loader is idempotent: run the real script with sh, twice.
FAKE_CURL = """#!/bin/sh
echo "curl $*" >> "$LOG"
out=""; resume=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift ;;
    -C) resume=1; shift ;;
  esac
  shift
done
if [ -n "$resume" ] && [ -n "$FAIL_RESUME" ]; then exit 33; fi
if [ -n "$resume" ] && [ -f "$out" ]; then printf 'tial' >> "$out"; exit 0; fi
printf 'weights' > "$out"
"""
FAKE_MV = """#!/bin/sh
echo "mv $*" >> "$LOG"
exec /bin/mv "$@"
"""


def _loader(tmp: Path) -> tuple[list[str], Path, Path]:
    model = parse_model({"source": "https://example.com/m/model.gguf"})
    service = parse_inference_service({"modelRef": "m"})
    init = pod_spec(scope_for(ISVC, service, model))["initContainers"][0]
    sh, flag, script = init["command"]
    given = {e["name"]: e["value"] for e in init["env"] if "value" in e}
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, text in (("curl", FAKE_CURL), ("mv", FAKE_MV)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    local = tmp / Path(given["LOADER_PATH"]).name
    # The loader's inputs are its env: the pod's, with the directory moved under tmp.
    env = {
        **given,
        "LOADER_DIR": str(tmp),
        "LOADER_TERMINATION_LOG": str(tmp / "message"),
        "LOADER_POD_UID": "pod-1",  # the downward API's metadata.uid
    }
    return ["env", *(f"{k}={v}" for k, v in env.items()), sh, flag, script], local, bin_dir


def _run(cmd: list[str], bin_dir: Path, log: Path, **env: str) -> subprocess.CompletedProcess[str]:
    path = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run(
        cmd, env={"PATH": path, "LOG": str(log), **env}, capture_output=True, text=True
    )


def test_11_loader_rerun_keeps_the_file_and_exits_0(tmp_path: Path) -> None:
    cmd, local, bin_dir = _loader(tmp_path)
    log = tmp_path / "log"
    first = _run(cmd, bin_dir, log)
    assert first.returncode == 0, first.stderr
    assert local.read_text() == "weights"
    log.write_text("")
    second = _run(cmd, bin_dir, log)  # after a node reboot: the file is there
    assert second.returncode == 0, second.stderr
    assert log.read_text() == ""  # neither curl nor mv ran
    assert local.read_text() == "weights"


def test_11_loader_resumes_or_replaces_a_partial_download(tmp_path: Path) -> None:
    cmd, local, bin_dir = _loader(tmp_path)
    log = tmp_path / "log"
    part = local.parent / f".{local.name}.pod-1.part"  # this pod's part
    part.write_text("par")
    assert _run(cmd, bin_dir, log).returncode == 0
    assert local.read_text() == "partial" and "-C -" in log.read_text()
    local.unlink()
    part.write_text("garbage")
    assert _run(cmd, bin_dir, log, FAIL_RESUME="1").returncode == 0
    assert local.read_text() == "weights"
    assert not part.exists()


# 5 (continued): the GPUs a pod gets are what its claims ask for; every parallel axis counts.
def _refusal(model: Any, runtime: str, claimed: int | None = None, **spec: Any) -> str:
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, **spec})
    problems = runtime_problems(service, model, model_placement(model).arg, claimed)
    return "; ".join(f"{p.reason}: {p.message}" for p in problems)


def test_5_parallelism_counts_claimed_devices_data_and_pipeline_parallel() -> None:
    claims = [{"name": "g", "resourceClaimTemplateName": "two-gpus"}]
    counted = parse_model(
        {
            **SAFETENSORS,
            "hardware": {
                "accelerator": "cuda",
                "gpu": {"enabled": True, "count": 4, "resourceClaims": claims},
            },
        }
    )
    # count 4 next to a template of 2: count sizes the runtime (the guide), served;
    # DeviceCount=False CountMismatch says the numbers differ (test_dra_sizing).
    assert _refusal(counted, "vllm", claimed=2) == ""
    assert _refusal(counted, "vllm", claimed=4) == ""
    # An explicit TP above count stays refused (LLMKube's rule), whatever the claims give.
    message = _refusal(counted, "vllm", claimed=8, vllmConfig={"tensorParallelSize": 8})
    assert "ParallelismExceedsGPUs" in message and "gets 4" in message, message
    # Without count the claims' devices bound an explicit TP.
    uncounted = parse_model(
        {
            **SAFETENSORS,
            "hardware": {"accelerator": "cuda", "gpu": {"enabled": True, "resourceClaims": claims}},
        }
    )
    message = _refusal(uncounted, "vllm", claimed=2, vllmConfig={"tensorParallelSize": 4})
    assert "ParallelismExceedsGPUs" in message and "gets 2" in message, message
    two = gpu_model(2)
    # vLLM data parallel on one node multiplies the GPUs.
    message = _refusal(two, "vllm", extraArgs=["--data-parallel-size", "4"])
    assert "= 8 GPUs" in message, message
    # SGLang pipeline parallel counts; dp attention shares the TP group's GPUs.
    assert "= 4 GPUs" in _refusal(two, "sglang", extraArgs=["--pp-size", "2"])
    eight = gpu_model(8)
    dp_attention = ["--tp-size", "8", "--dp-size", "8", "--enable-dp-attention"]
    assert _refusal(eight, "sglang", extraArgs=dp_attention) == ""
    assert "= 64 GPUs" in _refusal(eight, "sglang", extraArgs=dp_attention[:4])


# 2 (continued): a user port that is no port number is refused, not silently replaced.
def test_2_a_user_port_that_is_not_a_number_is_refused() -> None:
    for runtime, spelling in (("tgi", "-p"), ("vllm", "--port"), ("llamacpp", "--port")):
        model = (
            gpu_model(1)
            if runtime != "llamacpp"
            else parse_model({"source": "https://example.com/m.gguf"})
        )
        message = _refusal(model, runtime, extraArgs=[spelling, "abc"])
        assert "InvalidRuntimeConfig" in message and "'abc'" in message, (runtime, message)
        assert _refusal(model, runtime, extraArgs=[spelling, "9000"]) == ""


def test_vllm_quantization_is_checked_against_the_platform() -> None:
    """vLLM's ROCm and XPU platforms narrow the methods (Platform.verify_quantization)."""
    amd = gpu_model(vendor="amd")
    message = _refusal(amd, "vllm", vllmConfig={"quantization": "gptq_marlin"})
    assert "InvalidRuntimeConfig: spec.vllmConfig.quantization" in message, message
    assert "on rocm" in message
    assert _refusal(amd, "vllm", vllmConfig={"quantization": "awq"}) == ""
    assert _refusal(gpu_model(), "vllm", vllmConfig={"quantization": "gptq_marlin"}) == ""
