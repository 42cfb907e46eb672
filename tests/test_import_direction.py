"""The direction of imports between rollcli's packages (DESIGN.md §2), read from the source.

Every ``import rollcli.<package>...`` of every module is collected with ``ast`` (imports inside
functions count: a lazy import is still a dependency; imports under ``if TYPE_CHECKING:`` do not,
they never run). The package graph must have no cycle, and the walls the design names hold:
executors know no RL, the plan needs no executor, allocators and the store stand alone.
"""

from __future__ import annotations

import ast
import importlib.util
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "rollcli"

# package -> packages it must never import
FORBIDDEN: dict[str, set[str]] = {
    "launch": {"train", "eval", "analysis", "backends", "spec", "sweep", "cli"},
    "plan": {"launch", "jobs", "cli"},
    "store": {"allocators", "backends", "train", "eval", "analysis", "launch", "jobs", "plan"},
    "train": {"jobs", "launch", "cli", "eval", "analysis"},
    "eval": {"backends", "train", "jobs", "launch", "cli"},
    "analysis": {"backends", "train", "jobs", "launch", "cli"},
}
# packages that import nothing of rollcli but these
ONLY: dict[str, set[str]] = {
    "allocators": set(),
    "errors": set(),
    "templates": set(),
}


def _package(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0].removesuffix(".py")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[str]:
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            # `from rollcli import jobs` names a package too
            if node.module == "rollcli":
                found.extend(f"rollcli.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def package_graph() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> the files that import it."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(ROOT.rglob("*.py")):
        source = _package(path)
        for name in _imports(ast.parse(path.read_text("utf-8"))):
            parts = name.split(".")
            if parts[0] != "rollcli" or len(parts) < 2 or parts[1] == source:
                continue
            graph[source][parts[1]].append(str(path.relative_to(ROOT.parent)))
    return graph


def _cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_is_read():
    graph = package_graph()
    assert "backends" in graph["jobs"] and "allocators" in graph["backends"]
    assert "jobs" in graph["launch"]  # executors start the jobs' entry point


def test_no_import_cycle_between_packages():
    graph = package_graph()
    cycle = _cycle(graph)
    if cycle:
        edges = [f"{a} -> {b} ({graph[a][b][0]})" for a, b in zip(cycle, cycle[1:], strict=False)]
        raise AssertionError("import cycle between packages:\n  " + "\n  ".join(edges))


def test_walls_hold():
    graph = package_graph()
    broken = [
        f"{pkg} -> {dep} ({', '.join(sorted(set(graph[pkg][dep])))})"
        for pkg, deps in FORBIDDEN.items()
        for dep in sorted(deps & set(graph.get(pkg, {})))
    ]
    broken += [
        f"{pkg} -> {dep} ({', '.join(sorted(set(graph[pkg][dep])))})"
        for pkg, allowed in ONLY.items()
        for dep in sorted(set(graph.get(pkg, {})) - allowed)
    ]
    assert not broken, "imports against DESIGN.md §2:\n  " + "\n  ".join(broken)


def test_the_checker_sees_type_checking_and_lazy_imports():
    code = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from rollcli.backends.api import BaseBackend\n"
        "def f():\n    from rollcli.jobs import entry\n"
        "from rollcli import store\n"
    )
    assert _imports(ast.parse(code)) == ["typing", "rollcli.jobs", "rollcli", "rollcli.store"]
    assert _cycle({"a": {"b": ["x"]}, "b": {"a": ["y"]}}) == ["a", "b", "a"]


def test_benchmarks_and_scripts_import_names_that_exist():
    """Modules move (this layout changed under them once): every ``from rollcli.x import y`` of
    the benchmarks and scripts names a module and an attribute that exist."""

    missing = []
    for path in sorted((ROOT.parent / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rollcli"):
                module = importlib.import_module(node.module)
                missing += [
                    f"{path.name}: {node.module}.{alias.name}"
                    for alias in node.names
                    if not hasattr(module, alias.name)
                    and not (
                        hasattr(module, "__path__")  # a package: the name may be a submodule
                        and importlib.util.find_spec(f"{node.module}.{alias.name}") is not None
                    )
                ]
    assert not missing, missing
