#!/usr/bin/env python3
"""Write runtimes/data/runtime_options.json: every option spelling each pinned runtime's parser
accepts, grouped by how many values it takes (runtimes/parsers.py walks extraArgs with it).

vLLM, SGLang and TGI come from the contract files (tests/data/runtime-options/*.json, read
off the pinned releases' parsers). llama.cpp comes from the pinned llama-server's own
`--help` (b10068, built by scripts/build-llama-server.sh): the contract's llamacpp.json was
read off a later tree and lists spellings b10068 does not have.

    scripts/runtime-spellings.py                 # llama-server from build-llama-server.sh --path
    scripts/runtime-spellings.py --llama-server PATH

tests/unit/test_runtime_spellings.py checks the committed file against both sources.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTRACT = REPO / "tests" / "data" / "runtime-options"
OUT = REPO / "runtimes" / "data" / "runtime_options.json"
BUILD_SCRIPT = REPO / "scripts" / "build-llama-server.sh"
LLAMACPP_VERSION = "b10068"  # the release build-llama-server.sh builds and the images pin

# One help line starts with the spellings (`-c,    --ctx-size N`): each a word after a comma.
_SPELLING = re.compile(r"(--?[A-Za-z0-9][\w.-]*)(,\s*|\s|$)")
# llama.cpp prints a second value hint after the first (`START END`): two values.
_TWO_VALUES = re.compile(r"^[A-Z_]+ [A-Z_]+$")


def llama_help_options(help_text: str) -> dict[str, str]:
    """Spelling -> nargs ("0", "1" or "2") off `llama-server --help`: the option lines
    start at column 0 with `-`, the value hint follows the last spelling."""
    out: dict[str, str] = {}
    for line in help_text.splitlines():
        if not line.startswith("-") or line.startswith("-----"):
            continue
        rest, spellings = line, []
        while match := _SPELLING.match(rest):
            spellings.append(match[1])
            rest = rest[match.end() :]
            if not match[2].startswith(","):
                break
        hint = "" if rest.startswith(" ") else re.split(r"\s{2,}", rest.strip(), maxsplit=1)[0]
        nargs = "0" if not hint else "2" if _TWO_VALUES.match(hint) else "1"
        for s in spellings:
            out[s] = nargs
    return out


def _contract(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((CONTRACT / f"{name}.json").read_text())
    return data


def argparse_options(name: str) -> dict[str, str]:
    options = _contract(name)["options"]
    assert isinstance(options, dict)
    return {s: {"None": "1"}.get(o["nargs"], o["nargs"]) for s, o in options.items()}


def tgi_options() -> dict[str, str]:
    options = _contract("tgi")["options"]
    assert isinstance(options, dict)
    out = {}
    for long, o in options.items():
        nargs = "0" if o["value"] == "flag" else "1"
        out[long] = nargs
        if o["short"]:
            out[o["short"]] = nargs
    return out


def _grouped(options: dict[str, str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for spelling, nargs in sorted(options.items()):
        groups.setdefault(nargs, []).append(spelling)
    return dict(sorted(groups.items()))


def build(llama_help: str) -> dict[str, object]:
    def version(name: str) -> str:
        return str(_contract(name)["version"]).split()[0]

    return {
        "vllm": {
            "version": version("vllm"),
            "parser": "argparse",
            "options": _grouped(argparse_options("vllm")),
        },
        "sglang": {
            "version": version("sglang"),
            "parser": "argparse",
            "options": _grouped(argparse_options("sglang")),
        },
        "tgi": {"version": version("tgi"), "parser": "clap", "options": _grouped(tgi_options())},
        "llamacpp": {
            "version": LLAMACPP_VERSION,
            "parser": "llama",
            "options": _grouped(llama_help_options(llama_help)),
        },
    }


def render(data: dict[str, object]) -> str:
    """One runtime and one nargs group a line: small, and a diff shows what moved."""
    lines = ["{"]
    for i, (runtime, entry) in enumerate(data.items()):
        assert isinstance(entry, dict)
        head = json.dumps({k: v for k, v in entry.items() if k != "options"})[1:-1]
        groups = [f"    {json.dumps(n)}: {json.dumps(s)}" for n, s in entry["options"].items()]
        lines.append(f'  "{runtime}": {{{head}, "options": {{')
        lines.append(",\n".join(groups))
        lines.append("  }}" + ("," if i < len(data) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def llama_help(binary: str) -> str:
    return subprocess.run(
        [binary, "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-server", help="the b10068 llama-server binary")
    args = parser.parse_args()
    binary = (
        args.llama_server
        or subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--path"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    if not Path(binary).exists():
        print(f"no llama-server at {binary}: run {BUILD_SCRIPT} first", file=sys.stderr)
        return 1
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(render(build(llama_help(binary))))
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
