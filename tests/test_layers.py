"""The folder layout is the architecture: a module never imports one of a higher layer.

utils <- models, fast, env, exploration <- policy <- rollout, replay, offline, config
<- trainer, evaluation, checkpoint, ... <- algorithms <- tune, cli

Every `import` / `from ... import` of an rlfleet module counts, at module level or inside
a function (a deferred import is still a dependency). Imports by string (`importlib`, the
algorithm registry) are how lower layers reach plugins without depending on them.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "rlfleet"

# The first matching prefix decides a module's layer.
LAYERS: List[Tuple[int, Tuple[str, ...]]] = [
    (0, ("rlfleet.utils", "rlfleet.registry", "rlfleet.callbacks")),
    (1, ("rlfleet.models", "rlfleet.fast", "rlfleet.env", "rlfleet.exploration")),
    (2, ("rlfleet.policy",)),
    (3, ("rlfleet.rollout", "rlfleet.replay", "rlfleet.offline", "rlfleet.config")),
    (4, ("rlfleet.trainer", "rlfleet.evaluation", "rlfleet.checkpoint", "rlfleet.resources", "rlfleet.logger",
         "rlfleet.progress", "rlfleet.plot",
         "rlfleet.fault_tolerance", "rlfleet.acting")),
    (5, ("rlfleet.algorithms",)),
    (6, ("rlfleet.tune", "rlfleet.cli")),
]


def layer_of(module: str) -> int:
    if module == "rlfleet":  # the package root only re-exports lazily (see __init__.py)
        return 0
    for layer, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return layer
    raise AssertionError(f"{module} belongs to no layer: add its folder to LAYERS in {__file__}")


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def rlfleet_imports(path: Path, root: Path = SRC) -> Iterator[Tuple[int, str]]:
    """(line, imported module) for every import of an rlfleet module in `path`."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "rlfleet":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "rlfleet":
                yield node.lineno, target


def test_no_module_imports_a_higher_layer():
    violations: List[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        mod = module_name(path)
        own = layer_of(mod)
        for line, target in rlfleet_imports(path):
            if layer_of(target) > own:
                violations.append(f"{path.relative_to(SRC)}:{line}: {mod} (layer {own}) imports {target} "
                                  f"(layer {layer_of(target)})")
    assert not violations, "upward imports:\n" + "\n".join(violations)


def test_the_package_root_imports_nothing_eagerly():
    # `import rlfleet` must stay fast and must not pull Ray or torch-heavy layers in.
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    eager = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
             and any((getattr(n, "module", None) or a.name).startswith("rlfleet") for a in n.names)]
    assert not eager


def test_the_layer_scan_catches_upward_imports(tmp_path):
    fake = tmp_path / "rlfleet" / "utils" / "bad.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("import rlfleet.policy\n\ndef f():\n    from ..trainer import Trainer\n")
    found = dict(rlfleet_imports(fake, tmp_path))
    assert found == {1: "rlfleet.policy", 4: "rlfleet.trainer"}
    assert all(layer_of(t) > layer_of(module_name(fake, tmp_path)) for t in found.values())


def _imports_graph() -> dict:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph[module_name(path)] = {target for _, target in rlfleet_imports(path)}
    return graph


def test_fast_imports_only_utils_and_itself_and_sits_in_no_cycle():
    """rlfleet/fast restates the maths in NumPy below the policies: it never reaches into a
    policy, an algorithm or a model (models hand their layers over), and no import of its
    modules (inside functions too) leads back to them."""
    graph = _imports_graph()
    fast = [m for m in graph if m == "rlfleet.fast" or m.startswith("rlfleet.fast.")]
    assert fast
    for mod in fast:
        outside = sorted(t for t in graph[mod] if not t.startswith(("rlfleet.utils", "rlfleet.fast")))
        assert not outside, f"{mod} imports {outside}"
    for start in fast:
        seen, todo = set(), [t for t in graph[start] if t in graph]
        while todo:
            mod = todo.pop()
            if mod == start:
                raise AssertionError(f"{start} is in an import cycle")
            if mod not in seen:
                seen.add(mod)
                todo += [t for t in graph.get(mod, ()) if t in graph]
