"""Every argv we build, checked against the runtime's own parser at the pinned version.

The spec space: runtimes x GPU count x claims (none / template / shared claim) x every
typed config field (each value, all choices) x mode x extraArgs overrides (every
spelling of every option we derive, as `--x v` and `--x=v`) x multiNode ranks, plus
accelerators and model sources. A spec the controller refuses with a condition
(runtimes/problems.py) never becomes a pod and is counted apart; every other one must
parse with 0 unknown options, 0 bad values, 0 repeated single-valued options, the
model argument present in the runtime's form, and the container port equal to the
port the runtime listens on; then pass what the release checks after parsing
(runtime_options.startup_errors: vLLM's quantization / KV-cache dtype / attention
backend tables per platform and its multiNode data-parallel ranks, TGI's token limits)
and bind an address the probes reach. A spec refused as InvalidRuntimeConfig must be
one whose argv really fails one of those checks (the refusal is needed).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from api import InvalidSpec, parse_inference_service, parse_model, rule_errors
from api.source import host_path_error
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import (
    build_member_pods,
    pod_spec,
)
from reconcilers.sources.placement import model_placement, runtime_mounts
from runtimes import accepted_values as rv
from runtimes.arg_errors import LOOPBACK, extra_options, vllm_positionals
from runtimes.command import MODEL_OPTIONS
from runtimes.gpu import runtime_device_count
from runtimes.images import VERSIONS
from runtimes.problems import INVALID_RUNTIME_CONFIG, Problem, runtime_problems
from runtimes.spellings import CHOICES, FLAGS, normalize_user_args, user_args
from tests.support.runtime_options import (
    Checker,
    Parsed,
    checkers,
    startup_errors,
    validators,
    versions,
)
from tests.support.webhook import admission_request
from webhook.admission import verdict

RUNTIMES = ("vllm", "sglang", "tgi", "llamacpp")
COUNTS = (None, 1, 2, 4, 8)
CLAIMS: dict[str, list[Obj] | None] = {
    "device-plugin": None,
    "template": [{"name": "gpus", "resourceClaimTemplateName": "gpus"}],
    "claim": [{"name": "gpus", "resourceClaimName": "shared"}],
}
MODES = ("chat", "embedding", "rerank")
ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}
# The operator's --allowed-host-path-roots in this test: /srv/private stays refused.
ROOTS = ("/mnt/models", "/models")
# Every source scheme (issue 20 item 1), per model form; the refused ones count apart.
GGUF_SOURCES = (
    "hf://unsloth/Qwen3-8B-GGUF",
    "hf://unsloth/Qwen3-8B-GGUF:Q4_K_M",
    "hf://unsloth/Qwen3-8B-GGUF@main",  # refused: llama.cpp's -hf takes no revision
    "hf://unsloth/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf",
    "hf://unsloth/Qwen3-8B-GGUF/q/Qwen3-8B-Q4_K_M.gguf@refs/pr/1",
    "pvc://model-store/qwen/Qwen3-8B-Q4_K_M.gguf",
    "/mnt/models/Qwen3-8B-Q4_K_M.gguf",
    "file:///mnt/models/Qwen3-8B-Q4_K_M.gguf",
    "/models/Qwen3-8B-Q4_K_M.gguf",  # under our /models: not hidden by the emptyDir
    "/srv/private/Qwen3-8B-Q4_K_M.gguf",  # refused: outside every allowed root
    "s3://models/qwen/Qwen3-8B-Q4_K_M.gguf",
)
DIRECTORY_SOURCES = (
    "hf://Qwen/Qwen3-8B",
    "hf://Qwen/Qwen3-8B@main",
    "hf://Qwen/Qwen3-8B@0123abcd",
    "hf://Qwen/Qwen3-8B:Q4_K_M",  # refused: the :quant tag is llama.cpp's
    "pvc://model-store/Qwen/Qwen3-8B",
    "/mnt/models/Qwen3-8B",
    "file:///mnt/models/Qwen3-8B",
    "/models/Qwen3-8B",
    "/srv/private/Qwen3-8B",  # refused
    "s3://models/qwen/Qwen3-8B",  # refused: one object is no model directory
)

# Typed config fields: field path -> the values to try (choices: all of them).
CONFIG: dict[str, dict[str, list[Any]]] = {
    "vllm": {
        "vllmConfig.tensorParallelSize": [1, 2],
        "vllmConfig.pipelineParallelSize": [1, 2],
        "vllmConfig.maxModelLen": [4096],
        # No parser choices: vLLM checks these at startup (the file's "validators"); the
        # last values of each are ones 0.34 exits on (refused).
        "vllmConfig.quantization": [*rv.VLLM_QUANTIZATION, "bitsandbytes", "int4", "AWQ"],
        "vllmConfig.dtype": list(CHOICES["vllm"]["--dtype"]),
        "vllmConfig.kvCacheDtype": [*rv.VLLM_KV_CACHE_DTYPES, "int8", "FP8"],
        "vllmConfig.enablePrefixCaching": [True, False],
        "vllmConfig.enableChunkedPrefill": [True, False],
        "vllmConfig.maxNumBatchedTokens": [8192],
        "vllmConfig.attentionBackend": [
            "auto",
            "FLASHINFER",
            "flash_attn",
            "TRITON_ATTN",
            "XFORMERS",
        ],
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
        "tgiConfig.maxInputLength": [4000, 4096],  # 4096 alone: TGI's default total is 4096
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
# Pod fields that become every runtime's flags (runtimes/pod_flags.py).
for _config in CONFIG.values():
    _config["containerPort"] = [9000]
    _config["bindAddress"] = ["::", "0.0.0.0", "10.1.2.3", "fd00::1"]
CONFIG["llamacpp"] |= {
    "ropeScaling": [
        {"type": "yarn", "factor": "4.0", "originalContext": 32768},
        {"type": "linear", "factor": "1.5"},
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
        "--max-input-tokens": "2000",
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
# extraArgs read as the parser reads them (issue 27 items 7, 13-16): abbreviations,
# attached short values, a value missing at the end, options that exit 0 at start,
# vLLM without an API server. Each is served with the option it resolves to, or refused.
PARSER_READINGS: dict[str, list[list[str]]] = {
    "vllm": [
        ["--tensor-parallel", "1"],
        ["--tensor-parallel", "2"],
        ["--tensor-parallel=2"],
        ["--max-model", "4096"],
        ["-qawq"],
        ["-q=awq"],
        ["--quant", "awq"],  # ambiguous: --quantization, --quantization-config
        ["--tensor-parallel-size"],
        ["--enforce-eager", "--max-model-len"],
        ["--help"],
        ["-h"],
        ["--headless"],
        ["--api-server-count", "0"],
        ["-asc", "0"],
        ["--api-server-count", "1"],
    ],
    "sglang": [
        ["--tp", "1"],
        ["--tp", "2"],
        ["--tp-s", "2"],
        ["--tensor-parallel", "2"],
        ["--context-len", "4096"],
        ["--tp-size"],
        ["--help"],
    ],
    "tgi": [
        ["-p9000"],
        ["-p=9000"],
        ["--num-shard"],
        ["--max-total-tokens", "4096", "--port"],
    ],
    "llamacpp": [
        ["--mmproj", "/models/mmproj.gguf"],  # no volume holds it (item 17)
        ["-md", "/srv/draft.gguf"],
        ["-fa"],
        ["--ctx-size"],
        *([s] for s in ("-h", "--help", "--usage", "--version", "-cl", "--cache-list")),
        ["--completion-bash"],
        ["--list-devices"],
    ],
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


# Model sources per runtime, with their format. The hook for source schemes (pvc://,
# hf://, s3://, file paths ...): add a source here and every argv built from it is
# checked like the rest (its model argument in the runtime's form included).
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "llamacpp": (
        "gguf",
        (
            "https://huggingface.co/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf",
            "unsloth/Qwen3-8B-GGUF",
        ),
    ),
    "vllm": ("safetensors", ("Qwen/Qwen3-8B",)),
    "sglang": ("safetensors", ("Qwen/Qwen3-8B",)),
    "tgi": ("safetensors", ("Qwen/Qwen3-8B",)),
}


def _models(runtime: str, count: int | None, claims: str) -> Iterator[Obj]:
    gpu: Obj = {"enabled": True}
    if count is not None:
        gpu["count"] = count
    if CLAIMS[claims]:
        gpu["resourceClaims"] = CLAIMS[claims]
    fmt, sources = SOURCES[runtime]
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


def _source_models(runtime: str, count: int | None, claims: str) -> Iterator[Obj]:
    gpu: Obj = {"enabled": True, **({"count": count} if count is not None else {})}
    if CLAIMS[claims]:
        gpu["resourceClaims"] = CLAIMS[claims]
    gguf = runtime == "llamacpp"
    for source in GGUF_SOURCES if gguf else DIRECTORY_SOURCES:
        model: Obj = {
            "source": source,
            "format": "gguf" if gguf else "safetensors",
            "hardware": {"accelerator": "cuda", "gpu": gpu},
        }
        if source.startswith("s3://"):
            model["sourceSecretRef"] = {"name": "s3-credentials"}
        yield model


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
            # The underscore form: vLLM and llama.cpp read it as the dashed one (it then
            # replaces ours); SGLang and TGI do not (refused).
            if spelling.startswith("--") and "-" in spelling[2:]:
                yield [spelling[:2] + spelling[2:].replace("-", "_"), *([value] if value else [])]
    yield FOREIGN_ARGS[runtime]
    yield from PARSER_READINGS[runtime]


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
                    strategy = fields.get("sharding", {}).get("strategy")
                    if strategy == "tensor":  # b10068's tensor split needs flash attention
                        yield runtime, m, {**base, "flashAttention": False}
                    if strategy == "row":  # row split: SYCL (the intel image) only
                        gpu = {**m["hardware"]["gpu"], "vendor": "intel"}
                        yield runtime, {**m, "hardware": {**m["hardware"], "gpu": gpu}}, base
                for split in (
                    ["-sm", "row"],
                    ["--split-mode", "tensor", "-fa", "off"],
                    ["--split-mode", "tensor"],  # refused where a pod sees one GPU
                ):
                    yield runtime, model, {**base, "extraArgs": split}
        for model in _source_models(runtime, count, claims):
            yield runtime, model, base
            if runtime != "llamacpp":  # a user's --revision owns the option
                yield runtime, model, {**base, "extraArgs": ["--revision", "v2"]}
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
        for dp in (members - 1, members, members + 1):  # only `members` starts
            yield "vllm", model, {**base, "extraArgs": ["--data-parallel-size", str(dp)]}


def _pods(service: Any, model: Any) -> list[Obj]:
    if service.multi_node is not None:
        pods = build_member_pods(scope_for(ISVC, service, model, roots=ROOTS), 1)
        return [p["spec"] for p in pods]
    return [pod_spec(scope_for(ISVC, service, model, roots=ROOTS))]


def _platform(image: str) -> str:
    """vLLM's platform for the image the pod runs."""
    if "rocm" in image:
        return "rocm"
    if "xpu" in image or "intel" in image:
        return "xpu"  # llama.cpp's intel image is its SYCL build
    if "vulkan" in image:
        return "vulkan"
    if "cpu" in image or re.search(r":server-b\d+$", image):
        return "cpu"
    return "cuda"


def _startup_and_reach(
    runtime: str, parsed: Any, pod: Obj, members: int | None, gpus: int | None
) -> list[str]:
    """What the release refuses after parsing, and a bind address no probe reaches."""
    container = pod["containers"][0]
    serves_http = "readinessProbe" in container
    platform = _platform(container["image"])
    errors = startup_errors(runtime, parsed, platform, members, serves_http, gpus)
    for host in parsed.values.get("--hostname" if runtime == "tgi" else "--host") or []:
        if host and LOOPBACK.match(host):
            errors.append(f"binds {host}: probes and the Service cannot reach it")
    return errors


def _refused(service: Any, model: Any) -> list[Problem] | None:
    """What the controller refuses with a condition (and the webhook at admission): the
    runtime's problems ([] when refused for another rule), or None when it is served."""
    if rule_errors(service, model) or host_path_error(model.location, ROOTS):
        return []
    placement = model_placement(model, service.runtime, ROOTS)
    mounts = runtime_mounts(placement, service)
    return runtime_problems(service, model, placement.arg, mounts=mounts) or None


# huggingface_hub.utils.validate_repo_id, which vLLM, SGLang (through transformers) and
# TGI's hub client apply to a model that is not a local path: HFValidationError.
HF_REPO_ID = re.compile(r"^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$", re.ASCII)


def hf_repo_id_errors(repo: str) -> list[str]:
    if (
        repo.count("/") > 1
        or not HF_REPO_ID.match(repo)
        or "--" in repo
        or ".." in repo
        or repo.endswith(".git")
    ):
        return [f"HFValidationError: {repo!r} is not a repo id"]
    return []


def llamacpp_hf_errors(value: str) -> list[str]:
    """llama.cpp's common_download_split_repo_tag: <user>/<model>[:quant], split on ':'."""
    if len(value.split(":")[0].split("/")) != 2:
        return [f"invalid HF repo format, expected <user>/<model>[:quant]: {value!r}"]
    return []


def _model_value(runtime: str, parsed: Parsed) -> tuple[str, str]:
    """(the option or 'positional', its value) of the one model argument."""
    for key in MODEL_FLAGS[runtime]:
        if parsed.values.get(key):
            return key, str(parsed.values[key][0])
    return "positional", parsed.positionals[0]


def _mounted(pod: Obj, container: Obj, path: str) -> str | None:
    """The volume behind `path` in the container (the deepest mount holding it)."""
    best: Obj | None = None
    for m in container.get("volumeMounts") or []:
        mp = m["mountPath"]
        if (path == mp or path.startswith(mp.rstrip("/") + "/")) and (
            best is None or len(mp) > len(best["mountPath"])
        ):
            best = m
    return best["name"] if best else None


def _file_errors(pod: Obj, container: Obj, path: str) -> list[str]:
    """A file the runtime opens at start must be on a volume of the pod; on an emptyDir
    only the loader's files are there (each named in its env)."""
    volume = _mounted(pod, container, path)
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    if volume is None or volume not in volumes:
        return [f"{path!r} is on no volume of the pod"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume)
    relative = path[len(mount["mountPath"]) :].lstrip("/")
    loader_env = [
        str(e.get("value") or "")
        for c in pod.get("initContainers") or []
        for e in c.get("env") or []
    ]
    if "emptyDir" in volumes[volume] and not any(relative in v for v in loader_env):
        return [f"{path!r} is on an empty volume no loader fills"]
    return []


def model_argument_errors(runtime: str, pod: Obj, parsed: Parsed) -> list[str]:
    """The runtime's validators past its parser, on the model argument: a path must exist
    in the container (a volume, filled before start), anything else must be a repo id the
    runtime's hub client accepts (issue 20 item 1: `-hf file:///…` is llama.cpp's "invalid
    HF repo format", vLLM's `--model pvc://…` an HFValidationError, SGLang's `s3://…` an
    "Invalid connector type")."""
    container = pod["containers"][0]
    key, value = _model_value(runtime, parsed)
    errors = []
    if "://" in value:  # SGLang: "Invalid connector type"; the others: not a repo id
        errors.append(f"model argument {value!r} is a URL the runtime cannot load")
    if value.startswith("/"):
        volume = _mounted(pod, container, value)
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        if volume is None or volume not in volumes:
            errors.append(f"model path {value!r} is on no volume of the pod")
        elif "emptyDir" in volumes[volume] and not any(
            {"name": "LOADER_PATH", "value": value} in (c.get("env") or [])
            for c in pod.get("initContainers") or []
        ):
            errors.append(f"model path {value!r} is on an empty volume no loader fills")
    elif runtime == "llamacpp":
        if key != "--hf-repo":
            errors.append(f"llama.cpp {key} {value!r} is neither a path nor -hf")
        errors += llamacpp_hf_errors(value)
    else:
        errors += hf_repo_id_errors(value)
    mounts = sorted(m["mountPath"] for m in container.get("volumeMounts") or [])
    for a, b in itertools.pairwise(mounts):
        if b == a or b.startswith(a.rstrip("/") + "/"):
            errors.append(f"mount {a} holds mount {b}: one hides the other")
    for v in pod.get("volumes") or []:
        host = v.get("hostPath")
        if host and not (host.get("type") in ("File", "Directory") and host["path"] == value):
            errors.append(f"hostPath volume {host} is not the model's path {value!r}")
        mount = [m for m in container.get("volumeMounts") or [] if m["name"] == v["name"]]
        if (host or "persistentVolumeClaim" in v) and not all(m.get("readOnly") for m in mount):
            errors.append(f"model source volume {v['name']} is mounted writable")
    return errors


def _devices(pod: Obj, model: Any, service: Any) -> int | None:
    """The GPUs the pod's runtime sees: its device-plugin limit; with claims, LLMKube's
    count (the guide sizes the runtime by it), unknown without one."""
    limits = (pod["containers"][0].get("resources") or {}).get("limits") or {}
    plugin = [int(v) for k, v in limits.items() if "/" in k and not k.startswith("hugepages")]
    if plugin:
        return sum(plugin)
    if pod.get("resourceClaims"):
        return runtime_device_count(model, service) or None
    return 0


def _check_pod(
    runtime: str,
    checker: Checker,
    pod: Obj,
    members: int | None = None,
    ours: bool = True,
    gpus: int | None = None,
) -> list[str]:
    """ours: the model argument is the controller's, not a user's extraArgs override;
    gpus: the GPUs its runtime sees (_devices)."""
    container = pod["containers"][0]
    argv = container["args"]
    parsed = checker.parse(argv)
    errors = list(parsed.errors) + _startup_and_reach(runtime, parsed, pod, members, gpus)
    given = [k for k in MODEL_FLAGS[runtime] if parsed.values.get(k)] + (
        ["positional"] if parsed.positionals else []
    )
    if len(given) != 1:
        errors.append(f"model argument given {len(given)} times: {argv}")
    elif runtime == "vllm" and parsed.positionals and argv[0] != parsed.positionals[0]:
        errors.append(f"vLLM's model is not its first argument: {argv}")
    elif runtime == "llamacpp":
        if "--model" in given and not str(parsed.values["--model"][0]).endswith(".gguf"):
            errors.append(f"llama.cpp --model is not a .gguf file: {argv}")
        hf = parsed.values.get("--hf-repo")
        if hf and (str(hf[0]).startswith("/") or "/" not in str(hf[0])):
            errors.append(f"llama.cpp -hf is not a hub repository: {argv}")
    elif runtime == "tgi" and str(parsed.values["--model-id"][0]).endswith(".gguf"):
        errors.append(f"TGI given a GGUF file: {argv}")
    if len(given) == 1 and (ours or _model_value(runtime, parsed)[1].startswith("/")):
        errors += model_argument_errors(runtime, pod, parsed)
    if runtime == "llamacpp":
        for key in ("--mmproj", "--model-draft"):
            for path in parsed.values.get(key) or []:
                if path and path.startswith("/"):
                    errors += _file_errors(pod, container, path)
    ports = parsed.values.get("--port") or [None]
    if str(container["ports"][0]["containerPort"]) != ports[-1]:
        errors.append(f"containerPort {container['ports'][0]['containerPort']} != --port {ports}")
    return errors


def test_every_argv_parses_at_the_pinned_versions(capsys: pytest.CaptureFixture[str]) -> None:
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    check = checkers(groups)
    checked: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    invalid: Counter[str] = Counter()  # refused as InvalidRuntimeConfig, each checked
    pods = 0
    failures: list[str] = []
    for runtime, model_spec, service_spec in specs():
        try:
            model = parse_model(model_spec)
            service = parse_inference_service(service_spec)
        except InvalidSpec as e:  # the generator builds only valid objects
            failures.append(f"{service_spec}: {e.errors}")
            continue
        members = len(service.multi_node.members) if service.multi_node else None
        problems = _refused(service, model)
        if problems is not None:
            refused[runtime] += 1
            if problems and all(p.reason == INVALID_RUNTIME_CONFIG for p in problems):
                # The refusal is needed: the argv it would have run fails a check.
                invalid[runtime] += 1
                if not any(
                    _check_pod(
                        runtime, check[runtime], p, members, gpus=_devices(p, model, service)
                    )
                    for p in _pods(service, model)
                ):
                    failures.append(
                        f"{runtime} {service_spec} {model_spec}: refused but it would start: "
                        f"{problems}"
                    )
            continue
        checked[runtime] += 1
        user = user_args(runtime, normalize_user_args(runtime, service.extra_args))
        ours = not any(name in user for name in MODEL_OPTIONS[runtime])
        for pod in _pods(service, model):
            pods += 1
            gpus = _devices(pod, model, service)
            for error in _check_pod(runtime, check[runtime], pod, members, ours, gpus):
                failures.append(f"{runtime} {service_spec} {model_spec}: {error}")
    with capsys.disabled():
        print(
            f"\nruntime contract: {sum(checked.values())} specs checked "
            f"({', '.join(f'{k} {v}' for k, v in sorted(checked.items()))}), "
            f"{pods} pods' argv, {sum(refused.values())} refused with a condition "
            f"({', '.join(f'{k} {v}' for k, v in sorted(refused.items()))}; "
            f"{sum(invalid.values())} as InvalidRuntimeConfig, each failing the release), "
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
        ("sglang", ["--model-path", "m", "--tp", "2", "--tp-size", "2"], "given 2 times"),
        ("vllm", ["--model", "m", "--quant", "awq"], "ambiguous option"),
        ("vllm", ["--model", "m", "--tensor-parallel-size"], "missing value"),
        ("tgi", ["--model-id", "m", "-p9000", "--port", "80"], "--port given 2 times"),
        ("llamacpp", ["--model", "/m.gguf", "-ngl99"], "unknown option"),
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


def _request(spec: Obj) -> Obj:
    return admission_request("InferenceService", spec)


ONE_GPU: Obj = {"accelerator": "cuda", "gpu": {"enabled": True, "count": 1}}
QWEN: Obj = {"source": "Qwen/Qwen3-8B", "format": "safetensors", "hardware": ONE_GPU}
TWO_MEMBERS: Obj = {"members": [{"node": "a", "fabric": {"address": "10.0.0.1"}}, {"node": "b"}]}


# The issue's items 3-6 (and what they led to): a spec, the field its refusal names.
# Each must be refused by the reconcile (InvalidRuntimeConfig) and by the webhook, and
# the argv it would have run must really fail the pinned release's parser or startup
# checks (or bind an address no probe reaches).
REFUSALS: list[tuple[str, Obj, str]] = [
    ("vllm", {"vllmConfig": {"quantization": "bitsandbytes"}}, "spec.vllmConfig.quantization"),
    ("vllm", {"vllmConfig": {"quantization": "int4"}}, "spec.vllmConfig.quantization"),
    ("vllm", {"vllmConfig": {"quantization": "fbgemm_fp8"}}, "deprecated"),
    ("vllm", {"vllmConfig": {"kvCacheDtype": "int8"}}, "spec.vllmConfig.kvCacheDtype"),
    ("vllm", {"vllmConfig": {"attentionBackend": "XFORMERS"}}, "spec.vllmConfig.attentionBackend"),
    ("vllm", {"extraArgs": ["--kv_cache_dtype", "int8"]}, "spec.extraArgs[1]: --kv-cache-dtype"),
    ("vllm", {"extraArgs": ["-q=int4"]}, "spec.extraArgs[0]: -q"),
    ("vllm", {"extraArgs": ["Qwen/Qwen3-8B-AWQ"]}, "spec.extraArgs[0]: 'Qwen/Qwen3-8B-AWQ'"),
    ("vllm", {"extraArgs": ["--enforce-eager", "x"]}, "spec.extraArgs[1]: 'x' is a bare word"),
    ("vllm", {"extraArgs": ["--hostname", "::"]}, "spec.extraArgs[0]: --hostname"),
    ("vllm", {"extraArgs": ["--task", "embed"]}, "spec.extraArgs[0]: --task"),
    ("vllm", {"extraArgs": ["--host", "127.0.0.1"]}, "spec.extraArgs[1]: --host"),
    ("vllm", {"extraArgs": ["--host=localhost"]}, "spec.extraArgs[0]: --host"),
    ("sglang", {"extraArgs": ["--tp_size", "1"]}, "spec.extraArgs[0]: --tp_size"),
    ("sglang", {"extraArgs": ["--host", "::1"]}, "spec.extraArgs[1]: --host"),
    ("sglang", {"sglangConfig": {"quantization": "int4"}}, "spec.sglangConfig.quantization"),
    ("tgi", {"extraArgs": ["--host", "::"]}, "spec.extraArgs[0]: --host"),
    ("tgi", {"extraArgs": ["--max_total_tokens", "9"]}, "spec.extraArgs[0]: --max_total_tokens"),
    ("tgi", {"extraArgs": ["--hostname", "127.0.0.1"]}, "spec.extraArgs[1]: --hostname"),
    (
        "tgi",
        {"tgiConfig": {"maxInputLength": 4096, "maxTotalTokens": 4096}},
        "spec.tgiConfig.maxInputLength (4096) must be below spec.tgiConfig.maxTotalTokens",
    ),
    ("tgi", {"tgiConfig": {"maxInputLength": 8000}}, "spec.tgiConfig.maxInputLength (8000)"),
    (
        "tgi",
        {"tgiConfig": {"maxTotalTokens": 2048}, "extraArgs": ["--max-input-tokens", "2048"]},
        "spec.extraArgs[1]: --max-input-tokens (2048)",
    ),
    ("tgi", {"tgiConfig": {"quantize": "int4"}}, "spec.tgiConfig.quantize"),
    ("llamacpp", {"extraArgs": ["--host", "127.0.0.1"]}, "spec.extraArgs[1]: --host"),
    ("llamacpp", {"extraArgs": ["--hostname", "::"]}, "spec.extraArgs[0]: --hostname"),
    (
        "vllm",
        {"multiNode": TWO_MEMBERS, "extraArgs": ["--data-parallel-size", "4"]},
        "spec.extraArgs[1]: --data-parallel-size (4)",
    ),
    (
        "vllm",
        {"multiNode": TWO_MEMBERS, "extraArgs": ["-dp=1"]},
        "spec.extraArgs[0]: -dp (1)",
    ),
]


@pytest.mark.parametrize(("runtime", "extra", "field"), REFUSALS)
def test_each_refusal_names_the_field_and_the_release_would_exit(
    runtime: str, extra: Obj, field: str
) -> None:
    spec: Obj = {"modelRef": "m", "runtime": runtime, **extra}
    source = "https://example.com/m.gguf" if runtime == "llamacpp" else "Qwen/Qwen3-8B"
    fmt = "gguf" if runtime == "llamacpp" else "safetensors"
    model = parse_model({"source": source, "format": fmt, "hardware": ONE_GPU})
    service = parse_inference_service(spec)
    problems = runtime_problems(service, model, model_placement(model, runtime, ROOTS).arg)
    assert [p.reason for p in problems] == [INVALID_RUNTIME_CONFIG], problems
    assert field in problems[0].message, problems[0].message
    allowed, message = verdict(_request(spec))
    assert not allowed and field in message, message
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    check = checkers(groups)[runtime]
    members = len(service.multi_node.members) if service.multi_node else None
    assert any(
        _check_pod(runtime, check, pod, members, gpus=_devices(pod, model, service))
        for pod in _pods(service, model)
    )


def test_underscore_spellings_replace_ours_and_count_toward_parallelism() -> None:
    """vLLM and llama.cpp read `--a_b` as `--a-b`: TP 2 on a 1-GPU pod is refused."""
    model = parse_model(QWEN)
    for runtime, extra in (
        ("vllm", ["--tensor_parallel_size", "2"]),
        ("vllm", ["--tensor_parallel_size=2"]),
        ("llamacpp", ["--tensor_split", "1,1"]),
    ):
        if runtime == "llamacpp":
            model = parse_model({"source": "https://example.com/m.gguf", "hardware": ONE_GPU})
        service = parse_inference_service({"modelRef": "m", "runtime": runtime, "extraArgs": extra})
        problems = runtime_problems(service, model, model_placement(model, runtime, ROOTS).arg)
        assert [p.reason for p in problems] == ["ParallelismExceedsGPUs"], (extra, problems)
    service = parse_inference_service(
        {
            "modelRef": "m",
            "runtime": "vllm",
            "parallelSlots": 4,
            "extraArgs": ["--max_num_seqs", "8"],
        }
    )
    argv = pod_spec(scope_for(ISVC, service, parse_model(QWEN)))["containers"][0]["args"]
    assert argv.count("--max-num-seqs") == 1 and argv[argv.index("--max-num-seqs") + 1] == "8"
    llama = parse_inference_service(
        {"modelRef": "m", "runtime": "llamacpp", "extraArgs": ["--n_gpu_layers", "10"]}
    )
    argv = pod_spec(
        scope_for(
            ISVC, llama, parse_model({"source": "https://example.com/m.gguf", "hardware": ONE_GPU})
        )
    )["containers"][0]["args"]
    assert argv.count("--n-gpu-layers") == 1 and argv[argv.index("--n-gpu-layers") + 1] == "10"


def test_vllm_serves_the_model_as_its_positional_argument() -> None:
    model = parse_model(QWEN)
    service = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    container = pod_spec(scope_for(ISVC, service, model))["containers"][0]
    assert container["command"] == ["vllm", "serve"] and container["args"][0] == "Qwen/Qwen3-8B"
    assert "--model" not in container["args"]
    user = parse_inference_service(
        {"modelRef": "m", "runtime": "vllm", "extraArgs": ["--model", "Qwen/Qwen3-8B-AWQ"]}
    )
    argv = pod_spec(scope_for(ISVC, user, model))["containers"][0]["args"]
    assert "Qwen/Qwen3-8B" not in argv and argv.count("--model") == 1


def test_tgi_emits_max_input_tokens_and_a_user_spelling_replaces_it() -> None:
    model = parse_model(QWEN)
    typed = {"maxInputLength": 2000, "maxTotalTokens": 4096}
    service = parse_inference_service({"modelRef": "m", "runtime": "tgi", "tgiConfig": typed})
    argv = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    assert argv[argv.index("--max-input-tokens") + 1] == "2000" and "--max-input-length" not in argv
    for spelling in ("--max-input-tokens", "--max-input-length"):
        user = parse_inference_service(
            {"modelRef": "m", "runtime": "tgi", "tgiConfig": typed, "extraArgs": [spelling, "1000"]}
        )
        argv = pod_spec(scope_for(ISVC, user, model))["containers"][0]["args"]
        assert [a for a in argv if a.startswith("--max-input")] == [spelling], argv


def test_value_tables_are_the_releases() -> None:
    """runtimes/accepted_values.py against the options files (parser and startup tables)."""
    v = validators()
    assert list(rv.VLLM_QUANTIZATION) == v["quantization"]["methods"]
    assert list(rv.VLLM_DEPRECATED_QUANTIZATION) == v["quantization"]["deprecated"]
    platforms = {k: list(m) for k, m in rv.VLLM_PLATFORM_QUANTIZATION.items()}
    assert platforms == {k: m for k, m in v["quantization"]["platforms"].items() if m}
    assert list(rv.VLLM_KV_CACHE_DTYPES) == v["kv_cache_dtypes"]
    assert list(rv.VLLM_ATTENTION_BACKENDS) == v["attention_backends"]
    assert rv.VLLM_VERSION == VERSIONS["vllm"] == versions()["vllm"]
    # How a bare word after each vLLM option is read: its value or a positional.
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    vllm = checkers(groups)["vllm"]
    for spelling, opt in vllm.options.items():
        if not spelling.startswith("-"):
            continue
        expected = {"0": [2, 3], "1": [3], "?": [3], "+": [], "*": []}[opt.nargs]
        assert vllm_positionals(("m", spelling, "a", "b"))[1:] == expected, spelling


def test_checked_spellings_are_the_flag_tables() -> None:
    from runtimes.arg_errors import CHECKED

    for runtime, table in CHECKED.items():
        for option, (spellings, _) in table.items():
            assert set(spellings) <= set(FLAGS[runtime][option].spellings), (runtime, option)
    assert [a.name for a in extra_options("vllm", ("--max_num_seqs=2",))] == ["--max-num-seqs"]


@pytest.mark.parametrize(
    ("runtime", "argv", "error"),
    [  # issue 20 item 1: the sources passed verbatim, as each runtime rejected them
        ("llamacpp", ["-hf", "file:///mnt/m.gguf"], "invalid HF repo format"),
        ("llamacpp", ["-hf", "org/repo/file.gguf"], "invalid HF repo format"),
        ("vllm", ["--model", "pvc://claim/m"], "a URL the runtime cannot load"),
        ("sglang", ["--model-path", "s3://bucket/m"], "a URL the runtime cannot load"),
        ("tgi", ["--model-id", "org/repo/extra"], "HFValidationError"),
        ("vllm", ["--model", "/mnt/models/m"], "on no volume of the pod"),
    ],
)
def test_the_model_validators_catch_what_a_runtime_rejects(
    runtime: str, argv: list[str], error: str
) -> None:
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    parsed = checkers(groups)[runtime].parse(argv)
    pod: Obj = {"containers": [{"args": argv}], "volumes": []}
    errors = model_argument_errors(runtime, pod, parsed)
    assert any(error in e for e in errors), errors


PARALLEL_WORDS = re.compile(r"parallel|^-tp|^--tp|^-dp|^--dp|^-pp|^--pp|shard|split|^-ts|^-sm")


def _devices_wanted(runtime: str, parsed: Parsed) -> int:
    """The devices one pod's argv makes the runtime use, read off the parsed argv."""

    def n(*keys: str) -> int:
        for key in keys:
            value = parsed.values.get(key)
            if value and value[-1] is not None:
                return int(value[-1])
        return 1

    if runtime == "vllm":
        return (
            n("--tensor-parallel-size")
            * n("--pipeline-parallel-size")
            * n("--data-parallel-size-local", "--data-parallel-size")
        )
    if runtime == "sglang":
        dp = 1 if parsed.values.get("--enable-dp-attention") else n("--dp-size")
        return n("--tp-size") * n("--pp-size") * dp
    if runtime == "tgi":
        return n("--num-shard")
    split = parsed.values.get("--tensor-split")
    mode = parsed.values.get("--split-mode")
    if mode and mode[-1] == "none":
        return 1
    return len(re.split(r"[,/]", str(split[-1]))) if split else 1


def test_no_argv_asks_for_more_devices_than_the_claims_give() -> None:
    """Issue 27 item 12: count beside claims that give fewer devices per pod (count 2 and
    a 1-device template, count 4 beside a 2-device one, resources.gpu above the claim):
    every argv that is not refused fits the devices the pod gets."""
    groups = {rt: {name: f.spellings for name, f in FLAGS[rt].items()} for rt in FLAGS}
    check = checkers(groups)
    checked = refused = 0
    failures = []
    for runtime, model_spec, service_spec in specs():
        gpu = model_spec.get("hardware", {}).get("gpu", {})
        words = [*service_spec.get("extraArgs", []), *service_spec]
        if (
            not gpu.get("resourceClaims")
            or service_spec.get("mode") != "chat"
            or service_spec.get("multiNode")
            or (len(service_spec) > 3 and not any(PARALLEL_WORDS.search(w) for w in words))
        ):
            continue
        model = parse_model(model_spec)
        for claimed in (1, 2):
            for gpus in (None, 4):
                spec = (
                    service_spec if gpus is None else {**service_spec, "resources": {"gpu": gpus}}
                )
                service = parse_inference_service(spec)
                if rule_errors(service, model) or host_path_error(model.location, ROOTS):
                    continue
                arg = model_placement(model, runtime, ROOTS).arg
                if runtime_problems(service, model, arg, claimed):
                    refused += 1
                    continue
                checked += 1
                pod = pod_spec(scope_for(ISVC, service, model, claimed, roots=ROOTS))
                parsed = check[runtime].parse(pod["containers"][0]["args"])
                wanted = _devices_wanted(runtime, parsed)
                if wanted > claimed:
                    failures.append(
                        f"{runtime} {spec} count {gpu.get('count')}: {wanted} devices on {claimed}"
                    )
    assert not failures, "\n".join(failures[:20])
    print(f"\nclaimed-devices contract: {checked} argv checked, {refused} refused")
    assert checked > 500 and refused > 0, (checked, refused)
