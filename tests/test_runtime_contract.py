"""Every argv we build, checked against the runtime's own parser at the pinned version.

The spec space: runtimes x GPU count x claims (none / template / shared claim) x every
typed config field (each value, all choices) x mode x extraArgs overrides (every
spelling of every option we derive, as `--x v` and `--x=v`) x multiNode ranks, plus
accelerators and model sources. A spec the controller refuses with a condition
(runtime_checks) never becomes a pod and is counted apart; every other one must
parse with 0 unknown options, 0 bad values, 0 repeated single-valued options, the
model argument present in the runtime's form, and the container port equal to the
port the runtime listens on.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from reconcilers.images import VERSIONS
from reconcilers.runtime_checks import runtime_problems
from reconcilers.runtime_flags import CHOICES, FLAGS
from reconcilers.workload import build_member_pods, model_location, pod_spec

from .runtime_options import Checker, checkers, versions

Obj = dict[str, Any]
RUNTIMES = ("vllm", "sglang", "tgi", "llamacpp")
COUNTS = (None, 1, 2, 4, 8)
CLAIMS: dict[str, list[Obj] | None] = {
    "device-plugin": None,
    "template": [{"name": "gpus", "resourceClaimTemplateName": "gpus"}],
    "claim": [{"name": "gpus", "resourceClaimName": "shared"}],
}
MODES = ("chat", "embedding", "rerank")
ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}

# Typed config fields: field path -> the values to try (choices: all of them).
CONFIG: dict[str, dict[str, list[Any]]] = {
    "vllm": {
        "vllmConfig.tensorParallelSize": [1, 2],
        "vllmConfig.pipelineParallelSize": [1, 2],
        "vllmConfig.maxModelLen": [4096],
        "vllmConfig.quantization": ["awq", "fp8"],
        "vllmConfig.dtype": list(CHOICES["vllm"]["--dtype"]),
        "vllmConfig.kvCacheDtype": ["auto", "fp8", "fp8_e4m3"],  # no parser choices (0.34)
        "vllmConfig.enablePrefixCaching": [True, False],
        "vllmConfig.enableChunkedPrefill": [True, False],
        "vllmConfig.maxNumBatchedTokens": [8192],
        "vllmConfig.attentionBackend": ["FLASHINFER", "FLASH_ATTN"],
        "vllmConfig.enableExpertParallel": [True, False],
        "vllmConfig.cpuOffloadGB": [0, 4.5],
        "vllmConfig.gpuMemoryUtilization": [0.9],
        "parallelSlots": [16],
    },
    "sglang": {
        "sglangConfig.tensorParallelSize": [1, 2],
        "sglangConfig.dataParallelSize": [1, 2],
        "sglangConfig.expertParallelSize": [1, 2],
        "sglangConfig.contextLength": [8192],
        "sglangConfig.memFractionStatic": [0.8],
        "sglangConfig.quantization": list(CHOICES["sglang"]["--quantization"]),
    },
    "tgi": {
        "tgiConfig.quantize": list(CHOICES["tgi"]["--quantize"]),
        "tgiConfig.maxInputLength": [4000],
        "tgiConfig.maxTotalTokens": [4096],
        "tgiConfig.dtype": list(CHOICES["tgi"]["--dtype"]),
    },
    "llamacpp": {
        "contextSize": [4096],
        "parallelSlots": [4],
        "flashAttention": [True, False],
        "jinja": [True, False],
        "cacheTypeK": ["q8_0"],
        "cacheTypeV": ["q4_0"],
        "moeCPUOffload": [True, False],
        "moeCPULayers": [4],
        "noKvOffload": [True, False],
        "noWarmup": [True, False],
        "batchSize": [2048],
        "uBatchSize": [512],
        "reasoningBudget": [-1, 0, 1024],
        "metadataOverrides": [["tokenizer.ggml.add_bos_token=bool:false", "a=int:1"]],
        "tensorOverrides": [["exps=CPU"]],
    },
}
# Pod fields that become every runtime's flags (reconcilers/pod_flags.py).
for _config in CONFIG.values():
    _config["containerPort"] = [9000]
    _config["bindAddress"] = ["::", "0.0.0.0", "10.1.2.3", "fd00::1"]
CONFIG["llamacpp"] |= {
    "ropeScaling": [
        {"type": "yarn", "factor": 4.0, "originalContext": 32768},
        {"type": "linear", "factor": 1.5},
        {"type": "none"},
    ],
    "speculativeDecoding": [
        {"type": "mtp", "nDraftMax": 3, "pMin": 0.75},
        {"type": "ngram-simple"},
        {"type": "ngram-map-k", "nDraftMax": 16},
        {"type": "disabled"},
    ],
}
# Model-side fields llama.cpp reads.
MODEL_GPU_FIELDS: list[Obj] = [
    {"layers": 20},
    {"layers": -1},
    *({"sharding": {"strategy": s}} for s in ("layer", "tensor", "row", "pipeline", "none")),
    {"sharding": {"layerSplit": ["0-19", "20-39"]}},
]

# A valid value for each option we derive, when a user sets it in extraArgs.
OVERRIDE_VALUES: dict[str, dict[str, str | None]] = {
    "vllm": {
        "--model": "Qwen/Qwen3-8B-FP8",
        "--served-model-name": "alias",
        "--host": "::",
        "--port": "9000",
        "--tensor-parallel-size": "1",
        "--pipeline-parallel-size": "1",
        "--data-parallel-size": "1",
        "--data-parallel-size-local": "1",
        "--data-parallel-start-rank": "0",
        "--data-parallel-address": "10.0.0.1",
        "--data-parallel-rpc-port": "13345",
        "--headless": None,
        "--gpu-memory-utilization": "0.8",
        "--cpu-offload-gb": "2",
        "--max-model-len": "8192",
        "--quantization": "awq",
        "--dtype": "half",
        "--kv-cache-dtype": "fp8",
        "--enable-prefix-caching": None,
        "--enable-chunked-prefill": None,
        "--max-num-batched-tokens": "4096",
        "--enable-expert-parallel": None,
        "--max-num-seqs": "32",
        "--attention-backend": "TRITON_ATTN",
        "--runner": "generate",
    },
    "sglang": {
        "--model-path": "Qwen/Qwen3-8B-FP8",
        "--served-model-name": "alias",
        "--host": "::",
        "--port": "30000",
        "--tp-size": "1",
        "--dp-size": "1",
        "--ep-size": "1",
        "--pp-size": "1",
        "--mem-fraction-static": "0.7",
        "--context-length": "4096",
        "--quantization": "fp8",
        "--is-embedding": None,
    },
    "tgi": {
        "--model-id": "Qwen/Qwen3-8B-FP8",
        "--hostname": "::",
        "--port": "80",
        "--num-shard": "1",
        "--quantize": "fp8",
        "--dtype": "bfloat16",
        "--max-input-length": "2000",
        "--max-total-tokens": "2048",
    },
    "llamacpp": {
        "--model": "/models/other.gguf",
        "-hf": "unsloth/Qwen3-8B-GGUF",
        "--alias": "alias",
        "--host": "::",
        "--port": "9090",
        "--n-gpu-layers": "10",
        "--split-mode": "layer",
        "--tensor-split": "1",
        "--ctx-size": "2048",
        "--embedding": None,
        "--reranking": None,
        "--pooling": "mean",
        "--parallel": "2",
        "--flash-attn": "auto",
        "--jinja": None,
        "--cache-type-k": "f16",
        "--cache-type-v": "f16",
        "--cpu-moe": None,
        "--n-cpu-moe": "2",
        "--kv-offload": None,
        "--warmup": None,
        "--batch-size": "1024",
        "--ubatch-size": "256",
        "--reasoning-budget": "0",
        "--override-kv": "a=int:2",
        "--override-tensor": "exps=CPU",
        "--rope-scaling": "yarn",
        "--rope-scale": "2",
        "--yarn-orig-ctx": "8192",
        "--spec-type": "ngram-simple",
        "--spec-draft-n-max": "8",
        "--spec-draft-p-min": "0.5",
    },
}
# Options of the runtime we never derive: they pass through untouched.
FOREIGN_ARGS = {
    "vllm": ["--trust-remote-code", "--enforce-eager"],
    "sglang": ["--trust-remote-code", "--enable-metrics"],
    "tgi": ["--trust-remote-code", "--max-concurrent-requests", "64"],
    "llamacpp": ["--metrics", "--threads", "8"],
}
MODEL_FLAGS = {
    "vllm": ("--model",),
    "sglang": ("--model-path",),
    "tgi": ("--model-id",),
    "llamacpp": ("--model", "--hf-repo"),
}


def _set(spec: Obj, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        spec = spec.setdefault(p, {})
    spec[leaf] = value


def _models(runtime: str, count: int | None, claims: str) -> Iterator[Obj]:
    gpu: Obj = {"enabled": True}
    if count is not None:
        gpu["count"] = count
    if CLAIMS[claims]:
        gpu["resourceClaims"] = CLAIMS[claims]
    if runtime == "llamacpp":
        sources = [
            "https://huggingface.co/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf",
            "unsloth/Qwen3-8B-GGUF",
        ]
        fmt = "gguf"
    else:
        sources, fmt = ["Qwen/Qwen3-8B"], "safetensors"
    for source in sources:
        yield {"source": source, "format": fmt, "hardware": {"accelerator": "cuda", "gpu": gpu}}
    if claims == "device-plugin" and count is None:
        yield {"source": sources[0], "format": fmt, "hardware": {"accelerator": "cpu"}}
        for vendor in ("amd", "intel"):
            yield {
                "source": sources[0],
                "format": fmt,
                "hardware": {"accelerator": "cuda", "gpu": {**gpu, "vendor": vendor}},
            }


def _overrides(runtime: str) -> Iterator[list[str]]:
    for name, value in OVERRIDE_VALUES[runtime].items():
        for spelling in FLAGS[runtime][name].spellings:
            if value is None:
                yield [spelling]
                for negative in FLAGS[runtime][name].negatives:
                    yield [negative]
            else:
                yield [spelling, value]
                yield [f"{spelling}={value}"]
    yield FOREIGN_ARGS[runtime]


def specs() -> Iterator[tuple[str, Obj, Obj]]:
    """(runtime, model spec, service spec) over the whole space."""
    for runtime, count, claims, mode in itertools.product(RUNTIMES, COUNTS, CLAIMS, MODES):
        base: Obj = {"modelRef": "m", "runtime": runtime, "mode": mode}
        for model in _models(runtime, count, claims):
            yield runtime, model, base
            for path, values in CONFIG[runtime].items():
                for value in values:
                    spec = {**base}
                    _set(spec, path, value)
                    yield runtime, model, spec
            for extra in _overrides(runtime):
                yield runtime, model, {**base, "extraArgs": extra}
            if runtime == "llamacpp":
                for fields in MODEL_GPU_FIELDS:
                    m = {**model, "hardware": {**model["hardware"]}}
                    m["hardware"]["gpu"] = {**m["hardware"].get("gpu", {}), **fields}
                    yield runtime, m, base
    # multiNode (vLLM, device-plugin GPUs: claims cannot be pinned with nodeName)
    for count, members, mode in itertools.product(COUNTS, (2, 3), MODES):
        gpu = {"enabled": True, **({"count": count} if count else {})}
        model = {
            "source": "Qwen/Qwen3-8B",
            "format": "safetensors",
            "hardware": {"accelerator": "cuda", "gpu": gpu},
        }
        mn = {
            "members": [
                {"node": f"n{i}", **({"fabric": {"address": "10.0.0.1"}} if i == 0 else {})}
                for i in range(members)
            ]
        }
        base = {"modelRef": "m", "runtime": "vllm", "mode": mode, "multiNode": mn}
        yield "vllm", model, base
        for extra in _overrides("vllm"):
            yield "vllm", model, {**base, "extraArgs": extra}


def _pods(service: Any, model: Any) -> list[Obj]:
    if service.multi_node is not None:
        return [p["spec"] for p in build_member_pods(ISVC, service, model, "m", 1)]
    return [pod_spec(ISVC, service, model, "m")]


def _check_pod(runtime: str, checker: Checker, pod: Obj) -> list[str]:
    container = pod["containers"][0]
    argv = container["args"]
    parsed = checker.parse(argv)
    errors = list(parsed.errors)
    given = [k for k in MODEL_FLAGS[runtime] if parsed.values.get(k)] + (
        ["positional"] if parsed.positionals else []
    )
    if len(given) != 1:
        errors.append(f"model argument given {len(given)} times: {argv}")
    elif runtime == "llamacpp":
        if "--model" in given and not str(parsed.values["--model"][0]).endswith(".gguf"):
            errors.append(f"llama.cpp --model is not a .gguf file: {argv}")
        hf = parsed.values.get("--hf-repo")
        if hf and (str(hf[0]).startswith("/") or "/" not in str(hf[0])):
            errors.append(f"llama.cpp -hf is not a hub repository: {argv}")
    elif runtime == "tgi" and str(parsed.values["--model-id"][0]).endswith(".gguf"):
        errors.append(f"TGI given a GGUF file: {argv}")
    ports = parsed.values.get("--port") or [None]
    if str(container["ports"][0]["containerPort"]) != ports[-1]:
        errors.append(f"containerPort {container['ports'][0]['containerPort']} != --port {ports}")
    return errors


def test_every_argv_parses_at_the_pinned_versions(capsys: pytest.CaptureFixture[str]) -> None:
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    check = checkers(groups)
    checked: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    pods = 0
    failures: list[str] = []
    for runtime, model_spec, service_spec in specs():
        try:
            model = parse_model(model_spec)
            service = parse_inference_service(service_spec)
        except InvalidSpec as e:  # the generator builds only valid objects
            failures.append(f"{service_spec}: {e.errors}")
            continue
        if runtime_problems(service, model, model_location(model)[0]):
            refused[runtime] += 1
            continue
        checked[runtime] += 1
        for pod in _pods(service, model):
            pods += 1
            for error in _check_pod(runtime, check[runtime], pod):
                failures.append(f"{runtime} {service_spec} {model_spec}: {error}")
    with capsys.disabled():
        print(
            f"\nruntime contract: {sum(checked.values())} specs checked "
            f"({', '.join(f'{k} {v}' for k, v in sorted(checked.items()))}), "
            f"{pods} pods' argv, {sum(refused.values())} refused with a condition "
            f"({', '.join(f'{k} {v}' for k, v in sorted(refused.items()))}), "
            f"{len(failures)} failures"
        )
    assert not failures, "\n".join(failures[:20])
    assert sum(checked.values()) >= 3000
    assert all(checked[rt] > 0 for rt in RUNTIMES)


def test_every_spelling_we_own_is_known_to_the_parser() -> None:
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    check = checkers(groups)
    unknown = []
    for runtime, flags in FLAGS.items():
        for flag in flags.values():
            for spelling in (*flag.spellings, *flag.negatives):
                if spelling not in check[runtime].options:
                    # SGLang's --tp/--dp are argparse abbreviations: read, never emitted.
                    if not (runtime == "sglang" and spelling in ("--tp", "--dp")):
                        unknown.append(f"{runtime} {spelling}")
                elif not flag.takes_value and check[runtime].options[spelling].nargs != "0":
                    unknown.append(f"{runtime} {spelling} takes a value in the parser")
    assert unknown == []


def test_choices_match_the_options_files() -> None:
    check = checkers({rt: {} for rt in FLAGS})
    for runtime, table in CHOICES.items():
        for option, allowed in table.items():
            assert check[runtime].options[option].choices == allowed, (runtime, option)


def test_pinned_images_are_the_versions_the_options_files_describe() -> None:
    files = versions()
    for runtime in ("vllm", "sglang", "tgi"):
        assert files[runtime].split()[0] == VERSIONS[runtime], runtime


@pytest.mark.parametrize(
    ("runtime", "argv", "error"),
    [
        ("vllm", ["--model", "m", "--hostname", "::"], "unknown option '--hostname'"),
        ("vllm", ["--model", "m", "-tp", "2", "--tensor-parallel-size", "2"], "given 2 times"),
        ("vllm", ["--model", "m", "--dtype", "fp64"], "bad value 'fp64'"),
        ("vllm", ["--model", "m", "--port"], "--port: missing value"),
        ("sglang", ["--model-path", "m", "--tp", "2"], "unknown option '--tp'"),
        ("tgi", ["--model-id", "m", "--port", "80", "-p", "81"], "--port given 2 times"),
        ("tgi", ["--model-id", "m", "--model-id", "n"], "--model-id given 2 times"),
        ("tgi", ["--model-id", "m", "--host", "::"], "unknown option '--host'"),
        ("tgi", ["--model-id", "m", "--api-key", "a b"], "word-split"),
        ("tgi", ["--model-id", "m", "--num-shard", "-1"], "bad value '-1'"),
        ("llamacpp", ["--model", "/m.gguf", "--ctx-size=4096"], "unknown option"),
        ("llamacpp", ["--model", "/m.gguf", "-ts", ",".join(["1"] * 16)], "more than 15 parts"),
        ("llamacpp", ["--model", "/m.gguf", "--hostname", "::"], "unknown option"),
        ("llamacpp", ["--model", "/m.gguf", "-c", "x"], "bad value 'x'"),
    ],
)
def test_the_checker_catches_what_a_parser_rejects(
    runtime: str, argv: list[str], error: str
) -> None:
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    errors = checkers(groups)[runtime].parse(argv).errors
    assert any(error in e for e in errors), errors
