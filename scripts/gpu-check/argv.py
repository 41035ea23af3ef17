"""The llama-server argv of GPU InferenceServices, rendered by the product's own code,
for scripts/gpu-check/run.sh to run on a CUDA build of llama.cpp b10068.

Each case is a Model and an InferenceService; its container argv comes from
`pod_spec` (as the pod gets it) and `runtime_problems` says whether we accept it. The
argv the device runs differs from the pod's only where that machine is not the pod:
the model argument -> `--model <the tiny GGUF>`, `--host` -> 127.0.0.1, `--port` ->
the placeholder PORT (run.sh picks a free port). GPU buffers in `--override-tensor`
stay: the device has CUDA0.

Specs we refuse run too, as `expect: "exit"`: each must fail there with the message our
refusal quotes (so the refusal is shown right on a real CUDA build).

    .venv/bin/python scripts/gpu-check/argv.py OUT.json MODEL_PATH

writes OUT.json, the tiny model at MODEL_PATH and its head-64 variant beside it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from api import parse_inference_service, parse_model  # noqa: E402
from objtypes import Obj  # noqa: E402
from reconcilers.inferenceservice.scope import scope_for  # noqa: E402
from reconcilers.inferenceservice.workload import pod_spec  # noqa: E402
from reconcilers.sources.placement import model_placement  # noqa: E402
from runtimes.problems import runtime_problems  # noqa: E402
from runtimes.spellings import LLAMACPP  # noqa: E402

ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}
HOST_ROOTS = ("/",)
PORT = "PORT"
MODEL_SPELLINGS = {*LLAMACPP["--model"].spellings, *LLAMACPP["-hf"].spellings}


def gpu_model(count: int, **gpu: Any) -> Obj:
    return {
        "source": "https://example.com/tiny.gguf",
        "format": "gguf",
        "hardware": {"accelerator": "cuda", "gpu": {"enabled": True, "count": count, **gpu}},
    }


# (name, Model spec, InferenceService spec, expect, what the log must show when it exits)
CASES: list[tuple[str, Obj, Obj, str, str]] = [
    ("gpu1-defaults", gpu_model(1), {}, "serve", ""),
    ("gpu1-layers-1", gpu_model(1, layers=1), {}, "serve", ""),
    (
        "gpu1-fa-q8-cache",
        gpu_model(1),
        {"flashAttention": True, "cacheTypeK": "q8_0", "cacheTypeV": "q8_0"},
        "serve",
        "",
    ),
    (
        "gpu1-override-tensor-cuda0",
        gpu_model(1),
        {"tensorOverrides": ["token_embd=CUDA0"]},
        "serve",
        "",
    ),
    ("gpu2-layer", gpu_model(2), {}, "serve", ""),
    (
        "gpu2-layer-layersplit",
        gpu_model(2, sharding={"strategy": "layer", "layerSplit": ["0-1", "2-2"]}),
        {},
        "serve",
        "",
    ),
    ("gpu2-pipeline", gpu_model(2, sharding={"strategy": "pipeline"}), {}, "serve", ""),
    ("gpu2-none", gpu_model(2, sharding={"strategy": "none"}), {}, "serve", ""),
    (
        "gpu2-tensor-fa-on",
        gpu_model(2, sharding={"strategy": "tensor"}),
        {"flashAttention": True},
        "serve",
        "",
    ),
    ("gpu2-tensor-fa-auto", gpu_model(2, sharding={"strategy": "tensor"}), {}, "serve", ""),
    (
        "gpu1-extraargs",
        gpu_model(1),
        {"extraArgs": ["-ngl", "1", "--main-gpu", "0", "-fa", "on", "--no-mmap"]},
        "serve",
        "",
    ),
    (
        "gpu1-extraargs-split",
        gpu_model(1),
        {"extraArgs": ["-sm", "layer", "-ts", "1", "--ctx-size=1024"]},
        "serve",
        "",
    ),
    # Refused by runtimes/problems.py: run to show llama.cpp b10068 on CUDA exits with them.
    ("gpu2-row-refused", gpu_model(2, sharding={"strategy": "row"}), {}, "exit", "split buffers"),
    (
        "gpu2-tensor-fa-off-refused",
        gpu_model(2, sharding={"strategy": "tensor"}),
        {"flashAttention": False},
        "exit",
        "requires flash_attn",
    ),
]


# Diagnostics of the tensor-split abort seen on one H200 (docs/runtimes.md): the same
# argv on a tiny model of head size 64 (CUDA flash attention has kernels for it, not for
# 32), and with --tensor-split left out (one part per device found). Not our argv where
# a step is dropped: each names its base case and what differs.
DIAGNOSTICS: list[tuple[str, str, bool, bool]] = [
    # (name, base case, on the head-64 model, without --tensor-split)
    ("diag-tensor-fa-on-h64", "gpu2-tensor-fa-on", True, False),
    ("diag-tensor-fa-auto-h64", "gpu2-tensor-fa-auto", True, False),
    ("diag-tensor-fa-on-no-ts", "gpu2-tensor-fa-on", False, True),
    ("diag-tensor-fa-on-h64-no-ts", "gpu2-tensor-fa-on", True, True),
    ("diag-layer-h64", "gpu2-layer", True, False),
]


def head64_path(model_path: str) -> str:
    """Where the head-64 variant of the tiny model lies, beside it."""
    return str(Path(model_path).with_name("tiny-h64.gguf"))


def write_models(model_path: Path) -> None:
    """The tests' tiny GGUF (devcluster/tiny_gguf.py) and, beside it, its head-64 variant:
    the same writer with one head of 64 instead of two of 32."""
    from devcluster import tiny_gguf

    tiny_gguf.write_tiny_gguf(model_path)
    heads = tiny_gguf.N_HEAD
    tiny_gguf.N_HEAD = 1
    try:
        tiny_gguf.write_tiny_gguf(Path(head64_path(str(model_path))))
    finally:
        tiny_gguf.N_HEAD = heads


def diagnostic(base: Obj, name: str, h64: bool, no_split: bool, model_path: str) -> Obj:
    args: list[str] = list(base["args"])
    if h64:
        args[args.index(model_path)] = head64_path(model_path)
    if no_split:
        i = args.index("--tensor-split")
        del args[i : i + 2]
    changes = [*(["head-64 model"] if h64 else []), *(["no --tensor-split"] if no_split else [])]
    return {
        **base,
        "name": name,
        "args": args,
        "diagnostic": f"{base['name']} with {' and '.join(changes)}",
    }


def for_device(args: list[str], model_path: str) -> list[str]:
    out: list[str] = []
    it = iter(args)
    for arg in it:
        if arg in MODEL_SPELLINGS:
            next(it)
            out += ["--model", model_path]
        elif arg == "--host":
            next(it)
            out += ["--host", "127.0.0.1"]
        elif arg == "--port":
            next(it)
            out += ["--port", PORT]
        else:
            out.append(arg)
    return out


def render(model_path: str) -> list[Obj]:
    rendered = []
    for name, model_spec, service_spec, expect, exit_message in CASES:
        service = parse_inference_service({"modelRef": "tiny", **service_spec})
        model = parse_model(model_spec)
        container = pod_spec(scope_for(ISVC, service, model, roots=HOST_ROOTS))["containers"][0]
        args: list[str] = container["args"]
        problems = runtime_problems(
            service, model, model_placement(model, service.runtime, HOST_ROOTS).arg
        )
        refused = [f"{p.reason}: {p.message}" for p in problems]
        if bool(refused) != (expect == "exit"):
            raise SystemExit(f"{name}: expected {expect}, our checks say {refused or 'accepted'}")
        rendered.append(
            {
                "name": name,
                "model": model_spec,
                "service": service_spec,
                "pod_args": args,
                "args": for_device(args, model_path),
                "expect": expect,
                "exit_message": exit_message,
                "refused": refused,
            }
        )
    by_name = {c["name"]: c for c in rendered}
    rendered += [
        diagnostic(by_name[base], name, h64, no_split, model_path)
        for name, base, h64, no_split in DIAGNOSTICS
    ]
    return rendered


def main() -> None:
    out, model_path = Path(sys.argv[1]), sys.argv[2]
    write_models(Path(model_path))
    out.write_text(json.dumps(render(model_path), indent=1) + "\n")
    print(f"{out}: {len(CASES)} argv and {len(DIAGNOSTICS)} diagnostics")


if __name__ == "__main__":
    main()
