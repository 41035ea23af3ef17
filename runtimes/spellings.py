"""The options of each runtime's own parser that LLMKube derives, by every spelling.

One table per runtime, read off the parser at the pinned version (the copies in
tests/data/runtime-options/ are the contract; tests/unit/test_runtime_contract.py checks
every spelling here against them). A flag the user passes in extraArgs under any of
its spellings owns that option: the one we would derive is left out, so the runtime
sees it once.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtimes.accepted_values import CHOICES as CHOICES
from runtimes.arg_errors import option_name
from runtimes.parsers import resolve, takes_one_value


@dataclass(frozen=True)
class Flag:
    spellings: tuple[str, ...]  # the first is the one we emit
    takes_value: bool = True
    negatives: tuple[str, ...] = ()  # spellings that set the same option off

    @property
    def name(self) -> str:
        return self.spellings[0]


def _flags(*flags: Flag) -> dict[str, Flag]:
    return {f.name: f for f in flags}


def _f(*spellings: str, value: bool = True, negatives: tuple[str, ...] = ()) -> Flag:
    return Flag(spellings, value, negatives)


def _disable(option: str) -> tuple[str, ...]:
    """vLLM's negative spellings of --enable-<option>: the last one is emitted."""
    return (f"--no-enable-{option}", f"--disable-{option}")


VLLM = _flags(
    _f("--model"),
    _f("--revision"),
    _f("--served-model-name"),
    _f("--host"),
    _f("--port"),
    _f("--tensor-parallel-size", "-tp"),
    _f("--pipeline-parallel-size", "-pp"),
    _f("--data-parallel-size", "-dp"),
    _f("--data-parallel-size-local", "-dpl"),
    _f("--data-parallel-start-rank", "-dpr"),
    _f("--data-parallel-address", "-dpa"),
    _f("--data-parallel-rpc-port", "-dpp"),
    _f("--headless", value=False),
    _f("--gpu-memory-utilization"),
    _f("--cpu-offload-gb"),
    _f("--max-model-len"),
    _f("--quantization", "-q"),
    _f("--dtype"),
    _f("--kv-cache-dtype"),
    # 0.34 pairs --enable-x with --disable-x (emitted); --no-enable-x is still accepted.
    _f("--enable-prefix-caching", value=False, negatives=_disable("prefix-caching")),
    _f("--enable-chunked-prefill", value=False, negatives=_disable("chunked-prefill")),
    _f("--max-num-batched-tokens"),
    _f("--enable-expert-parallel", value=False, negatives=_disable("expert-parallel")),
    _f("--max-num-seqs"),
    _f("--attention-backend"),
    _f("--runner"),
)

SGLANG = _flags(
    _f("--model-path", "--model"),
    _f("--revision"),
    _f("--served-model-name"),
    _f("--host"),
    _f("--port"),
    # `--tp` only works as an argparse abbreviation: never emitted, but a user's `--tp`
    # still means this option.
    _f("--tp-size", "--tensor-parallel-size", "--tp"),
    _f("--dp-size", "--data-parallel-size", "--dp"),
    _f("--ep-size", "--expert-parallel-size", "--ep"),
    _f("--pp-size", "--pipeline-parallel-size"),
    _f("--mem-fraction-static"),
    _f("--context-length"),
    _f("--quantization"),
    _f("--is-embedding", value=False),
)

TGI = _flags(
    _f("--model-id"),
    _f("--revision"),
    _f("--hostname"),
    _f("--port", "-p"),
    _f("--num-shard"),
    _f("--quantize"),
    _f("--dtype"),
    # --max-input-length is the deprecated spelling: TGI exits when both are given.
    _f("--max-input-tokens", "--max-input-length"),
    _f("--max-total-tokens"),
    _f("--cuda-memory-fraction"),
)

LLAMACPP = _flags(
    _f("--model", "-m"),
    _f("-hf", "-hfr", "--hf-repo"),
    _f("--mmproj", "-mm"),
    _f("--alias", "-a"),
    _f("--host"),
    _f("--port"),
    _f("--n-gpu-layers", "-ngl", "--gpu-layers"),
    _f("--split-mode", "-sm"),
    _f("--tensor-split", "-ts"),
    _f("--ctx-size", "-c"),
    _f("--embedding", "--embeddings", value=False),
    _f("--reranking", "--rerank", value=False),
    _f("--pooling"),
    _f("--parallel", "-np"),
    _f("--flash-attn", "-fa"),
    _f("--jinja", value=False, negatives=("--no-jinja",)),
    _f("--cache-type-k", "-ctk"),
    _f("--cache-type-v", "-ctv"),
    _f("--cpu-moe", "-cmoe", value=False),
    _f("--n-cpu-moe", "-ncmoe"),
    _f("--kv-offload", "-kvo", value=False, negatives=("-nkvo", "--no-kv-offload")),
    _f("--warmup", value=False, negatives=("--no-warmup",)),
    _f("--batch-size", "-b"),
    _f("--ubatch-size", "-ub"),
    _f("--reasoning-budget"),
    _f("--override-kv"),
    _f("--override-tensor", "-ot"),
    # spec.ropeScaling and spec.speculativeDecoding (runtimes/pod_flags.py)
    _f("--rope-scaling"),
    _f("--rope-scale"),
    _f("--yarn-orig-ctx"),
    _f("--spec-type"),
    _f("--spec-draft-n-max"),
    _f("--spec-draft-p-min", "--draft-p-min"),
)

FLAGS: dict[str, dict[str, Flag]] = {
    "vllm": VLLM,
    "sglang": SGLANG,
    "tgi": TGI,
    "llamacpp": LLAMACPP,
}

# Options given more than once on purpose (each occurrence adds one entry).
REPEATABLE = {"llamacpp": {"--override-kv", "--override-tensor"}}


def _index(runtime: str) -> dict[str, tuple[Flag, bool]]:
    """Every spelling (positive and negative) -> its option and whether it is a negation."""
    out: dict[str, tuple[Flag, bool]] = {}
    for flag in FLAGS[runtime].values():
        for s in flag.spellings:
            out[s] = (flag, False)
        for s in flag.negatives:
            out[s] = (flag, True)
    return out


_INDEX = {runtime: _index(runtime) for runtime in FLAGS}


def normalize_user_args(runtime: str, extra_args: tuple[str, ...]) -> tuple[str, ...]:
    """extraArgs as the runtime will surely read them: each option word written as the
    spelling its parser resolves it to (runtimes.parsers.resolve), values untouched.

    An argparse abbreviation (vLLM, SGLang: `--tensor-parallel 4`, SGLang's `--tp`)
    becomes its full spelling, so it replaces our option like any other spelling of it
    and no later option can make it ambiguous. A short option with its value attached
    (argparse `-qfp8`, clap `-p9000`) becomes `-q=fp8` / `-p=9000`, which both parsers
    read. vLLM and llama.cpp read `--a_b` as `--a-b`: written so. llama.cpp rejects
    `--flag=value`: its options that take one value are passed as two words
    (runtimes.parsers refuses the rest). Unknown words stay as they are (refused).
    """
    out = list(extra_args)
    split: dict[int, tuple[str, str]] = {}
    for opt in resolve(runtime, extra_args):
        word = extra_args[opt.index]
        if opt.option is None or "." in opt.name or (runtime == "vllm" and word[:2] == "-O"):
            # unknown (refused), vLLM's `--x.key v` (a part of JSON --x) and `-O3`: as
            # written, underscores read as the parser reads them
            if word.startswith("--"):
                out[opt.index] = option_name(runtime, word) + word[len(word.partition("=")[0]) :]
            continue
        if not opt.attached:
            out[opt.index] = opt.option
        elif runtime == "llamacpp" and takes_one_value(runtime, opt.option):
            split[opt.index] = (opt.option, opt.value or "")
        else:
            out[opt.index] = f"{opt.option}={opt.value}"
    result: list[str] = []
    for i, word in enumerate(out):
        result += split.get(i, (word,))
    return tuple(result)


@dataclass(frozen=True)
class UserArgs:
    """The options of ours that extraArgs set, with the value given (None for flags)."""

    owned: dict[str, str | None]

    def __contains__(self, name: object) -> bool:
        return name in self.owned

    def value(self, name: str) -> str | None:
        return self.owned.get(name)


def user_args(runtime: str, extra_args: tuple[str, ...]) -> UserArgs:
    """Our options that `extra_args` set, read as the runtime's parser reads them."""
    index = _INDEX[runtime]
    owned: dict[str, str | None] = {}
    for opt in resolve(runtime, extra_args):
        hit = index.get(opt.option or "")
        if hit is None:
            continue
        flag, _negative = hit
        owned[flag.name] = opt.value if flag.takes_value else None
    return UserArgs(owned)


def int_value(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
