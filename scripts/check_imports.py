"""The import-direction check: every arrow between our packages points down, no cycles.

Run by `make lint` (`python scripts/check_imports.py`) and by tests/unit/test_imports.py. The layers
are those of docs/architecture.md: app -> webhook, reconcilers -> runtimes -> api,
controller -> metrics; testserver imports none of them (it has its own kinds table),
devcluster (the real control plane for development) only controller, bench may import all,
and nothing imports bench, testserver or devcluster. In tests/, no module imports a test
module (test_*.py) or a conftest.py: fixtures live in conftest.py, what several tests share
in tests/support/. Nothing outside tests/ (scripts/ included) imports tests.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("app", "webhook", "reconcilers", "runtimes", "api", "controller", "metrics")
# A top-level module of types only (objtypes.py: the Obj alias), importable by all.
LEAF = "objtypes"
# What each package may import of ours. webhook and reconcilers are one layer and do not
# import each other: both take the rules from runtimes/ and api/.
ALLOWED: dict[str, frozenset[str]] = {
    "app": frozenset({"webhook", "reconcilers", "runtimes", "api", "controller", "metrics", LEAF}),
    "webhook": frozenset({"runtimes", "api", "controller", "metrics", LEAF}),
    "reconcilers": frozenset({"runtimes", "api", "controller", "metrics", LEAF}),
    # What each pinned runtime accepts and how its argv is built: pure, over the API types.
    "runtimes": frozenset({"api", LEAF}),
    "api": frozenset({LEAF}),
    "controller": frozenset({"metrics", LEAF}),
    "metrics": frozenset({LEAF}),
    # The test server serves a cluster: its kinds are its own table (testserver/kinds.py).
    "testserver": frozenset({LEAF}),
    "devcluster": frozenset({"controller", LEAF}),
    "bench": frozenset({*PRODUCT, "testserver", "devcluster", LEAF}),
    LEAF: frozenset(),
}
OURS = frozenset(ALLOWED)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of our packages, by dotted name."""
    found: dict[str, Path] = {}
    for package in sorted(OURS):
        if (root / f"{package}.py").is_file():  # a top-level module
            found[package] = root / f"{package}.py"
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, only for type checking) for each import of the module."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            typing_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in typing_only
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno, id(node) in typing_only
            for alias in node.names:  # `from pkg import module` imports pkg.module
                yield f"{target}.{alias.name}", node.lineno, id(node) in typing_only


def check(root: Path = ROOT) -> tuple[list[str], list[list[str]]]:
    """The upward (disallowed) imports, and the import cycles between our modules."""
    mods = modules(root)
    upward: dict[tuple[str, int], str] = {}  # one report per import statement
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module.split(".")[0]
        for target, line, typing_only in imports(module, path):
            top = target.split(".")[0]
            if top not in OURS:
                continue
            if top != package and top not in ALLOWED[package]:
                rel = str(path.relative_to(root))
                upward.setdefault((rel, line), f"{rel}:{line}: {package} imports {target}")
            if target in mods and target != module and not typing_only:
                graph[module].add(target)
    return sorted(upward.values()), _cycles(graph)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def misplaced_test_imports(root: Path = ROOT) -> list[str]:
    """Imports of a test module or of a conftest by a module of tests/, and imports of
    tests by a module outside it (our packages and scripts/)."""
    found: list[str] = []
    for path in sorted((root / "tests").rglob("*.py")):
        rel = str(path.relative_to(root))
        for target, line, _ in imports(_module_name(path, root), path):
            name = target.split(".")
            if name[0] != "tests":
                continue
            tests = [i for i, part in enumerate(name) if part.startswith("test_")]
            if tests:
                module = ".".join(name[: tests[0] + 1])
                found.append(f"{rel}:{line}: imports the test module {module}")
            elif name[-1] == "conftest" or (len(name) > 1 and name[-2] == "conftest"):
                found.append(f"{rel}:{line}: imports a conftest (helpers live in tests/support)")
    outside = [root / "scripts", *(root / package for package in sorted(OURS))]
    for folder in outside:
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
            rel = str(path.relative_to(root))
            for target, line, _ in imports(_module_name(path, root), path):
                if target.split(".")[0] == "tests":
                    found.append(f"{rel}:{line}: imports {target} from outside tests/")
    return sorted(set(found))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    upward, cycles = check()
    for line in upward:
        print(f"upward import: {line}")
    for cycle in cycles:
        print(f"import cycle: {' <-> '.join(cycle)}")
    between_tests = misplaced_test_imports()
    for line in between_tests:
        print(f"test module import: {line}")
    return 1 if upward or cycles or between_tests else 0


if __name__ == "__main__":
    sys.exit(main())
