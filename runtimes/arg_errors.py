"""Runtime settings and extraArgs the runtime would exit on, seen from the spec alone.

The webhook denies them at admission and the reconciler reports them
(`RuntimeConfigured=False InvalidRuntimeConfig`), each naming the field: a value the
pinned release does not accept (its parser's choices or its startup checks,
accepted_values.py), a spelling its parser does not read, a bind address the probes and
the Service cannot reach, a second model for vLLM, TGI token limits its launcher
refuses, a multiNode data-parallel size other than the member pods.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from api.inferenceservice import (
    LLAMACPP_CACHE_TYPES,
    LLAMACPP_QUANTIZED_CACHE_TYPES,
    SERVED_RUNTIMES,
    InferenceServiceSpec,
)
from runtimes.accepted_values import (
    CHOICES,
    VLLM_ATTENTION_BACKENDS,
    VLLM_DEPRECATED_QUANTIZATION,
    VLLM_FLAGS_WITHOUT_VALUE,
    VLLM_KV_CACHE_DTYPES,
    VLLM_MULTI_VALUE,
    VLLM_PREFIXED_WITH_VALUE,
    VLLM_QUANTIZATION,
    VLLM_VERSION,
)
from runtimes.parsers import resolve, unknown_options, version

NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "llamacpp": "llama.cpp"}
# Runtimes whose parser reads `--a_b` as `--a-b` (vLLM's FlexibleArgumentParser,
# llama.cpp's common_params_parse); SGLang's argparse and TGI's clap do not.
UNDERSCORES_READ = ("vllm", "llamacpp")
# Spellings a user reaches for that the runtime's parser does not have.
WRONG_SPELLINGS: dict[str, dict[str, str]] = {
    "vllm": {
        "--hostname": "vLLM's bind address option is --host",
        "--task": "vLLM 0.34 has no --task: use --runner / --convert",
    },
    "sglang": {"--hostname": "SGLang's bind address option is --host"},
    "tgi": {"--host": "TGI's bind address option is --hostname"},
    "llamacpp": {"--hostname": "llama.cpp's bind address option is --host"},
}
BIND_OPTIONS = {"vllm": "--host", "sglang": "--host", "tgi": "--hostname", "llamacpp": "--host"}
LOOPBACK = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[?(::|(0{1,4}:){7})0{0,3}1\]?)$", re.I)
# TGI's launcher (3.3.6 launcher/src/main.rs, `max_default`): without --max-total-tokens
# it uses the model's context capped at 4096, so max_input_tokens >= 4096 always fails.
TGI_DEFAULT_TOTAL_CAP = 4096
# Options that make the runtime print something and exit 0 before it serves: the pod
# restarts forever. llama.cpp b10068 (common/arg.cpp): -h/--help/--usage and
# --completion-bash print and exit from common_params_parse, --version, -cl/--cache-list
# and --list-devices exit in their handlers; vLLM's and SGLang's argparse print help.
# TGI's clap -h/--help/-V/--version are not in its table: refused as unknown options.
EXITS_AT_START: dict[str, tuple[str, ...]] = {
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
# What each parser says of an option whose value is missing.
MISSING_VALUE = {
    "vllm": "expected one argument",
    "sglang": "expected one argument",
    "tgi": "a value is required",
    "llamacpp": "expected value for argument",
}

# Options whose values are checked: option -> (its spellings, the typed field filling it).
CHECKED: dict[str, dict[str, tuple[tuple[str, ...], str | None]]] = {
    "vllm": {
        "--quantization": (("--quantization", "-q"), "vllmConfig.quantization"),
        "--kv-cache-dtype": (("--kv-cache-dtype",), "vllmConfig.kvCacheDtype"),
        "--attention-backend": (("--attention-backend",), "vllmConfig.attentionBackend"),
        "--dtype": (("--dtype",), "vllmConfig.dtype"),
        "--data-parallel-size": (("--data-parallel-size", "-dp"), None),
        "--data-parallel-size-local": (("--data-parallel-size-local", "-dpl"), None),
    },
    "sglang": {"--quantization": (("--quantization",), "sglangConfig.quantization")},
    "tgi": {
        "--quantize": (("--quantize",), "tgiConfig.quantize"),
        "--dtype": (("--dtype",), "tgiConfig.dtype"),
        "--max-input-tokens": (
            ("--max-input-tokens", "--max-input-length"),
            "tgiConfig.maxInputLength",
        ),
        "--max-total-tokens": (("--max-total-tokens",), "tgiConfig.maxTotalTokens"),
    },
    "llamacpp": {},
}
for _runtime, _option in BIND_OPTIONS.items():
    CHECKED[_runtime][_option] = ((_option,), None)


@dataclass(frozen=True)
class Arg:
    """One option in extraArgs: where it is, its name as the runtime reads it, its value."""

    index: int
    name: str
    value: str | None
    value_index: int


def option_name(runtime: str, arg: str) -> str:
    """The option name of `--x=v` / `--x`, with underscores read as the runtime reads them."""
    name = arg.partition("=")[0]
    if runtime in UNDERSCORES_READ and name.startswith("--"):
        key, dot, rest = name.partition(".")  # vLLM: `--a_b.c_d` renames only `a_b`
        name = key.replace("_", "-") + dot + rest
    return name


def _is_value(word: str) -> bool:
    return not word.startswith("-") or bool(re.match(r"^-\d", word))


def extra_options(runtime: str, args: tuple[str, ...]) -> Iterator[Arg]:
    """The option words of extraArgs as the runtime's parser reads them: `name` is the
    spelling it resolves to (an argparse abbreviation to its full spelling, `-p9000` to
    `-p`), or the word's own name where the parser does not know it."""
    for opt in resolve(runtime, args):
        yield Arg(opt.index, opt.option or opt.name, opt.value, opt.value_index)


def _vllm_takes_value(name: str) -> bool:
    if name in VLLM_FLAGS_WITHOUT_VALUE:
        return False
    return not re.match(r"^--(no|disable|enable)-", name) or name in VLLM_PREFIXED_WITH_VALUE


def vllm_positionals(args: tuple[str, ...]) -> list[int]:
    """Indexes of bare words in vLLM extraArgs that no option takes as its value."""
    found = []
    takes = "none"  # what the last option still takes: "none", "one" or "many"
    for i, arg in enumerate(args):
        if not _is_value(arg):
            name = option_name("vllm", arg)
            many = name in VLLM_MULTI_VALUE
            takes = (
                "none" if "=" in arg or not _vllm_takes_value(name) else "many" if many else "one"
            )
        elif takes == "one":
            takes = "none"
        elif takes == "none":
            found.append(i)
    return found


def _listed(values: tuple[str, ...]) -> str:
    return ", ".join(values) if len(values) <= 12 else ", ".join(values[:12]) + ", ..."


def value_error(runtime: str, option: str, value: str, args: tuple[str, ...]) -> str | None:
    """What the pinned release says of this value, if it refuses it."""
    name = NAMES[runtime]
    if runtime == "vllm" and option == "--quantization":
        method = value.lower()
        if method not in VLLM_QUANTIZATION:
            return (
                f"{value!r} is not a quantization method of vLLM {VLLM_VERSION} (it exits "
                f"with 'Unknown quantization method'; it knows {_listed(VLLM_QUANTIZATION)})"
            )
        allowed = any(option_name("vllm", a) == "--allow-deprecated-quantization" for a in args)
        if method in VLLM_DEPRECATED_QUANTIZATION and not allowed:
            return (
                f"{value!r} is deprecated in vLLM {VLLM_VERSION}: it starts only with "
                "--allow-deprecated-quantization in extraArgs"
            )
    elif runtime == "vllm" and option == "--kv-cache-dtype":
        if value not in VLLM_KV_CACHE_DTYPES:
            return (
                f"{value!r} is not a KV-cache dtype of vLLM {VLLM_VERSION} (one of "
                f"{_listed(VLLM_KV_CACHE_DTYPES)})"
            )
    elif runtime == "vllm" and option == "--attention-backend":
        if value.lower() != "auto" and value.upper() not in VLLM_ATTENTION_BACKENDS:
            return (
                f"{value!r} is not an attention backend of vLLM {VLLM_VERSION} (auto or one "
                f"of {_listed(VLLM_ATTENTION_BACKENDS[1:])})"
            )
    elif option in CHOICES[runtime] and value not in CHOICES[runtime][option]:
        return f"{value!r} is not one of {', '.join(CHOICES[runtime][option])} ({name}'s parser)"
    elif option == BIND_OPTIONS[runtime] and LOOPBACK.match(value):
        return (
            f"{value!r} is a loopback address: the probes and the Service reach the pod on "
            "its own IP, so the runtime would never be ready (leave it out: we bind 0.0.0.0)"
        )
    return None


def _typed_values(service: InferenceServiceSpec) -> dict[str, object]:
    s = service.settings
    return {
        "vllmConfig.quantization": s.quantization,
        "vllmConfig.kvCacheDtype": s.kv_cache_dtype,
        "vllmConfig.attentionBackend": s.attention_backend,
        "vllmConfig.dtype": s.dtype,
        "sglangConfig.quantization": s.quantization,
        "tgiConfig.quantize": s.quantization,
        "tgiConfig.dtype": s.dtype,
        "tgiConfig.maxInputLength": s.max_input_length,
        "tgiConfig.maxTotalTokens": s.max_total_tokens,
    }


@dataclass(frozen=True)
class Setting:
    """The value an option gets (extraArgs win over the typed field) and where it is."""

    value: str
    where: str


def effective(service: InferenceServiceSpec) -> dict[str, Setting]:
    runtime = service.runtime
    table = CHECKED[runtime]
    spelled = {s: option for option, (spellings, _) in table.items() for s in spellings}
    typed = _typed_values(service)
    out: dict[str, Setting] = {}
    for option, (_, field) in table.items():
        value = typed.get(field) if field else None
        if value is not None:
            out[option] = Setting(str(value), f"spec.{field}")
    for arg in extra_options(runtime, service.extra_args):
        given = spelled.get(arg.name)
        if given and arg.value is not None:
            out[given] = Setting(arg.value, f"spec.extraArgs[{arg.value_index}]: {arg.name}")
    return out


def _spelling_errors(runtime: str, args: tuple[str, ...]) -> Iterator[str]:
    name = NAMES[runtime]
    told = set()
    for opt in resolve(runtime, args):
        where = f"spec.extraArgs[{opt.index}]"
        written = args[opt.index].partition("=")[0]
        full = f" ({written} is {opt.option})" if opt.option and written != opt.option else ""
        if opt.option in EXITS_AT_START[runtime]:
            told.add(opt.index)
            yield (
                f"{where}: {opt.option}{full} makes {name} print and exit 0 instead of "
                "serving: the pod would restart forever"
            )
        elif opt.missing:
            told.add(opt.index)
            yield (
                f"{where}: {opt.option}{full} takes a value and none follows: {name} "
                f"exits with '{MISSING_VALUE[runtime]}'"
            )
    for arg in extra_options(runtime, args):
        where = f"spec.extraArgs[{arg.index}]"
        hint = WRONG_SPELLINGS[runtime].get(arg.name)
        if arg.index in told:
            continue
        if hint:
            told.add(arg.index)
            yield f"{where}: {arg.name} is not an option of {name} ({hint})"
        elif runtime not in UNDERSCORES_READ and "_" in arg.name and arg.name.startswith("--"):
            told.add(arg.index)
            yield (
                f"{where}: {arg.name} is not an option of {name}: its parser does not read "
                f"underscores (write {arg.name.replace('_', '-')})"
            )
    # Any other word the pinned parser does not know: the runtime would exit on it.
    for unknown in unknown_options(runtime, args):
        if unknown.index not in told:
            why = f" ({unknown.why})" if unknown.why else ""
            yield (
                f"spec.extraArgs[{unknown.index}]: {unknown.word} is not an option of "
                f"{name} {version(runtime)}{why}"
            )
    if runtime == "vllm":
        for i in vllm_positionals(args):
            yield (
                f"spec.extraArgs[{i}]: {args[i]!r} is a bare word no option takes: vLLM would "
                "read it as a second model (the model comes from the Model's source; "
                "`--model X` in extraArgs replaces it)"
            )


def _tgi_limits(settings: dict[str, Setting]) -> Iterator[str]:
    given, total = settings.get("--max-input-tokens"), settings.get("--max-total-tokens")
    if given is None or not given.value.isdigit():
        return
    n = int(given.value)
    if total is not None and total.value.isdigit() and n >= int(total.value):
        yield (
            f"{given.where} ({n}) must be below {total.where} ({total.value}): TGI's "
            "launcher exits with 'max_input_tokens must be < max_total_tokens'"
        )
    elif total is None and n >= TGI_DEFAULT_TOTAL_CAP:
        yield (
            f"{given.where} ({n}) needs tgiConfig.maxTotalTokens above it: without it TGI's "
            f"launcher sets max_total_tokens to at most {TGI_DEFAULT_TOTAL_CAP} and exits"
        )


def _multi_node(service: InferenceServiceSpec, settings: dict[str, Setting]) -> Iterator[str]:
    mn = service.multi_node
    dp = settings.get("--data-parallel-size")
    if mn is None or dp is None or not dp.value.isdigit():
        return
    local = settings.get("--data-parallel-size-local")
    per_pod = int(local.value) if local and local.value.isdigit() else 1
    ranks = len(mn.members) * per_pod
    if int(dp.value) != ranks:
        yield (
            f"{dp.where} ({dp.value}) must be the data-parallel ranks the "
            f"{len(mn.members)} member pods run ({ranks}): vLLM would wait for ranks no pod "
            "starts, or give a member a rank beyond the size"
        )


def _vllm_api_server(service: InferenceServiceSpec) -> Iterator[str]:
    """vLLM serves HTTP only without --headless and with --api-server-count >= 1
    (`vllm serve` runs headless otherwise). extraArgs reach every pod, the single one
    and a multiNode group's rank 0 too, whose probes and Service need the API server.
    The members after rank 0 get --headless from us, which vLLM refuses beside an
    explicit --api-server-count of 1 or more."""
    for opt in resolve("vllm", service.extra_args):
        where = f"spec.extraArgs[{opt.index}]"
        if opt.option == "--headless":
            yield (
                f"{where}: --headless starts no API server: the probes would never pass "
                "(multiNode members after rank 0 run headless without it)"
            )
        elif opt.option in ("--api-server-count", "-asc") and opt.value is not None:
            try:
                count = int(opt.value)
            except ValueError:
                continue
            if count < 1:
                yield (
                    f"spec.extraArgs[{opt.value_index}]: {opt.option} {count} starts no API "
                    "server (vLLM then runs headless): the probes would never pass"
                )
            elif service.multi_node is not None:
                yield (
                    f"spec.extraArgs[{opt.value_index}]: {opt.option} {count}: the multiNode "
                    "members after rank 0 run --headless, and vLLM exits on "
                    "'--api-server-count cannot be used with --headless'"
                )


def runtime_arg_errors(service: InferenceServiceSpec) -> list[str]:
    """Why the pinned runtime would exit on this spec, by field path (empty: it starts)."""
    runtime = service.runtime
    if runtime not in SERVED_RUNTIMES:
        return []
    errors = list(_spelling_errors(runtime, service.extra_args))
    settings = effective(service)
    for option, setting in settings.items():
        problem = value_error(runtime, option, setting.value, service.extra_args)
        if problem:
            errors.append(f"{setting.where}: {problem}")
    if runtime == "tgi":
        errors += _tgi_limits(settings)
    if runtime == "vllm":
        errors += _multi_node(service, settings)
        errors += _vllm_api_server(service)
    if runtime == "llamacpp":
        errors += _llamacpp_cache(service)
        errors += _llamacpp_host(service)
    return errors


def _llamacpp_host(service: InferenceServiceSpec) -> list[str]:
    """llama-server b10068 (tools/server/server-http.cpp, server_http_context::start) binds a
    --host that ends in '.sock' as a UNIX socket and opens no TCP port: the probes and
    the Service would never reach it. The last --host is the one the parser keeps."""
    hosts = [a for a in extra_options("llamacpp", service.extra_args) if a.name == "--host"]
    last = hosts[-1] if hosts else None
    if last is None or last.value is None or not last.value.endswith(".sock"):
        return []
    return [
        f"spec.extraArgs[{last.value_index}]: --host {last.value!r} ends in '.sock', which "
        "llama-server binds as a UNIX socket, opening no TCP port: the container port, "
        "probes and Service would never reach it. Drop it (the controller binds the pod's "
        "address), or give an IP address or host name"
    ]


# llama.cpp's common_arg_utils::is_falsey: the --flash-attn values that turn it off.
FLASH_ATTN_OFF = ("off", "disabled", "false", "0")
_LLAMACPP_SPELLINGS = {
    "--cache-type-k": ("--cache-type-k", "-ctk"),
    "--cache-type-v": ("--cache-type-v", "-ctv"),
    "--flash-attn": ("--flash-attn", "-fa"),
}
_LLAMACPP_FIELDS = {"--cache-type-k": "cacheTypeK", "--cache-type-v": "cacheTypeV"}


def _llamacpp_cache(service: InferenceServiceSpec) -> list[str]:
    """What exits llama-server at load that extraArgs can still say (the typed fields are
    checked by the schema and its CEL rule): a cache type outside its list, a quantized V
    cache with flash attention off."""
    s = service.settings
    fa = None if s.flash_attention is None else ("on" if s.flash_attention else "off")
    values: dict[str, str | None] = {
        "--cache-type-k": s.cache_type_k,
        "--cache-type-v": s.cache_type_v,
        "--flash-attn": fa,
    }
    for arg in extra_options("llamacpp", service.extra_args):
        for option, spellings in _LLAMACPP_SPELLINGS.items():
            if arg.name in spellings and arg.value is not None:
                values[option] = arg.value
    errors = []
    for option, field in _LLAMACPP_FIELDS.items():
        value = values[option]
        if value is not None and value not in LLAMACPP_CACHE_TYPES:
            errors.append(
                f"spec.{field} (or {option} in extraArgs): {value!r} is not one of "
                f"{', '.join(LLAMACPP_CACHE_TYPES)}"
            )
    fa, v = values["--flash-attn"], values["--cache-type-v"]
    if fa in FLASH_ATTN_OFF and v in LLAMACPP_QUANTIZED_CACHE_TYPES:
        errors.append(
            f"spec.cacheTypeV / spec.flashAttention (or --cache-type-v / --flash-attn in "
            f"extraArgs): llama.cpp needs flash attention for the quantized V cache "
            f"{v!r}, and it is set {fa!r}; llama-server would exit at load"
        )
    return errors
