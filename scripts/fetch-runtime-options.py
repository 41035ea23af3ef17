#!/usr/bin/env python3
"""Read what a serving runtime's own argv parser accepts off one of its releases.

Writes tests/data/runtime-options/<runtime>.json in the format the contract test reads
(tests/unit/test_runtime_contract.py). Run it when a pinned image (runtimes/images.py)
moves to another version, then run the contract test against the new parser.

    fetch-runtime-options.py vllm 0.34.0        # pip-installs vllm==0.34.0 in a temporary
    fetch-runtime-options.py sglang 0.5.23      #   venv and builds the parser in-process

On a CPU-only machine, --light skips the GPU-only requirements (CUDA kernels; see
GPU_ONLY) and --torch names the torch to install instead of the release's. The
committed files were written with:

    fetch-runtime-options.py --light --torch 'torch==2.13.0+cpu' vllm 0.34.0
    fetch-runtime-options.py --light --torch 'torch==2.14.1' sglang 0.5.23

(SGLang needs its own torch: timm pulls a torchvision that only loads with that build.)

    fetch-runtime-options.py tgi 3.3.6          # launcher/src/main.rs at tag v3.3.6 (clap)
    fetch-runtime-options.py llamacpp b10068    # common/arg.cpp at that tag (common_arg)

vLLM's free-text options (--quantization, --kv-cache-dtype, --attention-backend) have no
parser choices: their values are checked at startup against tables in the release's
source. Those tables are read statically (ast, no import: the modules that hold them
import torch and CUDA kernels) into the file's "validators" section, from the installed
release or, with `--validators-from WHEEL`, from a wheel (`pip download --no-deps
vllm==0.34.0`) into an existing vllm.json:

    fetch-runtime-options.py vllm 0.34.0 --validators-from vllm-0.34.0-cp38-abi3-*.whl

`--source FILE` reads main.rs / arg.cpp from a local file instead of GitHub.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "runtime-options"
TGI_MAIN = (
    "https://raw.githubusercontent.com/huggingface/text-generation-inference/v{v}/"
    "launcher/src/main.rs"
)
LLAMACPP_ARG = "https://raw.githubusercontent.com/ggml-org/llama.cpp/{v}/common/arg.cpp"
LLAMACPP_NOTES = (
    "kind: void = flag without value; only options the server accepts; '--x=value' form is "
    "NOT accepted by llama.cpp; --tensor-split takes at most 15 comma/slash separated floats "
    "(llama_max_devices()=16, parts >= 16 rejected)"
)
TGI_NOTES = (
    "clap: a non-multiple option given twice is an error; bool fields are flags; the image "
    "entrypoint runs `text-generation-launcher $@` unquoted, so values with spaces are "
    "word-split"
)


# -- argparse (vLLM, SGLang): the parser is built by the runtime's own code ------------


def dump_argparse(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Every option string the parser accepts, with nargs, choices and the type's name.

    Read from the parser's registry of option strings, not from each action's
    option_strings: vLLM 0.34 hides spellings it still accepts (`--no-enable-x`) by
    dropping them from the action after registering them.
    """
    positionals = [a.dest for a in parser._actions if not a.option_strings]
    options: dict[str, Any] = {}
    for s, action in parser._option_string_actions.items():
        nargs = action.nargs
        choices = action.choices
        if isinstance(choices, (set, frozenset)):
            choices = sorted(choices, key=str)  # a set prints in no fixed order
        options[s] = {
            "takes_value": nargs != 0,
            "nargs": str(nargs),
            "choices": list(choices) if choices is not None else None,
            "type": getattr(action.type, "__name__", str(action.type)),
        }
    return {"positionals": positionals, "options": dict(sorted(options.items()))}


# Read now: inspect reads the file again when called, which may have changed meanwhile.
DUMP_SOURCE = inspect.getsource(dump_argparse)

# `vllm serve`'s own parser: the serve subcommand registered on the `vllm` CLI exactly
# as vllm.entrypoints.cli.main does (older releases: make_arg_parser plus the positional).
VLLM_PARSER = """
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    top = FlexibleArgumentParser(prog="vllm")
    parser = ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    parser = make_arg_parser(FlexibleArgumentParser())
    parser.add_argument("model_tag", nargs="?")
"""
SGLANG_PARSER = """
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
"""
# vLLM picks its platform while building the parser's defaults; without a GPU it finds
# none unless told. On CPU one choice list is narrower than on CUDA (0.34:
# --mm-processor-device has no "cuda"), an option the controller never emits.
PARSER_ENV = {"vllm": {"VLLM_TARGET_DEVICE": "cpu"}, "sglang": {}}

# Requirements that only load GPU kernels or CUDA libraries at run time (and the torch
# stack, installed from --torch instead): the parser's import path does not need them
# and most have no CPU-only wheel. `--light` leaves them out.
GPU_ONLY = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|triton|pynvvideocodec|flashinfer|"
    r"apache-tvm-ffi|tilelang|nvidia|nvtx|nvshmem|cuda-python|fastsafetensors|"
    r"instanttensor|quack-kernels|tokenspeed|humming-kernels|sgl-|sglang-kernel|"
    r"flash-attn|xformers|torch-memory-saver|deepseek-recipe|py-spy|kernels|numba)",
    re.I,
)
# Runs in the venv: the installed release's requirements for this platform.
REQUIREMENTS = """
import importlib.metadata, sys
from packaging.requirements import Requirement
for r in importlib.metadata.requires(sys.argv[1]) or []:
    req = Requirement(r)
    if req.marker is None or req.marker.evaluate({"extra": ""}):
        print(req.name, str(req).split(";")[0], sep="\\t")
"""


def _pip(python: str, *args: str) -> None:
    subprocess.run([python, "-m", "pip", "install", "-q", *args], check=True)


def from_release(
    package: str, version: str, build: str, light: bool = False, torch: str = "torch"
) -> dict[str, Any]:
    """pip-install the release into a throwaway venv and dump its parser there.

    light: the release without its dependencies, then every requirement except the
    GPU-only ones (GPU_ONLY) and torch from `torch` (e.g. a CPU wheel): the parser is
    still the release's own code, built the way its CLI builds it.
    """
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        if not light:
            _pip(python, f"{package}=={version}")
        else:
            _pip(python, "--no-deps", f"{package}=={version}", "packaging")
            listed = subprocess.run(
                [python, "-c", REQUIREMENTS, package], check=True, capture_output=True, text=True
            ).stdout.splitlines()
            keep = [
                spec
                for name, spec in (line.split("\t") for line in listed)
                if not GPU_ONLY.match(name.replace("_", "-"))
            ]
            _pip(python, torch, *keep)
        code = "\n".join(
            [
                "import argparse, json",
                "from typing import Any",
                DUMP_SOURCE,
                build,
                "print(json.dumps(dump_argparse(parser)))",
            ]
        )
        env = {**os.environ, **PARSER_ENV.get(package, {})}
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
        if out.returncode:
            sys.stderr.write(out.stderr)
            raise SystemExit(f"building {package} {version}'s parser failed")
        data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        if package == "vllm":
            site = subprocess.run(
                [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            data["validators"] = vllm_validators(dir_reader(Path(site)))
    return data


# -- vLLM's startup validators: tables in its source, read statically ------------------

# release file -> what it holds (read by vllm_validators)
VLLM_SOURCES = {
    "quantization": "vllm/model_executor/layers/quantization/__init__.py",
    "cache": "vllm/config/cache.py",
    "attention": "vllm/v1/attention/backends/registry.py",
    "platforms": "vllm/platforms/{}.py",
}
VLLM_PLATFORMS = ("cuda", "rocm", "cpu", "xpu")
VALIDATOR_NOTES = (
    "startup checks, not the parser: quantization is lower-cased, then must be one of "
    "methods (ModelConfig._verify_quantization) and of the platform's supported list "
    "when it has one (Platform.verify_quantization; null = any); a deprecated method "
    "also needs --allow-deprecated-quantization. kv_cache_dtype must be one of "
    "kv_cache_dtypes exactly (CacheConfig._validate_cache_dtype). attention_backend is "
    "'auto' or, upper-cased, one of attention_backends (AttentionConfig."
    "validate_backend_before; CUSTOM is left out: it must be registered by a plugin)."
)


def _assigned(tree: ast.Module, name: str, cls: str | None = None) -> ast.expr | None:
    """The value assigned to `name` at module level (or in class `cls`)."""
    body: list[ast.stmt] = tree.body
    if cls is not None:
        found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
        if not found:
            return None
        body = found[0].body
    for node in body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.value
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == name:
            return node.value  # type: ignore[union-attr]
    return None


def _strings(node: ast.expr | None) -> list[str]:
    """The strings of a list literal or of a Literal[...] subscript."""
    if isinstance(node, ast.Subscript):
        node = node.slice
    elts = node.elts if isinstance(node, (ast.List, ast.Tuple)) else []
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _platform_class(tree: ast.Module) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Platform"):
            return node.name
    return None


def vllm_validators(read: Callable[[str], str | None]) -> dict[str, Any]:
    """What vLLM checks the free-text options against at startup; read(path) gives a
    release file's text (None when the release has no such file)."""

    def tree(path: str) -> ast.Module:
        text = read(path)
        if text is None:
            raise SystemExit(f"{path} is not in the release")
        return ast.parse(text)

    quant = tree(VLLM_SOURCES["quantization"])
    platforms: dict[str, list[str] | None] = {}
    for name in VLLM_PLATFORMS:
        text = read(VLLM_SOURCES["platforms"].format(name))
        if text is None:
            continue
        module = ast.parse(text)
        cls = _platform_class(module)
        listed = _strings(_assigned(module, "supported_quantization", cls)) if cls else []
        platforms[name] = listed or None  # an empty list means every method
    enum = [
        n
        for n in tree(VLLM_SOURCES["attention"]).body
        if isinstance(n, ast.ClassDef) and n.name == "AttentionBackendEnum"
    ]
    backends = [
        t.id
        for node in (enum[0].body if enum else [])
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id.isupper() and t.id != "CUSTOM"
    ]
    return {
        "notes": VALIDATOR_NOTES,
        "quantization": {
            "methods": _strings(_assigned(quant, "QuantizationMethods")),
            "deprecated": _strings(_assigned(quant, "DEPRECATED_QUANTIZATION_METHODS")),
            "platforms": platforms,
        },
        "kv_cache_dtypes": _strings(_assigned(tree(VLLM_SOURCES["cache"]), "CacheDType")),
        "attention_backends": ["auto", *backends],
    }


def wheel_reader(wheel: Path) -> Callable[[str], str | None]:
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())

    def read(path: str) -> str | None:
        return archive.read(path).decode() if path in names else None

    return read


def dir_reader(root: Path) -> Callable[[str], str | None]:
    def read(path: str) -> str | None:
        file = root / path
        return file.read_text() if file.is_file() else None

    return read


# -- clap (TGI): the launcher's Args struct and its ValueEnums -------------------------


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


def clap_enums(source: str) -> dict[str, list[str]]:
    enums: dict[str, list[str]] = {}
    pattern = r"#\[derive\([^)]*ValueEnum[^)]*\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?enum\s+(\w+)"
    for m in re.finditer(pattern + r"\s*\{(.*?)\n\}", source, re.S):
        values, name_attr = [], None
        for line in m.group(2).splitlines():
            line = line.strip()
            attr = re.match(r'#\[(?:clap|value)\(name\s*=\s*"([^"]+)"\)\]', line)
            if attr:
                name_attr = attr.group(1)
            variant = re.match(r"([A-Z]\w*)\s*[,(]", line)
            if variant:
                values.append(name_attr or _kebab(variant.group(1)))
                name_attr = None
        enums[m.group(1)] = values
    return enums


def clap_args(source: str) -> dict[str, Any]:
    enums = clap_enums(source)
    body = re.search(r"struct Args\s*\{(.*?)\n\}", source, re.S)
    if body is None:
        raise SystemExit("no `struct Args` in the launcher source")
    options: dict[str, Any] = {}
    attrs = ""
    for raw in body.group(1).splitlines():
        line = raw.strip()
        if line.startswith("#[clap(") or line.startswith("#[arg("):
            attrs += line
            continue
        field = re.match(r"(?:pub\s+)?(\w+)\s*:\s*(.+?),?$", line)
        if not field or line.startswith("//"):
            continue
        name, ty = field.group(1), field.group(2).rstrip(",")
        if not re.search(r"\blong\b", attrs):
            attrs = ""
            continue
        long = re.search(r'long\s*=\s*"([^"]+)"', attrs)
        short = re.search(r"short\s*=\s*'(.)'", attrs)
        optional = ty.startswith("Option<")
        inner = ty[len("Option<") : -1] if optional else ty
        multiple = inner.startswith("Vec<")
        inner = inner[len("Vec<") : -1] if multiple else inner
        default = re.search(r'default_value\s*=\s*"([^"]*)"', attrs)
        if inner == "bool":
            value = "bool" if optional else "flag"
        elif inner in enums:
            value = "enum"
        elif inner == "String":
            value = "string"
        elif inner in ("f32", "f64"):
            value = "float"
        else:
            value = inner
        options["--" + (long.group(1) if long else name.replace("_", "-"))] = {
            "short": (
                "-" + (short.group(1) if short else name[0])
                if re.search(r"\bshort\b", attrs)
                else None
            ),
            "value": value,
            "choices": enums.get(inner),
            "multiple": multiple,
            "default": default.group(1) if default else None,
        }
        attrs = ""
    return {"enums": enums, "options": dict(sorted(options.items()))}


# -- llama.cpp: the common_arg table of common/arg.cpp ---------------------------------


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis that closes the one at `start` (strings skipped)."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == "'":
            i += 3 if text[i + 1] != "\\" else 4
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced parentheses")


HANDLER_KINDS = {
    (): "void",
    ("std::string",): "string",
    ("int",): "int",
    ("bool",): "bool",
    ("std::string", "std::string"): "str_str",
}


def llamacpp_args(source: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for m in re.finditer(r"add_opt\(common_arg\(", source):
        end = _balanced(source, m.start() + len("add_opt"))
        call = source[m.start() : end]
        lists = re.findall(r"\{([^{}]*)\}", call.split("[", 1)[0])
        aliases = re.findall(r'"(-[^"]+)"', lists[0]) if lists else []
        negative = (
            re.findall(r'"(-[^"]+)"', lists[1])
            if len(lists) > 1 and re.match(r"\s*\{[^{}]*\}\s*,\s*\{", call[len(m.group(0)) :])
            else []
        )
        handler = re.search(r"\[\]\s*\(\s*common_params\s*&\s*\w+\s*((?:,[^)]*)?)\)", call)
        params = tuple(
            re.sub(r"\b(const|&)\b|&", " ", p).split()[-2]
            for p in (handler.group(1).split(",")[1:] if handler else [])
        )
        kind = HANDLER_KINDS.get(params, "string")
        examples = re.search(r"set_examples\(\{([^}]*)\}\)", call)
        excludes = re.search(r"set_excludes\(\{([^}]*)\}\)", call)
        in_server = examples is None or re.search(
            r"LLAMA_EXAMPLE_(SERVER|COMMON)\b", examples.group(1)
        )
        if not aliases or not in_server:
            continue
        if excludes and "LLAMA_EXAMPLE_SERVER" in excludes.group(1):
            continue
        canonical = aliases[-1]
        options[canonical] = {
            "canonical": canonical,
            "aliases": aliases,
            "negative": negative,
            "kind": kind,
            "takes_value": kind != "void",
        }
    return {"options": dict(sorted(options.items()))}


def _read(url: str, source: str | None) -> str:
    if source:
        return Path(source).read_text()
    with urllib.request.urlopen(url, timeout=60) as response:
        text: str = response.read().decode()
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("runtime", choices=("vllm", "sglang", "tgi", "llamacpp"))
    p.add_argument("version", help="release (vllm, sglang, tgi) or llama.cpp tag (bNNNN)")
    p.add_argument("--source", help="main.rs or arg.cpp from a local file")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument(
        "--light",
        action="store_true",
        help="vllm/sglang: the release with --no-deps plus its requirements minus the\n"
        "GPU-only ones (no CUDA wheels needed; the parser is the release's own)",
    )
    p.add_argument(
        "--torch",
        default="torch",
        help="with --light: the torch to install (e.g. a CPU wheel: 'torch==2.13.0+cpu')",
    )
    p.add_argument(
        "--validators-from",
        type=Path,
        metavar="WHEEL",
        help="vllm: only (re)write the validators section of the existing vllm.json,\n"
        "read from this wheel of the release (no install)",
    )
    a = p.parse_args(argv)
    data: dict[str, Any]
    if a.runtime == "vllm" and a.validators_from:
        path = a.out / "vllm.json"
        data = json.loads(path.read_text())
        if data["version"] != a.version:
            raise SystemExit(f"{path} describes vllm {data['version']}, not {a.version}")
        data["validators"] = vllm_validators(wheel_reader(a.validators_from))
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {path}: validators of {a.validators_from.name}")
        return 0
    if a.runtime == "vllm":
        data = {"runtime": "vllm", "version": a.version}
        data["source"] = f"PyPI vllm {a.version}, parser of `vllm serve` built in-process"
        data.update(from_release("vllm", a.version, VLLM_PARSER, a.light, a.torch))
    elif a.runtime == "sglang":
        data = {"runtime": "sglang", "version": a.version}
        data["source"] = f"PyPI sglang {a.version}, ServerArgs parser built in-process"
        data.update(from_release("sglang", a.version, SGLANG_PARSER, a.light, a.torch))
    elif a.runtime == "tgi":
        data = {"runtime": "text-generation-launcher (TGI)", "version": a.version}
        data["notes"] = TGI_NOTES
        data.update(clap_args(_read(TGI_MAIN.format(v=a.version), a.source)))
    else:
        data = {"runtime": "llama.cpp llama-server", "version": a.version}
        data["notes"] = LLAMACPP_NOTES
        data.update(llamacpp_args(_read(LLAMACPP_ARG.format(v=a.version), a.source)))
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"{a.runtime}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path}: {len(data['options'])} options")
    return 0


if __name__ == "__main__":
    sys.exit(main())
