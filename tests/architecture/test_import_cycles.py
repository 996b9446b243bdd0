"""No import cycles between the modules of src/rlfleet.

A cycle means neither module can be understood, tested or loaded without the other; the
usual fix is to move the shared piece down into the lower module or into a new small one.
Every import counts, at module level or inside a function (a deferred import only hides the
cycle from the interpreter, not from the reader). `from pkg import name` counts as an import
of `pkg.name` when `name` is a submodule, and a module depends on the packages above it
(importing `rlfleet.a.b` runs `rlfleet/a/__init__.py`) only through what those `__init__`s
import themselves, so package `__init__` files are ordinary nodes of the graph.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterable, List, Set

from tests.helpers import REPO_ROOT

SRC = REPO_ROOT / "src"
PACKAGE = SRC / "rlfleet"

def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, top: str = "rlfleet") -> Dict[str, Set[str]]:
    """module -> the modules of `top` it imports (anywhere in its body)."""
    paths = {module_name(p, root): p for p in sorted((root / top).rglob("*.py"))}
    graph: Dict[str, Set[str]] = {m: set() for m in paths}

    def resolve(target: str) -> str:
        # the longest known module that `target` names (`a.b.func` -> `a.b`)
        while target and target not in paths:
            target = target.rpartition(".")[0]
        return target

    for mod, path in paths.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # `from pkg import sub` imports the submodule `pkg.sub`, else `pkg` itself
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in paths else source
                           for a in node.names]
            for target in targets:
                found = resolve(target)
                if found and found != mod and found.split(".")[0] == top:
                    graph[mod].add(found)
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
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
    return sorted(found)


def describe(component: Iterable[str], graph: Dict[str, Set[str]]) -> str:
    members = set(component)
    edges = [f"    {a} -> {b}" for a in sorted(members) for b in sorted(graph[a] & members)]
    return "cycle among " + ", ".join(sorted(members)) + ":\n" + "\n".join(edges)


def test_no_import_cycles():
    graph = import_graph(SRC)
    unexpected = cycles(graph)
    assert not unexpected, "import cycles (move the shared piece down):\n" + "\n".join(
        describe(c, graph) for c in unexpected)


def test_the_cycle_scan_finds_a_cycle_through_a_deferred_submodule_import(tmp_path):
    pkg = tmp_path / "rlfleet"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (pkg / "c.py").write_text("import rlfleet.a\n")
    (pkg / "d.py").write_text("from rlfleet.a import thing\n")  # d -> a, not part of the cycle
    graph = import_graph(tmp_path)
    assert graph["rlfleet.a"] == {"rlfleet.sub.b"}
    assert graph["rlfleet.sub.b"] == {"rlfleet.c"}
    assert cycles(graph) == [["rlfleet.a", "rlfleet.c", "rlfleet.sub.b"]]
    assert "rlfleet.sub.b -> rlfleet.c" in describe(cycles(graph)[0], graph)


def test_the_cycle_scan_passes_an_acyclic_graph(tmp_path):
    pkg = tmp_path / "rlfleet"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("import os\n")
    assert cycles(import_graph(tmp_path)) == []


def package_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """The same graph between the top-level parts of rlfleet (`rlfleet.rollout`, `rlfleet.trainer`)."""
    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])
    collapsed: Dict[str, Set[str]] = {}
    for mod, targets in graph.items():
        collapsed.setdefault(part(mod), set()).update(part(t) for t in targets if part(t) != part(mod))
    return collapsed


def test_no_import_cycles_between_packages():
    # rollout/ may use offline/ or the reverse, not both: a folder is a unit of the layering.
    graph = package_graph(import_graph(SRC))
    found = cycles(graph)
    assert not found, "import cycles between packages:\n" + "\n".join(describe(c, graph) for c in found)
