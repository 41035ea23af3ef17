"""Specs whose pod would start and then do something else than asked (issue 34): a bare
source that names a file, llama.cpp's --host on a UNIX socket, SGLang's parallel sizes
that its argument resolution asserts on; and every staged file pinned (spec.fileDigests)
and reported with its digest's source (status.files). Each is refused (or reported)
before a pod exists, naming the field, the value and what would be accepted.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_starts_right.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec
from reconcilers.model.delivery import delivery
from reconcilers.sources.loader import LOADER_NAME, hf_token_env, loader_for
from reconcilers.sources.placement import model_placement
from runtimes.problems import runtime_problems
from tests.support.webhook import admission_request
from webhook.admission import verdict

ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}
GPU = {"accelerator": "cuda", "gpu": {"enabled": True, "vendor": "nvidia"}}


def refusals(model: Any, runtime: str, **spec: Any) -> str:
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, **spec})
    problems = runtime_problems(service, model, model_placement(model).arg)
    return "; ".join(f"{p.reason}: {p.message}" for p in problems)


# -- 1. a bare source that names a file --------------------------------------------------

BARE_FILES = [
    ("models/qwen.gguf", "ends in a model file's extension (.gguf)"),
    ("qwen.safetensors", "ends in a model file's extension (.safetensors)"),
    ("org/Model.GGUF", "ends in a model file's extension (.GGUF)"),
    ("./qwen.gguf", "is a relative path"),
    ("org/repo/sub/model", "has more than two segments"),
]


@pytest.mark.parametrize(("source", "why"), BARE_FILES)
def test_a_bare_source_that_names_a_file_is_refused_with_the_ways_to_say_it(
    source: str, why: str
) -> None:
    """On main `models/qwen.gguf` went to llama.cpp as `-hf models/qwen.gguf` (to vLLM and
    SGLang as the model id): the runtime asked the hub for a repository of that name."""
    with pytest.raises(InvalidSpec) as e:
        parse_model({"source": source, "hardware": GPU})
    message = e.value.errors[0]
    assert message.startswith(f"spec.source: {source!r}: ") and why in message, message
    for way in ("hf://owner/repo/path/file.gguf", "file:///abs/path", "pvc://claim/path"):
        assert way in message, message
    allowed, said = verdict(admission_request("Model", {"source": source}))
    assert not allowed and said.startswith("spec.source: "), said


@pytest.mark.parametrize(
    "source", ["Qwen/Qwen3-8B", "bartowski/Qwen3-8B-GGUF", "org/model.v2", "gpt2"]
)
def test_a_bare_repo_id_stays_a_hub_id(source: str) -> None:
    assert parse_model({"source": source}).location.kind == "hub"


# -- 1. llama.cpp --host on a UNIX socket (the real binary: test_llama_server_real.py) ---

CPU_GGUF = {"source": "https://h/m/tiny.gguf"}


@pytest.mark.parametrize(
    "extra",
    [["--host", "/tmp/llama.sock"], ["--host=llama.sock"], ["--host", "a", "--host", "b.sock"]],
)
def test_a_llamacpp_host_ending_in_sock_is_refused(extra: list[str]) -> None:
    message = refusals(parse_model(CPU_GGUF), "llamacpp", extraArgs=extra)
    assert "InvalidRuntimeConfig: spec.extraArgs[" in message and "UNIX socket" in message
    assert "opening no TCP port" in message, message
    allowed, said = verdict(
        admission_request(
            "InferenceService", {"modelRef": "m", "runtime": "llamacpp", "extraArgs": extra}
        )
    )
    assert not allowed and "UNIX socket" in said, said


@pytest.mark.parametrize(
    "extra",
    [["--host", "0.0.0.0"], ["--host", "a.sock", "--host", "0.0.0.0"], ["--alias", "x.sock"]],
)
def test_a_llamacpp_host_that_is_an_address_is_served(extra: list[str]) -> None:
    assert refusals(parse_model(CPU_GGUF), "llamacpp", extraArgs=extra) == ""


# -- 1. SGLang's parallel sizes ----------------------------------------------------------


def sglang_model(count: int) -> Any:
    gpu = {**GPU["gpu"], "count": count}  # type: ignore[dict-item]
    return parse_model(
        {"source": "Qwen/Qwen3-8B", "format": "safetensors", "hardware": {**GPU, "gpu": gpu}}
    )


def test_sglang_dp_attention_on_a_tp_it_does_not_divide_is_refused() -> None:
    """python/sglang/srt/arg_groups/parallel_hook.py (SGLang 0.5.23):
    handle_deprecated_dp_attention makes `--enable-dp-attention --dp-size N` mean
    attn_dp_size N, and handle_data_parallelism asserts `tp_size % attn_dp_size == 0`."""
    message = refusals(sglang_model(1), "sglang", extraArgs=["--enable-dp-attention", "--dp", "2"])
    assert message.startswith("InvalidRuntimeConfig: spec.extraArgs (--dp-size): "), message
    assert "--dp-size 2 with --enable-dp-attention" in message and "it is 1" in message
    assert "Serve it with 2 GPUs per pod" in message, message
    assert (
        refusals(sglang_model(2), "sglang", extraArgs=["--enable-dp-attention", "--dp", "2"]) == ""
    )
    # The typed field is named when it gives the size.
    typed = refusals(
        sglang_model(3),
        "sglang",
        sglangConfig={"dataParallelSize": 2},
        extraArgs=["--enable-dp-attention"],
    )
    assert "spec.sglangConfig.dataParallelSize (--dp-size)" in typed and "4 GPUs" in typed, typed
    # Without dp attention --dp-size counts replicas, each with its own TP group: served.
    assert "dp attention" not in refusals(sglang_model(2), "sglang", extraArgs=["--dp", "2"])


def test_sglang_attn_dp_size_that_does_not_divide_tp_is_refused() -> None:
    """parallel_hook.py handle_data_parallelism: attn_dp_size > 1 asserts
    tp_size % attn_dp_size == 0 (--attn-dp-size is the 0.5.23 spelling)."""
    message = refusals(sglang_model(2), "sglang", extraArgs=["--attn-dp-size", "4"])
    assert "spec.extraArgs (--attn-dp-size)" in message and "multiple of 4" in message, message
    assert "divides 2 (1, 2)" in message
    assert refusals(sglang_model(4), "sglang", extraArgs=["--attn-dp-size", "4"]) == ""


def test_sglang_moe_dp_size_that_does_not_divide_tp_is_refused() -> None:
    """parallel_hook.py handle_context_parallelism: moe_dp_size > 1 asserts
    tp_size % moe_dp_size == 0."""
    message = refusals(sglang_model(4), "sglang", extraArgs=["--moe-dp-size", "3"])
    assert "spec.extraArgs (--moe-dp-size)" in message and "it is 4" in message, message
    assert refusals(sglang_model(4), "sglang", extraArgs=["--moe-dp-size", "2"]) == ""


# -- 2. every file pinned: spec.fileDigests ---------------------------------------------

A, B = "a" * 64, "b" * 64
MULTI = {"source": "org/repo", "files": ["m-1.gguf", "m-2.gguf"], "mmproj": "proj.gguf"}


def test_file_digests_pin_each_staged_file_and_reach_the_loader() -> None:
    model = parse_model(
        {
            **MULTI,
            "sha256": A,
            "fileDigests": [
                {"file": "m-2.gguf", "sha256": B.upper()},
                {"file": "proj.gguf", "sha256": A},
            ],
        }
    )
    assert [model.pinned_sha256(i) for i in range(3)] == [A, B, A]
    loading = loader_for(model)
    assert loading is not None
    env = {e["name"]: e.get("value") for e in loading.container["env"]}
    assert (env["LOADER_SHA256_0"], env["LOADER_SHA256_1"], env["LOADER_SHA256_2"]) == (A, B, A)
    assert env["LOADER_HUB"] == "1"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            {**MULTI, "fileDigests": [{"file": "other.gguf", "sha256": A}]},
            "spec.fileDigests[0].file: 'other.gguf' is not a file of spec.files or spec.mmproj "
            "(they name: m-1.gguf, m-2.gguf, proj.gguf)",
        ),
        (
            {"source": "hf://org/repo/m.gguf", "fileDigests": [{"file": "m.gguf", "sha256": A}]},
            "pin a one-file source with spec.sha256",
        ),
        (
            {**MULTI, "sha256": A, "fileDigests": [{"file": "m-1.gguf", "sha256": B}]},
            "spec.fileDigests[0].file: 'm-1.gguf' is files[0], which spec.sha256 pins to "
            "another digest",
        ),
        (
            {**MULTI, "fileDigests": [{"file": "m-1.gguf", "sha256": "a" * 63}]},
            "spec.fileDigests[0].sha256",
        ),
    ],
)
def test_a_file_digest_that_pins_nothing_or_contradicts_sha256_is_refused(
    spec: Any, says: str
) -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_model(spec)
    assert says in "; ".join(e.value.errors), e.value.errors
    allowed, said = verdict(admission_request("Model", spec))
    assert not allowed and said.startswith("spec.fileDigests[0]"), said


def test_the_hf_token_goes_only_to_the_configured_hub() -> None:
    secret = {"sourceSecretRef": {"name": "hf"}}
    on_hf = parse_model({"source": "https://huggingface.co/o/r/resolve/main/m.gguf", **secret})
    on_mirror = parse_model(
        {"source": "https://mirror.example:8443/o/r/resolve/main/m.gguf", **secret}
    )
    mirror = "https://mirror.example:8443"
    assert hf_token_env(on_hf, None) is not None and hf_token_env(on_mirror, None) is None
    assert hf_token_env(on_hf, None, mirror) is None and hf_token_env(on_mirror, None, mirror)
    # A hub source downloads from the configured hub.
    for source, url in [
        ({"source": "hf://o/r/sub/m.gguf"}, f"{mirror}/o/r/resolve/main/sub/m.gguf"),
        # A revision is one path segment, as huggingface_hub quotes it.
        (
            {"source": "hf://o/r@refs/pr/1", "files": ["m.gguf"]},
            f"{mirror}/o/r/resolve/refs%2Fpr%2F1/m.gguf",
        ),
    ]:
        loading = loader_for(parse_model(source), hub=mirror)
        assert loading is not None
        env = {e["name"]: e.get("value") for e in loading.container["env"]}
        assert env["LOADER_URL_0"] == url and env["LOADER_HUB"] == "1"


def test_a_runtime_that_downloads_the_repo_itself_is_told_the_hub() -> None:
    """vLLM, SGLang and TGI read HF_ENDPOINT (huggingface_hub, hf-hub), llama.cpp's -hf
    too (common/common.cpp common_get_model_endpoint, after MODEL_ENDPOINT)."""
    service = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    model = parse_model({"source": "Qwen/Qwen3-8B", "format": "safetensors"})
    mirror = "https://mirror.example"
    env = pod_spec(scope_for(ISVC, service, model, hub=mirror))["containers"][0].get("env") or []
    assert {"name": "HF_ENDPOINT", "value": mirror} in env
    default = pod_spec(scope_for(ISVC, service, model))["containers"][0].get("env") or []
    assert not any(e["name"] == "HF_ENDPOINT" for e in default)


def loader_pod(model: Any, report: dict[str, Any], code: int = 0) -> dict[str, Any]:
    """A pod whose loader (as the controller builds it) ended with this report."""
    loading = loader_for(model)
    assert loading is not None
    term = {"exitCode": code, "message": json.dumps({"cacheKey": model.cache_key, **report})}
    return {
        "spec": {"initContainers": [loading.container]},
        "status": {"initContainerStatuses": [{"name": LOADER_NAME, "state": {"terminated": term}}]},
    }


def file_entry(name: str, source: str) -> dict[str, Any]:
    return {"name": name, "size": 3, "sha256": A, "digestSource": source}


def test_a_hub_file_without_a_digest_is_said_on_the_model() -> None:
    model = parse_model({"source": "org/repo", "files": ["m.gguf", "config.json"]})
    report = {
        "path": "/models/m.gguf",
        "sha256": A,
        "stagedFiles": ["m.gguf", "config.json"],
        "files": [file_entry("m.gguf", "hub"), file_entry("config.json", "computed")],
        "filesOmitted": 0,
    }
    d = delivery(model, [loader_pod(model, report)])
    assert d.phase == "Ready" and d.status["files"] == report["files"]
    assert "the hub published no digest for config.json" in d.message, d.message
    assert "pin them in spec.fileDigests" in d.message


def test_a_cut_report_still_gives_every_staged_file_and_counts_the_rest() -> None:
    names = [f"shard-{i}.safetensors" for i in range(5)]
    model = parse_model({"source": "org/repo", "files": names})
    report = {
        "path": "/models",
        "sha256": A,
        "stagedFiles": names[:2],
        "stagedOmitted": 3,
        "files": [file_entry(n, "hub") for n in names[:1]],
        "filesOmitted": 4,
    }
    d = delivery(model, [loader_pod(model, report)])
    assert d.status["stagedFiles"] == names and d.status["filesOmitted"] == 4


def test_a_report_from_a_loader_without_the_current_pins_is_not_ready() -> None:
    """A pod from before spec.fileDigests pinned m-2.gguf: its loader checked nothing
    for that file, so its report does not make the Model Ready."""
    old = parse_model({"source": "org/repo", "files": ["m-1.gguf", "m-2.gguf"]})
    pinned = parse_model(
        {
            "source": "org/repo",
            "files": ["m-1.gguf", "m-2.gguf"],
            "fileDigests": [{"file": "m-2.gguf", "sha256": B}],
        }
    )
    assert old.cache_key == pinned.cache_key
    report = {"path": "/models/m-1.gguf", "sha256": A, "stagedFiles": ["m-1.gguf", "m-2.gguf"]}
    assert delivery(pinned, [loader_pod(old, report)]).phase == "Pending"
    assert delivery(pinned, [loader_pod(pinned, report)]).phase == "Ready"


# -- 1. llama.cpp's Vertex AI env (the real binary: test_llama_server_real.py) -----------


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            [{"name": "AIP_MODE", "value": "PREDICTION"}],
            "spec.env[0]: AIP_MODE=PREDICTION makes llama-server b10068 listen on AIP_HTTP_PORT "
            "(8080) instead of --port 9090",
        ),
        (
            [
                {"name": "AIP_HTTP_PORT", "value": "8081"},
                {"name": "AIP_MODE", "value": "PREDICTION"},
            ],
            "spec.env[1]: AIP_MODE=PREDICTION makes llama-server b10068 listen on "
            "AIP_HTTP_PORT (8081)",
        ),
        ([{"name": "AIP_HTTP_PORT", "value": "http"}], "spec.env[0]: AIP_HTTP_PORT='http'"),
        ([{"name": "AIP_HTTP_PORT", "value": "99999999999"}], "not a 32-bit number"),
    ],
)
def test_llamacpp_vertex_env_that_moves_or_breaks_the_port_is_refused(
    env: list[dict[str, str]], says: str
) -> None:
    message = refusals(parse_model(CPU_GGUF), "llamacpp", env=env, containerPort=9090)
    assert says in message, message


@pytest.mark.parametrize(
    "env",
    [
        [{"name": "AIP_MODE", "value": "PREDICTION"}, {"name": "AIP_HTTP_PORT", "value": "9090"}],
        [{"name": "AIP_HTTP_PORT", "value": "8081"}],  # read, but not used outside the mode
        [{"name": "AIP_MODE", "value": "other"}],
    ],
)
def test_llamacpp_vertex_env_on_the_container_port_is_served(env: list[dict[str, str]]) -> None:
    assert refusals(parse_model(CPU_GGUF), "llamacpp", env=env, containerPort=9090) == ""


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--enable-prefill-cp"], "--enable-prefill-cp needs --cp-strategy"),
        (["--dcp-size", "0"], "spec.extraArgs (--dcp-size): '0' is below 1"),
        (
            ["--dcp-size", "2", "--enable-prefill-cp", "--cp-strategy", "zigzag"],
            "--dcp-size 2 with --enable-prefill-cp",
        ),
    ],
)
def test_sglang_context_parallel_options_it_raises_on_are_refused(
    extra: list[str], says: str
) -> None:
    """parallel_hook.py handle_context_parallelism ("--cp-strategy must be set when
    --enable-prefill-cp is enabled") and handle_decode_context_parallelism (dcp_size < 1;
    dcp_size > 1 with enable_prefill_cp)."""
    message = refusals(sglang_model(2), "sglang", extraArgs=extra)
    assert says in message, message


@pytest.mark.parametrize(
    "extra", [["--enable-prefill-cp", "--cp-strategy", "zigzag"], ["--dcp-size", "2"]]
)
def test_sglang_context_parallel_options_it_takes_are_served(extra: list[str]) -> None:
    assert refusals(sglang_model(2), "sglang", extraArgs=extra) == ""


# -- 1. vLLM's startup relations ---------------------------------------------------------


def vllm_model(count: int = 1) -> Any:
    return sglang_model(count)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        # vllm/entrypoints/common/cli_args.py validate_parsed_serve_args
        (["--enable-auto-tool-choice"], "--enable-auto-tool-choice requires --tool-call-parser"),
        (["--enable-log-outputs"], "--enable-log-outputs requires --enable-log-requests"),
        (
            ["--enable-log-outputs", "--enable-log-requests", "--disable-log-requests"],
            "--enable-log-outputs requires --enable-log-requests",
        ),
        (["--enable-per-request-metrics", "--disable-log-stats"], "--disable-log-stats"),
        # vllm/config/scheduler.py SchedulerConfig.verify_max_model_len
        (
            ["--max-num-batched-tokens", "128", "--max-num-seqs", "256"],
            "spec.extraArgs (--max-num-batched-tokens): 128 is below --max-num-seqs 256",
        ),
        # vllm/config/parallel.py ParallelConfig._validate_parallel_config
        (
            ["--data-parallel-size", "2", "--data-parallel-size-local", "4"],
            "4 is more than --data-parallel-size 2",
        ),
        (["-dcp", "3"], "3 does not divide the tensor-parallel size 2"),
    ],
)
def test_vllm_relations_it_exits_on_are_refused(extra: list[str], says: str) -> None:
    message = refusals(vllm_model(2), "vllm", extraArgs=extra)
    assert says in message, message


def test_the_typed_batched_tokens_field_is_named() -> None:
    message = refusals(
        vllm_model(),
        "vllm",
        vllmConfig={"maxNumBatchedTokens": 64},
        extraArgs=["--max-num-seqs", "65"],
    )
    assert "spec.vllmConfig.maxNumBatchedTokens (--max-num-batched-tokens): 64" in message


@pytest.mark.parametrize(
    "extra",
    [
        ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
        ["--enable-auto-tool-choice", "--no-enable-auto-tool-choice"],
        ["--enable-log-outputs", "--enable-log-requests"],
        ["--enable-per-request-metrics"],
        ["--max-num-seqs", "4096"],  # vLLM sizes the unset batched tokens from the hardware
        ["--max-num-batched-tokens", "256", "--max-num-seqs", "256"],
        ["-dcp", "2"],
        ["-dcp", "3", "-pcp", "3"],  # PCP's own rule, not checked here
    ],
)
def test_vllm_relations_it_takes_are_served(extra: list[str]) -> None:
    message = refusals(vllm_model(2), "vllm", extraArgs=extra)
    assert "InvalidRuntimeConfig" not in message, message
