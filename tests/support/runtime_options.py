"""A checker of argv against what each runtime's own parser accepts (tests/data/runtime-options).

It reads the options files as the parsers define them: argparse for vLLM and SGLang
(`nargs`, `choices`, typed values, one positional for vLLM), clap for TGI (long and
short names, typed values, enums, a repeated non-multiple option is an error, values
are word-split by the image's entrypoint), llama.cpp's common_arg table (aliases and
negatives, no `--x=value`, at most 15 --tensor-split parts).

One reading differs from the files' `takes_value`: llama.cpp's `bool` options (e.g.
`--jinja` / `--no-jinja`) are handled by a bool handler that consumes no value, so
they are read as flags here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .paths import DATA

OPTIONS = DATA / "runtime-options"


@dataclass(frozen=True)
class Option:
    key: str  # one key per option: every spelling of it maps here
    nargs: str  # "0" flag, "1" one value, "?" optional, "+" one or more, "*" any
    kind: str  # int, uint, float, str, bool, hrint
    choices: tuple[str, ...] | None
    repeatable: bool


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((OPTIONS / f"{name}.json").read_text())
    return data


def _argparse_kind(t: str) -> str:
    return {"int": "int", "float": "float", "human_readable_int": "hrint"}.get(t, "str")


def argparse_options(name: str, groups: dict[str, tuple[str, ...]]) -> dict[str, Option]:
    """vLLM / SGLang: every spelling is a key in the file; `groups` names the spellings of
    one option (argparse's dest is not in the file), so repeats across spellings count."""
    group_of = {s: g[0] for g in groups.values() for s in g}
    out = {}
    for spelling, o in _load(name)["options"].items():
        nargs = {"None": "1", "0": "0"}.get(o["nargs"], o["nargs"])
        choices = tuple(str(c) for c in o["choices"]) if o["choices"] else None
        out[spelling] = Option(
            group_of.get(spelling, spelling), nargs, _argparse_kind(o["type"]), choices, False
        )
    return out


def tgi_options() -> dict[str, Option]:
    out: dict[str, Option] = {}
    for long, o in _load("tgi")["options"].items():
        value = o["value"]
        nargs = "0" if value == "flag" else "1"
        kind = {
            "usize": "uint",
            "u16": "uint",
            "u32": "uint",
            "u64": "uint",
            "float": "float",
            "bool": "bool",
        }.get(value, "str")
        choices = tuple(o["choices"]) if o["choices"] else None
        opt = Option(long, nargs, kind, choices, bool(o["multiple"]))
        out[long] = opt
        # `-p` is both --port's and --prometheus-port's short in the file: clap resolves
        # it to the first declared, --port.
        if o["short"] and o["short"] not in out:
            out[o["short"]] = opt
    return out


def llamacpp_options() -> dict[str, Option]:
    out: dict[str, Option] = {}
    for o in _load("llamacpp")["options"].values():
        canonical = o["canonical"]
        kind = {"int": "int", "void": "flag", "bool": "flag", "str_str": "pair"}.get(
            o["kind"], "str"
        )
        nargs = "0" if kind == "flag" else ("2" if kind == "pair" else "1")
        opt = Option(canonical, nargs, "int" if kind == "int" else "str", None, False)
        for s in [*o["aliases"], *o["negative"]]:
            out[s] = opt
    return out


NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _value_ok(opt: Option, value: str) -> bool:
    if opt.choices is not None and value not in opt.choices:
        return False
    try:
        if opt.kind == "int":
            int(value)
        elif opt.kind == "uint":
            return int(value) >= 0
        elif opt.kind == "float":
            return math.isfinite(float(value))
        elif opt.kind == "hrint":
            return bool(re.match(r"^\d+(\.\d+)?[kKmMgGtT]?$", value))
        elif opt.kind == "bool":
            return value in ("true", "false")
    except ValueError:
        return False
    return True


@dataclass
class Parsed:
    values: dict[str, list[str | None]]  # option key -> the value of each occurrence
    positionals: list[str]
    errors: list[str]
    options: list[str] = field(default_factory=list)  # each option word, as resolved


class Checker:
    def __init__(
        self,
        runtime: str,
        options: dict[str, Option],
        positionals: int,
        inline: bool,
        underscores: bool = False,
    ) -> None:
        self.runtime = runtime
        self.options = options
        self.max_positionals = positionals
        self.inline = inline  # whether --x=value is accepted
        self.underscores = underscores  # whether `--a_b` is read as `--a-b`

    def parse(self, argv: list[str]) -> Parsed:
        p = Parsed({}, [], [])
        i = 0
        while i < len(argv):
            arg = argv[i]
            i += 1
            if not arg.startswith("-") or NUMBER.match(arg):
                p.positionals.append(arg)
                continue
            name, eq, inline = arg.partition("=")
            if self.underscores and name.startswith("--"):
                key, dot, rest = name.partition(".")
                name = key.replace("_", "-") + dot + rest
            opt = self.options.get(name)
            if opt is None and self.runtime != "llamacpp":
                resolved = self._resolve(arg)
                if isinstance(resolved, str):
                    p.errors.append(resolved)
                    continue
                if resolved is not None:
                    name, attached = resolved
                    opt = self.options[name]
                    if attached is not None:
                        eq, inline = "=", attached
            if opt is None or (eq and not self.inline):
                p.errors.append(f"unknown option {arg!r}")
                continue
            p.options.append(name)
            values: list[str] = []
            if eq:
                values = [inline]
            elif opt.nargs in ("1", "2"):
                want = int(opt.nargs)
                values = argv[i : i + want]
                i += want
                if len(values) < want or any(
                    v.startswith("-") and not NUMBER.match(v) for v in values
                ):
                    p.errors.append(f"{name}: missing value")
                    continue
            elif opt.nargs in ("+", "*", "?"):
                while i < len(argv) and not (argv[i].startswith("-") and not NUMBER.match(argv[i])):
                    values.append(argv[i])
                    i += 1
                    if opt.nargs == "?":
                        break
                if opt.nargs == "+" and not values:
                    p.errors.append(f"{name}: missing value")
                    continue
            for v in values if opt.nargs != "2" else values[:1]:
                if not _value_ok(opt, v):
                    p.errors.append(f"{name}: bad value {v!r}")
                if self.runtime == "tgi" and re.search(r"\s", v):
                    p.errors.append(f"{name}: {v!r} is word-split by the TGI entrypoint")
            p.values.setdefault(opt.key, []).append(values[0] if values else None)
        if len(p.positionals) > self.max_positionals:
            p.errors.append(f"unexpected positional arguments {p.positionals!r}")
        for key, occurrences in p.values.items():
            if len(occurrences) > 1 and not self.repeatable(key):
                p.errors.append(f"{key} given {len(occurrences)} times")
        if self.runtime == "llamacpp":
            for ts in p.values.get("--tensor-split", []):
                if ts and len(re.split(r"[,/]", ts)) > 15:
                    p.errors.append(f"--tensor-split {ts!r}: more than 15 parts")
        return p

    def _resolve(self, arg: str) -> tuple[str, str | None] | str | None:
        """The spelling a word that is no exact spelling resolves to, with the value
        attached to it: argparse's unique prefix of a long option (allow_abbrev) and
        `-Xvalue`; clap's `-Xvalue` / `-X=value`. A string: the parser's error."""
        if self.runtime == "tgi":
            short = arg[:2]
            if not arg.startswith("--") and short in self.options and len(arg) > 2:
                return short, arg[2:].removeprefix("=")
            return None
        if arg.startswith("--"):
            prefix, eq, value = arg.partition("=")
            hits = [s for s in self.options if s.startswith(prefix)]
            if len(hits) > 1:
                return f"ambiguous option {arg!r}: {hits[:4]}"
            return (hits[0], value if eq else None) if hits else None
        if arg[:2] in self.options:
            return arg[:2], arg[2:]
        hits = [s for s in self.options if s.startswith(arg)]
        if len(hits) > 1:
            return f"ambiguous option {arg!r}: {hits[:4]}"
        return (hits[0], None) if hits else None

    def repeatable(self, key: str) -> bool:
        return any(o.repeatable for o in self.options.values() if o.key == key)


def checkers(groups: dict[str, dict[str, tuple[str, ...]]]) -> dict[str, Checker]:
    """One checker per runtime; `groups`: runtime -> option -> its spellings (argparse only)."""
    llama = llamacpp_options()
    # repeatable llama.cpp options (each occurrence adds an entry)
    for s in ("--override-kv", "--override-tensor", "-ot"):
        o = llama[s]
        llama[s] = Option(o.key, o.nargs, o.kind, o.choices, True)
    return {
        # vLLM's FlexibleArgumentParser and llama.cpp's parser read `--a_b` as `--a-b`.
        "vllm": Checker("vllm", argparse_options("vllm", groups["vllm"]), 1, True, True),
        "sglang": Checker("sglang", argparse_options("sglang", groups["sglang"]), 0, True),
        "tgi": Checker("tgi", tgi_options(), 0, True),
        "llamacpp": Checker("llamacpp", llama, 0, False, True),
    }


def validators() -> dict[str, Any]:
    """vLLM's startup tables, as read off the release (the file's "validators")."""
    data: dict[str, Any] = _load("vllm")["validators"]
    return data


# TGI's launcher: without --max-total-tokens, the model's context capped at 4096.
TGI_DEFAULT_TOTAL_CAP = 4096


def _last(parsed: Parsed, key: str) -> str | None:
    values = parsed.values.get(key)
    return values[-1] if values else None


# Spellings that print something and exit 0 before serving (tests/unit/test_llama_server_real.py
# runs each of llama.cpp's against the pinned llama-server; argparse's -h/--help).
EXITS_AT_START = {
    "vllm": ("-h", "--help"),
    "sglang": ("-h", "--help"),
    "tgi": (),
    "llamacpp": (
        "-h",
        "--help",
        "--usage",
        "--version",
        "-cl",
        "--cache-list",
        "--completion-bash",
        "--list-devices",
    ),
}


def startup_errors(
    runtime: str,
    parsed: Parsed,
    platform: str = "cuda",
    members: int | None = None,
    serves_http: bool = True,
    gpus: int | None = None,
) -> list[str]:
    """What the release checks after parsing, before it serves: vLLM's quantization,
    KV-cache dtype and attention backend tables (per platform), its data-parallel ranks
    across multiNode members; TGI launcher's token limits and spelling conflicts."""
    errors = [f"{o} prints and exits 0" for o in parsed.options if o in EXITS_AT_START[runtime]]
    if runtime == "vllm" and serves_http:  # `vllm serve` runs headless: no API server
        if parsed.values.get("--headless"):
            errors.append("--headless: no API server on a pod the probes need")
        for key in ("--api-server-count", "-asc"):
            for count in parsed.values.get(key) or []:
                if count is not None and int(count) < 1:
                    errors.append(f"{key} {count}: no API server on a pod the probes need")
    if runtime == "vllm" and parsed.values.get("--headless"):
        for key in ("--api-server-count", "-asc"):
            for count in parsed.values.get(key) or []:
                if count is not None and int(count) > 0:
                    errors.append(f"--api-server-count={count} cannot be used with --headless")
    if runtime == "vllm":
        v = validators()
        quant = _last(parsed, "--quantization")
        if quant is not None:
            method = quant.lower()
            supported = v["quantization"]["platforms"].get(platform)
            if method not in v["quantization"]["methods"]:
                errors.append(f"Unknown quantization method: {quant}")
            elif supported is not None and method not in supported:
                errors.append(f"{quant} quantization is currently not supported in {platform}")
            elif method in v["quantization"]["deprecated"] and not parsed.values.get(
                "--allow-deprecated-quantization"
            ):
                errors.append(f"The quantization method {quant} is deprecated")
        kv = _last(parsed, "--kv-cache-dtype")
        if kv is not None and kv not in v["kv_cache_dtypes"]:
            errors.append(f"Invalid kv_cache_dtype: {kv!r}")
        backend = _last(parsed, "--attention-backend")
        known = backend is None or backend.lower() == "auto"
        if not known and str(backend).upper() not in v["attention_backends"]:
            errors.append(f"Unknown attention backend: {backend!r}")
        if members is not None:
            local = int(_last(parsed, "--data-parallel-size-local") or 1)
            dp = int(_last(parsed, "--data-parallel-size") or 1)
            if dp != members * local:
                errors.append(f"--data-parallel-size {dp} != {members} members x {local}")
    if runtime == "llamacpp" and platform != "cpu":
        # b10068 src/llama-model.cpp make_gpu_buft_list: row split takes the backend's
        # split buffer type, which only SYCL exports; llama-context.cpp: tensor split
        # needs flash attention.
        mode = _last(parsed, "--split-mode")
        if mode == "row" and platform != "xpu":
            errors.append("device CUDA0 does not support split buffers")
        if mode == "tensor" and _last(parsed, "--flash-attn") in ("off", "disabled", "false", "0"):
            errors.append("SPLIT_MODE_TENSOR requires flash_attn to be enabled")
        # Seen on b10068's CUDA build on an H200 (scripts/gpu-check, docs/runtimes.md): the
        # tensor-parallel Meta device made of one GPU aborts at warm-up.
        if mode == "tensor" and gpus == 1:
            errors.append("GGML_ASSERT(src_ss[0].axis == GGML_BACKEND_SPLIT_AXIS_2) failed")
    if runtime == "tgi":
        tokens, length = _last(parsed, "--max-input-tokens"), _last(parsed, "--max-input-length")
        if tokens is not None and length is not None:
            errors.append("Both `max_input_tokens` and `max_input_length` are set")
        given = tokens or length
        total = _last(parsed, "--max-total-tokens")
        limit = int(total) if total is not None else TGI_DEFAULT_TOTAL_CAP
        if given is not None and int(given) >= limit:
            errors.append("`max_input_tokens must be < `max_total_tokens`")
        shards = _last(parsed, "--num-shard")
        if _last(parsed, "--quantize") == "exl2" and shards and int(shards) > 1:
            errors.append("Sharding is currently not supported with `exl2` quantization")
    return errors


def versions() -> dict[str, str]:
    return {name: _load(name)["version"] for name in ("vllm", "sglang", "tgi", "llamacpp")}
