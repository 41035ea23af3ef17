"""The options each pinned runtime's parser accepts, and extraArgs walked through them.

runtimes/data/runtime_options.json (scripts/runtime-spellings.py writes it) lists every
spelling by the values it takes: vLLM, SGLang and TGI off their pinned releases'
parsers (tests/data/runtime-options), llama.cpp off the pinned llama-server's `--help`.
The walk reads argv as each parser does, so an option the runtime would exit on
("unrecognized arguments", "invalid argument") is refused before a pod is made:

- argparse (vLLM, SGLang): `--x=v`; `-qV` (a two-character short with its value
  attached); any unique prefix of a long option (allow_abbrev, on in both); a word
  with a space or a negative number is a value, never an option. vLLM's parser also
  reads `--a_b` as `--a-b`, `--x.key v` as a part of the JSON option `--x`, `-O3`.
- clap (TGI): `--x=v`, `-pV` / `-p=V`; no abbreviations.
- llama.cpp: exact spellings (`--a_b` read as `--a-b`); an option taking a value takes
  the next word whatever it is. `--x=v` is no spelling: the reconciler writes it as two
  words when --x takes one value (runtimes.flags), else it is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "runtime_options.json"
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's reading of a value


@dataclass(frozen=True)
class Parser:
    version: str
    kind: str  # "argparse", "clap" or "llama"
    nargs: dict[str, str]  # spelling -> "0", "1", "2", "?", "+" or "*"
    underscores: bool  # `--a_b` is read as `--a-b`


def _load() -> dict[str, Parser]:
    raw: dict[str, Any] = json.loads(DATA.read_text())
    out = {}
    for runtime, entry in raw.items():
        nargs = {s: n for n, spellings in entry["options"].items() for s in spellings}
        underscores = runtime in ("vllm", "llamacpp")
        out[runtime] = Parser(entry["version"], entry["parser"], nargs, underscores)
    return out


PARSERS = _load()


@dataclass(frozen=True)
class Unknown:
    index: int
    word: str  # the option's name (`--x` of `--x=v`), or the word where the name is known
    why: str = ""  # set where argparse finds the word ambiguous


def _underscored(word: str) -> str:
    key, dot, rest = word.partition(".")
    return key.replace("_", "-") + dot + rest


def _is_value(parser: Parser, word: str) -> bool:
    """A word the parser never reads as an option (argparse: `-` alone, a negative
    number, a word with a space when no option has that spelling)."""
    if not word.startswith("-") or word == "-" or NEGATIVE_NUMBER.match(word):
        return True
    return parser.kind == "argparse" and " " in word and word.partition("=")[0] not in parser.nargs


@dataclass(frozen=True)
class Match:
    nargs: str  # what it takes from the following words ("0" when the value is inline)
    ambiguous: tuple[str, ...] = ()


def _argparse(parser: Parser, word: str) -> Match | None:
    if word in parser.nargs:
        return Match(parser.nargs[word])
    name, eq, _ = word.partition("=")
    if eq and name in parser.nargs:
        return Match("0")
    if word[1] == "-":  # a unique prefix of a spelling (allow_abbrev)
        hits = tuple(s for s in parser.nargs if s.startswith(name))
    else:
        short = word[:2]
        hits = tuple(s for s in parser.nargs if s == short or s.startswith(word))
        if hits == (short,):  # `-qfp8`: the value attached
            return Match("0")
    if len(hits) > 1:
        return Match("", hits)
    if hits:
        return Match("0" if eq else parser.nargs[hits[0]])
    return None


def _match(runtime: str, parser: Parser, word: str) -> Match | None:
    if parser.underscores and word.startswith("--"):
        word = _underscored(word)
    if parser.kind == "llama":
        if word in parser.nargs:
            return Match(parser.nargs[word])
        name, eq, _ = word.partition("=")
        return Match("0") if eq and parser.nargs.get(name) == "1" else None
    if parser.kind == "clap":
        name, eq, _ = word.partition("=")
        if name in parser.nargs:
            return Match("0" if eq else parser.nargs[name])
        short = word[:2]
        if not word.startswith("--") and parser.nargs.get(short) == "1":
            return Match("0")
        return None
    if runtime == "vllm":
        if re.match(r"^-O.", word) and "--optimization-level" in parser.nargs:
            return Match("0")  # vLLM rewrites -O3 / -O=3 / -Odecode itself
        key, dot, _ = word.partition("=")[0].partition(".")
        if dot and key.startswith("--") and parser.nargs.get(key) == "1":
            return Match("0" if "=" in word else "1")  # `--x.key v`: a part of JSON --x
    return _argparse(parser, word)


def unknown_options(runtime: str, args: tuple[str, ...]) -> Iterator[Unknown]:
    """The words of extraArgs in an option position that the runtime's parser does not
    know (nothing for a runtime without a table)."""
    parser = PARSERS.get(runtime)
    if parser is None:
        return
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if parser.kind != "llama" and word == "--":
            return  # argparse and clap: the rest are positionals
        if _is_value(parser, word):
            continue
        match = _match(runtime, parser, word)
        if match is None:
            name = word.partition("=")[0]
            yield Unknown(i - 1, word if name in parser.nargs else name)
            continue
        if match.ambiguous:
            some = ", ".join(match.ambiguous[:4]) + (", ..." if len(match.ambiguous) > 4 else "")
            yield Unknown(i - 1, word, f"ambiguous: it abbreviates {some}")
            continue
        if parser.kind == "llama":  # llama.cpp takes the next words whatever they are
            i += int(match.nargs)
        elif match.nargs in ("1", "2"):
            i += sum(1 for _ in _values(parser, args, i, int(match.nargs)))
        elif match.nargs in ("?", "+", "*"):
            i += sum(1 for _ in _values(parser, args, i, 1 if match.nargs == "?" else None))


def _values(parser: Parser, args: tuple[str, ...], start: int, most: int | None) -> Iterator[str]:
    for n, word in enumerate(args[start:]):
        if (most is not None and n >= most) or not _is_value(parser, word):
            return
        yield word


def takes_one_value(runtime: str, name: str) -> bool:
    parser = PARSERS.get(runtime)
    return parser is not None and parser.nargs.get(name) == "1"


def version(runtime: str) -> str:
    return PARSERS[runtime].version
