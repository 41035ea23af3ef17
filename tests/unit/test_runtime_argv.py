"""Issue 27, items 7 and 12-19: every accepted pod starts under the real runtime.

extraArgs are read as each runtime's parser reads them (argparse abbreviations and
attached short values, clap's `-p9000`, llama.cpp's exact spellings), and what would
make the runtime exit or never serve is refused by the reconcile and the webhook alike,
naming the field. The checks run on the objects the controller builds (runtime_problems,
pod_spec) and on the webhook's verdict; the server-tier case reconciles for real.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_runtime_argv.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from api import parse_inference_service, parse_model
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec
from reconcilers.sources.placement import model_placement, runtime_mounts
from runtimes.arg_errors import runtime_arg_errors
from runtimes.command import SPLIT_MODES
from runtimes.problems import runtime_problems
from tests.support.webhook import admission_request
from webhook.admission import verdict

ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}
QWEN = "Qwen/Qwen3-8B"
GGUF = "https://example.com/m.gguf"


def model(count: int | None = 1, source: str = QWEN, **gpu: Any) -> Any:
    fmt = "gguf" if source.endswith(".gguf") or "GGUF" in source else "safetensors"
    hw: Obj = {"accelerator": "cuda", "gpu": {"enabled": True, **gpu}}
    if count is not None:
        hw["gpu"]["count"] = count
    return parse_model({"source": source, "format": fmt, "hardware": hw})


def cpu_gguf(source: str = GGUF) -> Any:
    return parse_model({"source": source, "format": "gguf", "hardware": {"accelerator": "cpu"}})


def problems(m: Any, runtime: str, claimed: int | None = None, **spec: Any) -> list[str]:
    """What the reconcile refuses (reason: message), mounts as the pod gets them."""
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, **spec})
    placement = model_placement(m, runtime)
    found = runtime_problems(
        service, m, placement.arg, claimed, mounts=runtime_mounts(placement, service)
    )
    return [f"{p.reason}: {p.message}" for p in found]


def argv(m: Any, runtime: str, claimed: int | None = None, **spec: Any) -> list[str]:
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, **spec})
    args: list[str] = pod_spec(scope_for(ISVC, service, m, claimed))["containers"][0]["args"]
    return args


def webhook(runtime: str, **spec: Any) -> str:
    allowed, message = verdict(
        admission_request("InferenceService", {"modelRef": "m", "runtime": runtime, **spec})
    )
    return "" if allowed else message


def value(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


# -- 7. Options that make the runtime print and exit 0 (a restart loop) ---------------

EXITS = [
    *(("llamacpp", w) for w in ("-h", "--help", "--usage", "--version", "-cl", "--cache-list")),
    ("llamacpp", "--completion-bash"),
    ("llamacpp", "--list-devices"),
    ("vllm", "--help"),
    ("vllm", "-h"),
    ("sglang", "--help"),
    ("sglang", "--hel"),  # argparse's unique prefix of --help
]


@pytest.mark.parametrize(("runtime", "word"), EXITS)
def test_7_an_option_that_exits_0_at_start_is_refused(runtime: str, word: str) -> None:
    m = cpu_gguf() if runtime == "llamacpp" else model()
    extra = ["--metrics" if runtime == "llamacpp" else "--trust-remote-code", word]
    said = "spec.extraArgs[1]: "
    refused = problems(m, runtime, extraArgs=extra)
    assert any(said in p and "exit 0" in p for p in refused), refused
    message = webhook(runtime, extraArgs=extra)
    assert said in message and "exit 0" in message, message


# -- 12. Parallelism above the devices a pod gets --------------------------------------


def claims_model(count: int | None) -> Any:
    return model(count, resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}])


@pytest.mark.parametrize(
    ("runtime", "option"),
    [("vllm", "--tensor-parallel-size"), ("sglang", "--tp-size"), ("tgi", "--num-shard")],
)
def test_12_count_sizes_the_runtime_only_up_to_the_claimed_devices(
    runtime: str, option: str
) -> None:
    # count 2 beside a 1-device template: one device, no parallelism the pod cannot run.
    assert option not in argv(claims_model(2), runtime, claimed=1)
    assert problems(claims_model(2), runtime, claimed=1) == []
    # count 4 beside a 2-device template: sized for the 2 devices.
    assert value(argv(claims_model(4), runtime, claimed=2), option) == "2"
    # resources.gpu 2 with a 1-device claim.
    assert option not in argv(claims_model(None), runtime, claimed=1, resources={"gpu": 2})
    # count below the claims' devices: count sizes it.
    assert value(argv(claims_model(2), runtime, claimed=4), option) == "2"
    # Unknown before allocation (allocationMode All): count rules.
    assert value(argv(claims_model(4), runtime, claimed=None), option) == "4"


def test_12_explicit_parallelism_above_the_pods_devices_stays_refused() -> None:
    refused = problems(claims_model(4), "vllm", claimed=2, vllmConfig={"tensorParallelSize": 4})
    assert any("ParallelismExceedsGPUs" in p and "gets 2" in p for p in refused), refused
    refused = problems(claims_model(4), "tgi", claimed=2, extraArgs=["--num-shard", "4"])
    assert any("ParallelismExceedsGPUs" in p and "gets 2" in p for p in refused), refused


def test_12_llamacpp_gets_no_more_tensor_split_parts_than_its_claims_give() -> None:
    m = model(4, GGUF, resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}])
    assert value(argv(m, "llamacpp", claimed=2), "--tensor-split") == "1,1"
    assert "--tensor-split" not in argv(m, "llamacpp", claimed=1)
    # layerSplit is the user's own split: more ranges than the pod's devices is refused.
    ranges = ["0-9", "10-19", "20-29", "30-39"]
    m = model(
        4,
        GGUF,
        resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}],
        sharding={"layerSplit": ranges},
    )
    refused = problems(m, "llamacpp", claimed=2)
    said = "4 --tensor-split parts (Model 'm' spec.hardware.gpu.sharding.layerSplit)"
    assert any(said in p and "gets 2" in p for p in refused), refused
    assert problems(m, "llamacpp", claimed=4) == []


# -- 13. Abbreviations read as the option they abbreviate ------------------------------


def test_13_an_argparse_abbreviation_replaces_ours_and_counts() -> None:
    args = argv(model(4), "vllm", extraArgs=["--tensor-parallel", "4"])
    assert (
        args.count("--tensor-parallel-size") == 1 and value(args, "--tensor-parallel-size") == "4"
    )
    assert "--tensor-parallel" not in args
    refused = problems(model(1), "vllm", extraArgs=["--tensor-parallel", "4"])
    assert any("ParallelismExceedsGPUs" in p and "= 4 GPUs" in p for p in refused), refused
    refused = problems(model(2), "sglang", extraArgs=["--tp-s", "4"])
    assert any("ParallelismExceedsGPUs" in p for p in refused), refused
    args = argv(model(2), "sglang", extraArgs=["--tensor-parallel=2"])
    assert args.count("--tp-size") + args.count("--tensor-parallel-size=2") == 1, args


def test_13_vllm_json_parts_and_optimization_levels_pass_as_written() -> None:
    extra = ["--compilation-config.mode", "3", "-O3", "--tensor-parallel", "1"]
    args = argv(model(), "vllm", extraArgs=extra)
    assert args[-5:] == ["--compilation-config.mode", "3", "-O3", "--tensor-parallel-size", "1"]
    assert problems(model(), "vllm", extraArgs=extra) == []


def test_13_an_abbreviated_value_is_checked_naming_the_full_spelling() -> None:
    errors = runtime_arg_errors(
        parse_inference_service(
            {"modelRef": "m", "runtime": "vllm", "extraArgs": ["--attention-b", "XFORMERS"]}
        )
    )
    said = "spec.extraArgs[1]: --attention-backend: 'XFORMERS'"
    assert any(e.startswith(said) for e in errors), errors
    refused = problems(model(), "vllm", extraArgs=["--dty", "fp64"])
    assert any("spec.extraArgs[1]: --dtype: 'fp64'" in p for p in refused), refused
    # ambiguous (--quantization, --quantization-config): argparse exits, refused.
    assert "ambiguous" in webhook("vllm", extraArgs=["--quant", "awq"])


# -- 14. A value missing at the end ----------------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "extra", "index"),
    [
        ("vllm", ["--tensor-parallel-size"], 0),
        ("vllm", ["--max-model-len", "--enforce-eager"], 0),
        ("sglang", ["--tp-size"], 0),
        ("tgi", ["--num-shard"], 0),
        ("llamacpp", ["--metrics", "-fa"], 1),
        ("llamacpp", ["-c"], 0),
    ],
)
def test_14_a_missing_value_is_refused(runtime: str, extra: list[str], index: int) -> None:
    m = cpu_gguf() if runtime == "llamacpp" else model()
    said = f"spec.extraArgs[{index}]: "
    refused = problems(m, runtime, extraArgs=extra)
    assert any(said in p and "none follows" in p for p in refused), refused
    assert said in webhook(runtime, extraArgs=extra)


# -- 15. Attached short values ---------------------------------------------------------


@pytest.mark.parametrize("word", ["-p9000", "-p=9000"])
def test_15_tgi_attached_short_port_is_the_port(word: str) -> None:
    service = parse_inference_service({"modelRef": "m", "runtime": "tgi", "extraArgs": [word]})
    c = pod_spec(scope_for(ISVC, service, model()))["containers"][0]
    assert "--port" not in c["args"] and c["args"].count("-p=9000") == 1, c["args"]
    assert c["ports"][0]["containerPort"] == 9000
    assert problems(model(), "tgi", extraArgs=[word]) == []


def test_15_argparse_attached_short_values_are_read() -> None:
    refused = problems(model(), "vllm", extraArgs=["-qint4"])
    assert any("spec.extraArgs[0]: -q: 'int4'" in p for p in refused), refused
    assert problems(model(), "vllm", extraArgs=["-qawq"]) == []
    args = argv(model(), "vllm", vllmConfig={"quantization": "fp8"}, extraArgs=["-qawq"])
    assert "--quantization" not in args and "-q=awq" in args


def test_15_llamacpp_takes_no_attached_value() -> None:
    refused = problems(cpu_gguf(), "llamacpp", extraArgs=["-c4096"])
    assert any("spec.extraArgs[0]: -c4096 is not an option" in p for p in refused), refused


# -- 16. vLLM without an API server ----------------------------------------------------

TWO = {"members": [{"node": "a", "fabric": {"address": "10.0.0.1"}}, {"node": "b"}]}


@pytest.mark.parametrize(
    "extra",
    [["--headless"], ["--api-server-count", "0"], ["-asc=0"], ["--api-server", "0"]],
)
@pytest.mark.parametrize("multi_node", [False, True])
def test_16_vllm_without_an_api_server_is_refused(extra: list[str], multi_node: bool) -> None:
    spec: Obj = {"extraArgs": extra, **({"multiNode": TWO} if multi_node else {})}
    refused = problems(model(), "vllm", **spec)
    assert any("spec.extraArgs[" in p and "API server" in p for p in refused), refused
    assert "API server" in webhook("vllm", **spec)
    assert problems(model(), "vllm", extraArgs=["--api-server-count", "2"]) == []


def test_16_an_api_server_count_beside_our_headless_members_is_refused() -> None:
    spec: Obj = {"extraArgs": ["-asc", "1"], "multiNode": TWO}
    refused = problems(model(), "vllm", **spec)
    assert any("spec.extraArgs[1]: -asc 1" in p and "--headless" in p for p in refused), refused
    assert "spec.extraArgs[1]: -asc 1" in webhook("vllm", **spec)


# -- 17. A model path no volume provides ----------------------------------------------


def test_17_a_model_path_no_volume_provides_is_refused() -> None:
    hub = parse_model({"source": "unsloth/Qwen3-8B-GGUF", "hardware": {"accelerator": "cpu"}})
    for extra, index in ((["-m", "/models/other.gguf"], 1), (["--mmproj", "/x/mm.gguf"], 1)):
        refused = problems(hub, "llamacpp", extraArgs=extra)
        assert any(
            f"spec.extraArgs[{index}]: {extra[0]}" in p and "no volume" in p for p in refused
        ), refused
    # The loader's emptyDir holds only the staged file.
    refused = problems(cpu_gguf(), "llamacpp", extraArgs=["-m", "/models/other.gguf"])
    assert any("holds only what the loader writes" in p for p in refused), refused
    assert problems(cpu_gguf(), "llamacpp", extraArgs=["-m", "/models/m.gguf"]) == []
    # A volume of the user's provides it.
    volumes: dict[str, Any] = {
        "extraVolumes": [{"name": "w", "persistentVolumeClaim": {"claimName": "w"}}],
        "extraVolumeMounts": [{"name": "w", "mountPath": "/weights"}],
    }
    assert problems(hub, "llamacpp", extraArgs=["-m", "/weights/a.gguf"], **volumes) == []
    refused = problems(model(), "vllm", extraArgs=["--model", "/weights/qwen"])
    assert any("spec.extraArgs[1]: --model '/weights/qwen'" in p for p in refused), refused


# -- 18. TGI's token limits as its launcher has them -----------------------------------


def test_18_tgi_input_limit_without_total_follows_the_launchers_default() -> None:
    # launcher main.rs: max_total_tokens defaults to the model's context capped at 4096.
    refused = problems(model(), "tgi", tgiConfig={"maxInputLength": 4096})
    assert any("spec.tgiConfig.maxInputLength (4096)" in p for p in refused), refused
    assert problems(model(), "tgi", tgiConfig={"maxInputLength": 4095}) == []
    both = {"maxInputLength": 8000, "maxTotalTokens": 8192}
    assert problems(model(), "tgi", tgiConfig=both) == []


# -- 19. llama.cpp split modes b10068 runs on the model's accelerator -----------------


def test_19_tensor_strategy_is_tensor_split_and_row_runs_only_on_sycl() -> None:
    assert SPLIT_MODES["tensor"] == "tensor" and SPLIT_MODES["pipeline"] == "layer"
    tensor = model(2, GGUF, sharding={"strategy": "tensor"})
    assert value(argv(tensor, "llamacpp"), "--split-mode") == "tensor"
    assert problems(tensor, "llamacpp") == []
    refused = problems(tensor, "llamacpp", flashAttention=False)
    assert any("sharding.strategy (tensor)" in p and "flash attention" in p for p in refused)
    row = model(2, GGUF, sharding={"strategy": "row"})
    refused = problems(row, "llamacpp")
    assert any(
        "spec.hardware.gpu.sharding.strategy (row)" in p and "split buffer" in p for p in refused
    ), refused
    intel = model(2, GGUF, vendor="intel", sharding={"strategy": "row"})
    assert value(argv(intel, "llamacpp"), "--split-mode") == "row"
    assert problems(intel, "llamacpp") == []
    refused = problems(model(1, GGUF), "llamacpp", extraArgs=["-sm", "row"])
    assert any("spec.extraArgs (--split-mode)" in p for p in refused), refused
    assert problems(cpu_gguf(), "llamacpp", extraArgs=["-sm", "row"]) == []


def test_tensor_split_on_a_pod_with_one_gpu_is_refused() -> None:
    """b10068's CUDA build on an H200 aborts at warm-up with tensor split over one GPU
    (scripts/gpu-check, docs/runtimes.md); two or more per pod are accepted."""
    refused = problems(model(1, GGUF), "llamacpp", extraArgs=["--split-mode", "tensor"])
    assert any(
        "spec.extraArgs (--split-mode): tensor split on a pod with one GPU" in p for p in refused
    ), refused
    assert problems(model(2, GGUF), "llamacpp", extraArgs=["-sm", "tensor"]) == []
    assert problems(cpu_gguf(), "llamacpp", extraArgs=["-sm", "tensor"]) == []
