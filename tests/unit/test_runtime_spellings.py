"""extraArgs options the pinned runtime's parser does not know are refused, naming the field.

The spellings ship in runtimes/data/runtime_options.json (scripts/runtime-spellings.py): vLLM,
SGLang and TGI off the contract files, llama.cpp off the pinned llama-server's --help.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from runtimes.arg_errors import runtime_arg_errors
from runtimes.parsers import DATA, PARSERS
from runtimes.problems import INVALID_RUNTIME_CONFIG, runtime_problems
from runtimes.spellings import normalize_user_args
from tests.support.paths import REPO

SCRIPT = REPO / "scripts" / "runtime-spellings.py"
BUILD_SCRIPT = REPO / "scripts" / "build-llama-server.sh"
VERSIONS = {"vllm": "vLLM 0.34.0", "sglang": "SGLang 0.5.23", "tgi": "TGI 3.3.6"}
VERSIONS["llamacpp"] = "llama.cpp b10068"
# Spellings of llama.cpp's later tree (the contract's llamacpp.json) that b10068 lacks.
LLAMACPP_LATER_ONLY = (
    "--kv-unified-per-slot",
    "--lazy-mode",
    "--load-mode",
    "--log-jsonl",
    "--mcp-servers-config",
    "--mcp-servers-json",
    "--mmproj-device",
    "--n-cpu-ffn",
    "--no-log-jsonl",
    "--reasoning-effort",
    "--rpc",  # b10068 has it only where built with GGML_RPC, which the images are not
    "--spec-synth-len",
    "--spec-synth-rates",
    "--tools-runtime",
    "--video-ffmpeg-dir",
    "--video-fps",
    "--video-timestamp-interval",
    "-lm",
    "-lzm",
    "-mmdev",
    "-ncffn",
)


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("runtime_spellings", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def errors(runtime: str, *extra: str) -> list[str]:
    spec = {"modelRef": "m", "runtime": runtime, "extraArgs": list(extra)}
    try:
        return runtime_arg_errors(parse_inference_service(spec))
    except InvalidSpec as e:  # the webhook's parse applies the same checks
        return list(e.errors)


# Every spelling form each parser reads: one argv each, all accepted.
ACCEPTED = {
    "vllm": [
        ["--max-model-len", "4096"],
        ["--max-model-len=4096"],
        ["--max_model_len", "4096"],  # FlexibleArgumentParser: `_` read as `-`
        ["--max-model", "4096"],  # argparse's unique prefix
        ["-tp", "2"],
        ["-q", "fp8"],
        ["-qfp8"],  # a short with its value attached
        ["--enforce-eager"],
        ["--no-enable-prefix-caching"],  # BooleanOptionalAction
        ["--compilation-config.mode", "3"],  # a key of the JSON option
        ["-O3"],
        ["--seed", "-1"],  # a negative number is a value
        ["--served-model-name", "a", "b"],
    ],
    "sglang": [
        ["--mem-fraction-static", "0.8"],
        ["--mem-fraction-static=0.8"],
        ["--tp", "2"],  # unique prefixes of --tp-size / --dp-size
        ["--dp-size", "1"],
        ["--max-running", "8"],
        ["--enable-metrics"],
        ["--random-seed", "-1"],
    ],
    "tgi": [
        ["--max-batch-size", "4"],
        ["--max-batch-size=4"],
        ["-p", "8080"],
        ["--disable-custom-kernels"],
    ],
    "llamacpp": [
        ["--ctx-size", "4096"],
        ["-c", "4096"],
        ["--ctx-size=4096"],  # written as two words by the reconciler
        ["--keep=5"],
        ["--ctx_size", "4096"],
        ["--no-warmup"],
        ["-nkvo"],
        ["--seed", "-1"],
        ["--override-kv", "-x=int:1"],  # a value that starts with `-`: taken as the value
        ["--control-vector-layer-range", "-1", "-2"],
    ],
}


@pytest.mark.parametrize(
    ("runtime", "argv"),
    [(rt, argv) for rt, argvs in ACCEPTED.items() for argv in argvs],
    ids=[f"{rt}:{' '.join(argv)}" for rt, argvs in ACCEPTED.items() for argv in argvs],
)
def test_every_spelling_form_of_a_known_option_is_accepted(runtime: str, argv: list[str]) -> None:
    assert errors(runtime, *argv) == []


REFUSED = [
    ("vllm", ["--enforce-eager", "--no-such-flag"], 1, "--no-such-flag"),
    ("vllm", ["--max-model-len", "4096", "--bogus=1"], 2, "--bogus"),
    ("vllm", ["-tp2"], 0, "-tp2"),
    ("sglang", ["--enable-metrics", "--bogus"], 1, "--bogus"),
    ("sglang", ["--pp", "2"], 0, "--pp"),  # ambiguous: argparse refuses it
    ("tgi", ["--max-batch-size", "4", "--bogus"], 2, "--bogus"),
    ("llamacpp", ["--bogus"], 0, "--bogus"),
    ("llamacpp", ["-c", "4096", "--reasoning-effort", "high"], 2, "--reasoning-effort"),
    ("llamacpp", ["--no-warmup=1"], 0, "--no-warmup=1"),  # a flag: no `=` form
    *(("llamacpp", [s, "1"], 0, s) for s in LLAMACPP_LATER_ONLY),
]


@pytest.mark.parametrize(
    ("runtime", "argv", "index", "word"),
    REFUSED,
    ids=[f"{r[0]}:{' '.join(r[1])}" for r in REFUSED],
)
def test_an_unknown_option_is_refused_naming_its_index(
    runtime: str, argv: list[str], index: int, word: str
) -> None:
    said = f"spec.extraArgs[{index}]: {word} is not an option of {VERSIONS[runtime]}"
    found = errors(runtime, *argv)
    assert any(e.startswith(said) for e in found), found
    # The reconciler reports it as well (the webhook may be off).
    model = parse_model(
        {"source": "hf://o/m", "format": "gguf" if runtime == "llamacpp" else "safetensors"}
    )
    bare = parse_inference_service({"modelRef": "m", "runtime": runtime})
    service = dataclasses.replace(bare, extra_args=tuple(argv))
    problems = runtime_problems(service, model, "/models/m")
    assert any(p.reason == INVALID_RUNTIME_CONFIG and said in p.message for p in problems)


def test_llamacpp_equals_form_is_passed_as_two_words_only_for_an_option_with_a_value() -> None:
    assert normalize_user_args("llamacpp", ("--ctx-size=4096",)) == ("--ctx-size", "4096")
    assert normalize_user_args("llamacpp", ("--keep=5",)) == ("--keep", "5")  # not ours
    assert normalize_user_args("llamacpp", ("--no-warmup=1",)) == ("--no-warmup=1",)


def test_the_committed_spellings_are_the_contract_files() -> None:
    """vLLM, SGLang, TGI: what the script writes from tests/data/runtime-options."""
    built = script().build("")
    committed = json.loads(DATA.read_text())
    for runtime in ("vllm", "sglang", "tgi"):
        assert committed[runtime] == built[runtime], runtime
    assert PARSERS["llamacpp"].version == "b10068"


def test_the_committed_llamacpp_spellings_are_the_pinned_binarys_help() -> None:
    path = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not Path(path).exists():
        print(f"SKIP reason: no llama-server at {path} ({BUILD_SCRIPT.name} builds it)")
        pytest.skip(f"no llama-server at {path}: run {BUILD_SCRIPT.name} to build it")
    module = script()
    assert (
        json.loads(DATA.read_text())["llamacpp"]
        == module.build(module.llama_help(path))["llamacpp"]
    ), "run scripts/runtime-spellings.py"


def test_the_help_reader_reads_spellings_values_and_negatives() -> None:
    text = (
        "----- common params -----\n\n"
        "-c,    --ctx-size N                     size of the prompt context\n"
        "-kvo,  --kv-offload, -nkvo, --no-kv-offload\n"
        "                                        whether to enable KV cache offloading\n"
        "-fa,   --flash-attn [on|off|auto]       set Flash Attention use\n"
        "--control-vector-layer-range START END\n"
        "--perf, --no-perf                       whether to enable timings\n"
    )
    assert script().llama_help_options(text) == {
        "-c": "1",
        "--ctx-size": "1",
        "-kvo": "0",
        "--kv-offload": "0",
        "-nkvo": "0",
        "--no-kv-offload": "0",
        "-fa": "1",
        "--flash-attn": "1",
        "--control-vector-layer-range": "2",
        "--perf": "0",
        "--no-perf": "0",
    }
