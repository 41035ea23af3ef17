"""The names README.md and docs/ give exist, so a rename cannot leave a stale one behind:
every repository path in backticks (and `path/module.name` references), every test module
named bare, every module of the folder tree in docs/architecture.md, every `make`
target; and the controller's flag table in docs/install.md is the parser's flags."""

from __future__ import annotations

import argparse
import ast
import re
import sys
from functools import cache
from pathlib import Path

import pytest

from app.cli import parser
from tests.support.paths import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CODE = re.compile(r"`([^`\n]+)`")
# A repository path: a top-level entry of the repository, then more segments.
TOP = tuple(sorted(p.name for p in REPO.iterdir() if not p.name.startswith(".git")))
FILE_NAME = re.compile(r"^[\w.-]+\.(py|sh|json|yaml|toml|md)$")
# Files of other projects the docs cite by name (the runtimes' own sources), and files
# our tools write when they run (never stored).
UPSTREAM = {"parallel_hook.py", "cli_args.py", "scheduler.py", "parallel.py"}
WRITTEN = {"argv.json", "results.json", "summary.json", "owner.json"}
PACKAGES = tuple(t for t in TOP if (REPO / t / "__init__.py").is_file())


def _doc_tokens() -> list[tuple[str, int, str]]:
    found = []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for match in CODE.finditer(line):
                found.append((doc.relative_to(REPO).as_posix(), number, match.group(1).strip()))
    return found


@cache
def _top_level_names(module: Path) -> frozenset[str]:
    tree = ast.parse(module.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return frozenset(names)


def _repo_path_problem(token: str) -> str | None:
    """None when `token` (a repository path, maybe `dir/module.name` or `file::test`)
    names something that exists."""
    path = re.split(r"::|:\d|[ (]", token, maxsplit=1)[0].rstrip("/")
    if (REPO / path).exists():
        return None
    folder, _, last = path.rpartition("/")
    module, dot, name = last.partition(".")
    if dot and (REPO / folder / f"{module}.py").is_file():
        if name.split(".")[0] in _top_level_names(REPO / folder / f"{module}.py"):
            return None
        return f"{folder}/{module}.py defines no {name.split('.')[0]}"
    return f"{path} does not exist"


def test_every_repository_path_named_in_the_docs_exists() -> None:
    stale = []
    for doc, line, token in _doc_tokens():
        if "<" in token or "*" in token or not token.startswith(tuple(f"{t}/" for t in TOP)):
            continue
        problem = _repo_path_problem(token)
        if problem:
            stale.append(f"{doc}:{line}: `{token}`: {problem}")
    assert stale == []


@cache
def _file_names() -> frozenset[str]:
    skip = {".git", ".venv", "node_modules", "__pycache__"}
    return frozenset(p.name for p in REPO.rglob("*") if p.is_file() and not skip & set(p.parts))


def test_every_file_named_bare_in_the_docs_exists() -> None:
    """`test_informer.py`, `pod_lifetime.py`: some file of the repository has the name."""
    stale = [
        f"{doc}:{line}: `{token}`"
        for doc, line, token in _doc_tokens()
        if FILE_NAME.match(token) and token not in UPSTREAM | WRITTEN and token not in _file_names()
    ]
    assert stale == []


def _dotted_problem(token: str) -> str | None:
    """`devcluster.node.sweep_stale`: the longest prefix that is a module of ours must
    define the next name. A token whose only module is a package (`webhook.port`, a
    chart value) says nothing of our code."""
    parts = token.removesuffix("()").split(".")
    for end in range(len(parts) - 1, 1, -1):
        module = REPO.joinpath(*parts[:end]).with_suffix(".py")
        if module.is_file():
            if parts[end] in _top_level_names(module):
                return None
            return f"{'.'.join(parts[:end])} defines no {parts[end]}"
    return None


def test_every_dotted_name_of_our_modules_in_the_docs_exists() -> None:
    dotted = re.compile(rf"^({'|'.join(PACKAGES)})(\.\w+)+(\(\))?$")
    stale = [
        f"{doc}:{line}: `{token}`: {problem}"
        for doc, line, token in _doc_tokens()
        if dotted.match(token) and (problem := _dotted_problem(token))
    ]
    assert stale == []


def _tree_lines() -> list[str]:
    text = (REPO / "docs" / "architecture.md").read_text()
    folders = text.split("## Folders", 1)[1].split("```")[1]
    return folders.splitlines()


def test_the_architecture_folder_tree_is_the_repository() -> None:
    """Each entry of the tree (`  cache.py   ...` under `controller/`), and each file it
    names in a description (`(schema.py)`), is a file of the folder it is listed in."""
    entry = re.compile(r"^( *)([\w./-]+)(\s|$)")
    mentioned = re.compile(r"(?<![\w/.-])([\w-]+(?:/[\w.-]+)*\.(?:py|sh|json))\b")
    stack: list[tuple[int, str]] = []
    current = ""
    stale = []
    for line in _tree_lines():
        match = entry.match(line)
        if match and not line.startswith(" " * 8):
            indent, name = len(match.group(1)), match.group(2)
            stack = [(i, d) for i, d in stack if i < indent]
            parent = stack[-1][1] if stack else ""
            path = f"{parent}{name}"
            if not (REPO / path).exists():
                stale.append(path)
            if name.endswith("/"):
                stack.append((indent, path))
                current = path
            else:
                current = parent
        described = line.split(None, 1)[1:] if match else [line]
        for name in mentioned.findall(" ".join(described)):
            if not ((REPO / current / name).exists() or (REPO / name).exists()):
                stale.append(f"{current}{name} (in: {line.strip()})")
    assert stale == []


@cache
def _make_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text()
    return frozenset(re.findall(r"^([\w-]+):", text, re.MULTILINE))


def test_every_make_target_named_in_the_docs_exists() -> None:
    stale = []
    for doc, line, token in _doc_tokens():
        for target in re.findall(r"^make ([\w-]+)", token):
            if target not in _make_targets():
                stale.append(f"{doc}:{line}: `{token}`")
    assert stale == []


def _run_flags() -> set[str]:
    top = parser()
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    run = commands.choices["run"]
    return {
        next(o for o in action.option_strings if o.startswith("--"))
        for action in run._actions
        if action.option_strings and action.option_strings != ["-h", "--help"]
    }


def _table_flags() -> set[str]:
    text = (REPO / "docs" / "install.md").read_text()
    table = text.split("## The controller's command line", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for row in table.splitlines() if (m := re.match(r"^\| `(--[\w-]+)", row))}


def test_the_flag_table_is_the_parsers_flags() -> None:
    assert _table_flags() == _run_flags()


@pytest.mark.parametrize(
    "token, problem",
    [
        ("runtimes/parsers.resolve", None),
        ("runtimes/parsers.no_such_name", "runtimes/parsers.py defines no no_such_name"),
        ("api/runtime_options.resolve", "api/runtime_options.resolve does not exist"),
        ("tests/unit/test_tiers.py::test_x", None),
    ],
)
def test_the_path_check_tells_a_stale_name(token: str, problem: str | None) -> None:
    assert _repo_path_problem(token) == problem


def test_the_dotted_check_tells_a_stale_name() -> None:
    assert _dotted_problem("devcluster.node.sweep_stale") is None
    assert _dotted_problem("devcluster.node.sweep_gone") == "devcluster.node defines no sweep_gone"
    assert _dotted_problem("webhook.certManager.enabled") is None


def test_the_tree_check_tells_a_stale_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = ["controller/          the runtime", "  cache.py           stores (gone.py)"]
    monkeypatch.setattr(sys.modules[__name__], "_tree_lines", lambda: lines)
    with pytest.raises(AssertionError, match=r"controller/gone\.py"):
        test_the_architecture_folder_tree_is_the_repository()
