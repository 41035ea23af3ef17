"""The options each pinned runtime's parser accepts, and extraArgs walked through them.

runtimes/data/runtime_options.json (scripts/runtime-spellings.py writes it) lists every
spelling by the values it takes: vLLM, SGLang and TGI off their pinned releases'
parsers (tests/data/runtime-options), llama.cpp off the pinned llama-server's `--help`.
`resolve` reads argv as each parser does: which option each word is (an abbreviation
resolved to its full spelling, an attached value split off), the value it takes and
whether that value is missing. So an option the runtime would exit on ("unrecognized
arguments", "invalid argument", "expected one argument") is refused before a pod is
made, and the reconciler and the webhook read a user's option as the runtime will:

- argparse (vLLM, SGLang): the exact spelling; `--x=v` and `-q=v`; `-qV` (a
  two-character short with its value attached); any unique prefix of a long option
  (allow_abbrev, on in both; two or more candidates: "ambiguous option"); a word with a
  space or a negative number is a value, never an option, and an option's value is
  never a word that looks like an option. vLLM's parser also reads `--a_b` as `--a-b`,
  `--x.key v` as a part of the JSON option `--x`, `-O3`.
- clap (TGI): `--x=v`, `-pV` / `-p=V`; no abbreviations.
- llama.cpp (common_params_parse at b10068): exact spellings (`--a_b` read as `--a-b`),
  no attached values (`-c4096` is no option); an option taking a value takes the next
  word whatever it is ("expected value for argument" when there is none). `--x=v` is no
  spelling: the reconciler writes it as two words when --x takes one value
  (runtimes.spellings), else it is refused.
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
    option: str  # the spelling the parser resolves the word to (a key of Parser.nargs)
    attached: str | None = None  # the value inside the word (`--x=v`, `-pV`, `-p=V`)
    ambiguous: tuple[str, ...] = ()


def _argparse(parser: Parser, word: str) -> Match | None:
    """argparse's _parse_optional: the exact spelling, `name=value` of an exact name,
    then a unique prefix of a long option (allow_abbrev) or a short option with its
    value attached (`-qfp8`); more than one candidate is "ambiguous option"."""
    if word in parser.nargs:
        return Match(word)
    name, eq, value = word.partition("=")
    if eq and name in parser.nargs:
        return Match(name, value)
    if word[1] == "-":
        hits = tuple((s, value if eq else None) for s in parser.nargs if s.startswith(name))
    else:
        short = word[:2]
        hits = tuple(
            (s, word[2:]) if s == short else (s, None)
            for s in parser.nargs
            if s == short or s.startswith(word)
        )
    if len(hits) > 1:
        return Match("", None, tuple(s for s, _ in hits))
    if hits:
        return Match(*hits[0])
    return None


def _match(runtime: str, parser: Parser, word: str) -> Match | None:
    if parser.underscores and word.startswith("--"):
        word = _underscored(word)
    if parser.kind == "llama":  # common_params_parse: exact spellings, nothing attached
        name, eq, value = word.partition("=")
        if eq and parser.nargs.get(name) == "1":
            return Match(name, value)  # not llama.cpp's: normalize_user_args splits it
        return Match(word) if word in parser.nargs else None
    if parser.kind == "clap":  # `--name`, `--name=v`; `-p`, `-pV`, `-p=V`; no prefixes
        name, eq, value = word.partition("=")
        if name in parser.nargs:
            return Match(name, value if eq else None)
        short = word[:2]
        if not word.startswith("--") and parser.nargs.get(short) == "1":
            rest = word[2:]
            return Match(short, rest[1:] if rest.startswith("=") else rest)
        return None
    if runtime == "vllm":
        if re.match(r"^-O.", word) and "--optimization-level" in parser.nargs:
            # vLLM rewrites -O3 / -O=3 / -Odecode itself
            return Match("--optimization-level", word[2:].removeprefix("="))
        key, dot, _ = word.partition("=")[0].partition(".")
        if dot and key.startswith("--") and parser.nargs.get(key) == "1":
            # `--x.key v`: a part of the JSON option --x
            return Match(key, word.partition("=")[2] if "=" in word else None)
    return _argparse(parser, word)


@dataclass(frozen=True)
class Option:
    """One option word of extraArgs as the runtime's parser reads it."""

    index: int  # where the word is
    name: str  # as written (`--x` of `--x=v`), underscores read as the parser reads them
    option: str | None  # the spelling it resolves to; None: unknown or ambiguous
    value: str | None  # its (first) value: attached, or the next word(s)
    value_index: int  # where the value is (index itself when attached or absent)
    attached: bool = False  # the value is part of the word
    missing: bool = False  # it takes a value and none follows: the parser exits
    ambiguous: tuple[str, ...] = ()  # argparse: the spellings an abbreviation matches
    nargs: str = ""  # what the option takes ("0", "1", "2", "?", "+", "*"); "" if unknown


def _written(parser: Parser, word: str) -> str:
    name = word.partition("=")[0]
    if parser.underscores and name.startswith("--"):
        name = _underscored(name)
    return name


def resolve(runtime: str, args: tuple[str, ...]) -> Iterator[Option]:
    """Every option word of `args` as the runtime's parser reads it: which option it
    resolves to (an abbreviation to its full spelling, `-pV` to `-p` with value V), the
    value it takes, and whether that value is missing. Values and bare words are
    skipped as the parser skips them; argparse and clap stop at `--`."""
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
        here = i - 1
        match = _match(runtime, parser, word)
        name = _written(parser, word)
        if match is None or match.ambiguous:
            # Read as the naive `--x v`: a following bare word is its value.
            nxt = args[i] if i < len(args) and _is_value(parser, args[i]) else None
            value = word.partition("=")[2] if "=" in word else nxt
            where = here if "=" in word or nxt is None else i
            ambiguous = match.ambiguous if match else ()
            yield Option(here, name, None, value, where, "=" in word, ambiguous=ambiguous)
            continue
        nargs = parser.nargs[match.option]
        if match.attached is not None:
            yield Option(here, name, match.option, match.attached, here, True, nargs=nargs)
            continue
        if nargs == "0":
            yield Option(here, name, match.option, None, here, nargs=nargs)
            continue
        if parser.kind == "llama":  # llama.cpp takes the next words whatever they are
            want = int(nargs)
            taken = args[i : i + want]
            i += len(taken)
            missing = len(taken) < want
            value = taken[0] if taken else None
        else:
            most = {"1": 1, "2": 2, "?": 1}.get(nargs)
            taken = tuple(_values(parser, args, i, most))
            i += len(taken)
            missing = len(taken) < {"1": 1, "2": 2, "+": 1}.get(nargs, 0)
            value = taken[0] if taken else None
        where = here + 1 if value is not None else here
        yield Option(here, name, match.option, value, where, missing=missing, nargs=nargs)


def unknown_options(runtime: str, args: tuple[str, ...]) -> Iterator[Unknown]:
    """The words of extraArgs in an option position that the runtime's parser does not
    know (nothing for a runtime without a table)."""
    parser = PARSERS.get(runtime)
    for opt in resolve(runtime, args):
        if opt.ambiguous:
            hits = opt.ambiguous
            some = ", ".join(hits[:4]) + (", ..." if len(hits) > 4 else "")
            yield Unknown(opt.index, args[opt.index], f"ambiguous: it abbreviates {some}")
        elif opt.option is None:
            word = args[opt.index]
            name = word.partition("=")[0]
            known = parser is not None and name in parser.nargs
            yield Unknown(opt.index, word if known else name)


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
