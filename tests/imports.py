"""The import-direction check: every arrow between our packages points down, no cycles.

Run by `make lint` (`python -m tests.imports`) and by tests/test_imports.py. The layers
are those of docs/architecture.md: app -> webhook, reconcilers -> runtimes -> api,
controller -> metrics; testserver imports none of them (it has its own kinds table),
devcluster (the real control plane for development) only controller, bench may import all,
and nothing imports bench, testserver or devcluster. And no module of tests/ imports a
test module (tests/test_*.py): what several share lives in conftest.py or tests/support/.
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


def imported_test_modules(root: Path = ROOT) -> list[str]:
    """Imports of a test module (tests/test_*.py) by any module of tests/."""
    found: list[str] = []
    for path in sorted((root / "tests").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        for target, line, _ in imports(".".join(parts), path):
            name = target.split(".")
            if len(name) >= 2 and name[0] == "tests" and name[1].startswith("test_"):
                rel = str(path.relative_to(root))
                found.append(f"{rel}:{line}: imports the test module {'.'.join(name[:2])}")
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
    between_tests = imported_test_modules()
    for line in between_tests:
        print(f"test module import: {line}")
    return 1 if upward or cycles or between_tests else 0


if __name__ == "__main__":
    sys.exit(main())
