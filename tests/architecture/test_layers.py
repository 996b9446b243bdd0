"""The folder layout is the architecture: a module never imports one of a higher layer.

utils <- models, fast, env, exploration <- policy <- rollout, replay, offline, config
<- trainer/, results/, checkpoint/, serving/, league/ <- algorithms/ <- tune, cli

(DESIGN.md's layer line.) Each layer is a set of folders; the only modules left loose at
the package root are entry points that every layer may reach or that reach every layer
(`test_only_entry_points_sit_at_the_package_root`):
- layer 0, beside utils: `registry.py` (algorithm names -> trainer classes, by module path
  string), `callbacks.py` (DefaultCallbacks) and `module_aliases.py` (old import paths of
  moved modules, run by `import rlfleet`). Every layer uses them (the config names
  algorithms, workers and the trainer call callbacks, every import may go through an old
  path), and they can be everyone's dependency because they import nothing of rlfleet at
  all (checked below);
- layer 6: `tune.py`, the Ray Tune entry point beside the CLI (`cli/`);
- `__init__.py`, which exports names lazily and imports only `module_aliases` eagerly.
`fast/` (NumPy maths of the fused updates) sits on the models layer and imports only utils
and itself. `algorithms/` holds one package per algorithm plus `algorithms/common/` (the
loops and helpers several share) and `algorithms/evolution/` (what ES and ARS share).
Examples sit in the layer of what they extend: example envs in `env/examples/`, scripted
players (they subclass `Policy`) in `policy/examples/`; the library names them only by string
(configs, YAML), never imports them.

Every `import` / `from ... import` of an rlfleet module counts, at module level or inside
a function (a deferred import is still a dependency). Imports by string (`importlib`, the
algorithm registry) are how lower layers reach plugins without depending on them.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from tests.helpers import REPO_ROOT

SRC = REPO_ROOT / "src"
PACKAGE = SRC / "rlfleet"

# The first matching prefix decides a module's layer.
LAYERS: List[Tuple[int, Tuple[str, ...]]] = [
    (0, ("rlfleet.utils", "rlfleet.registry", "rlfleet.callbacks", "rlfleet.module_aliases")),
    (1, ("rlfleet.models", "rlfleet.fast", "rlfleet.env", "rlfleet.exploration")),
    (2, ("rlfleet.policy",)),
    (3, ("rlfleet.rollout", "rlfleet.replay", "rlfleet.offline", "rlfleet.config")),
    (4, ("rlfleet.trainer", "rlfleet.results", "rlfleet.checkpoint", "rlfleet.serving", "rlfleet.league")),
    (5, ("rlfleet.algorithms",)),
    (6, ("rlfleet.tune", "rlfleet.cli")),
]

# The modules loose at the package root (every other module sits in a layer's folder): see above.
ROOT_MODULES = {"__init__.py", "registry.py", "callbacks.py", "module_aliases.py", "tune.py"}


# Modules held to a narrower rule than their layer: the rlfleet modules they may import.
ONLY_IMPORTS: Dict[str, Tuple[str, ...]] = {
    "rlfleet.registry": (),
    "rlfleet.callbacks": (),
    "rlfleet.module_aliases": (),
    "rlfleet.fast": ("rlfleet.utils", "rlfleet.fast"),
}


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
    # `import rlfleet` must stay fast and must not pull Ray or torch-heavy layers in: its only
    # eager import is `module_aliases`, which imports nothing of rlfleet (ONLY_IMPORTS).
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    eager = [(getattr(n, "module", None), [a.name for a in n.names]) for n in tree.body
             if isinstance(n, (ast.Import, ast.ImportFrom))
             and any((getattr(n, "module", None) or a.name).startswith("rlfleet") for a in n.names)]
    assert eager == [("rlfleet", ["module_aliases"])]


def test_only_entry_points_sit_at_the_package_root():
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == ROOT_MODULES, ("a module at the package root belongs in a layer's folder (or, if it truly is "
                                   f"an entry point, in ROOT_MODULES with its reason): {sorted(loose ^ ROOT_MODULES)}")


def test_layers_name_folders_and_root_modules_that_exist():
    for _, prefixes in LAYERS:
        for prefix in prefixes:
            path = SRC.joinpath(*prefix.split("."))
            assert path.is_dir() or path.with_suffix(".py").is_file(), f"LAYERS names {prefix}, which does not exist"


def test_the_layer_scan_catches_upward_imports(tmp_path):
    fake = tmp_path / "rlfleet" / "utils" / "bad.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("import rlfleet.policy\n\ndef f():\n    from ..trainer import Trainer\n")
    found = dict(rlfleet_imports(fake, tmp_path))
    assert found == {1: "rlfleet.policy", 4: "rlfleet.trainer"}
    assert all(layer_of(t) > layer_of(module_name(fake, tmp_path)) for t in found.values())


def _within(module: str, prefixes: Tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def narrow_rule_violations(root: Path = SRC) -> List[str]:
    found: List[str] = []
    for path in sorted((root / "rlfleet").rglob("*.py")):
        mod = module_name(path, root)
        for owner, allowed in ONLY_IMPORTS.items():
            if _within(mod, (owner,)):
                found += [f"{path.relative_to(root)}:{line}: {mod} imports {target}; it may import only "
                          f"{list(allowed) or 'nothing of rlfleet'}"
                          for line, target in rlfleet_imports(path, root) if not _within(target, allowed)]
    return found


def test_registry_callbacks_and_module_aliases_import_nothing_of_rlfleet_and_fast_only_utils():
    violations = narrow_rule_violations()
    assert not violations, "\n".join(violations)


def test_the_narrow_rules_catch_an_import(tmp_path):
    (tmp_path / "rlfleet" / "fast").mkdir(parents=True)
    (tmp_path / "rlfleet" / "registry.py").write_text("from rlfleet.utils import seeding\n")
    (tmp_path / "rlfleet" / "fast" / "ppo.py").write_text("from rlfleet.utils import seeding\nfrom . import gae\n"
                                                         "def f():\n    import rlfleet.policy.torch_policy\n")
    found = narrow_rule_violations(tmp_path)
    assert len(found) == 2
    registry = next(f for f in found if "registry.py" in f)
    assert "rlfleet.registry imports rlfleet.utils" in registry and "nothing of rlfleet" in registry
    assert any("rlfleet.fast.ppo imports rlfleet.policy.torch_policy" in f for f in found)


# Ray is called by WorkerSet and the modules it owns in rollout/ (its actor pools, placement
# group), by tune.py and by utils/ray_utils.py (which starts Ray); a module that must call it
# elsewhere says why in its docstring and is listed here.
RAY_MODULES = {
    "rlfleet/rollout/worker_set.py", "rlfleet/rollout/worker_membership.py", "rlfleet/rollout/worker_requests.py",
    "rlfleet/rollout/worker_calls.py", "rlfleet/rollout/placement.py", "rlfleet/rollout/remote_vector_env.py",
    "rlfleet/tune.py", "rlfleet/utils/ray_utils.py",
    "rlfleet/algorithms/evolution/worker_pool.py",  # ES / ARS perturbation workers (see its docstring)
    "rlfleet/config/builder.py",  # only looks in sys.modules for an imported Ray Tune (see its docstring)
}


def calls_ray(source: str) -> bool:
    return bool(re.search(r"^\s*(import ray\b|from ray\b)|\b_?ray\.\w|\b(import_ray|init_ray)\b", source, re.M))


def test_ray_is_called_only_by_the_worker_set_and_tune():
    offenders = sorted(str(p.relative_to(SRC)) for p in PACKAGE.rglob("*.py")
                       if calls_ray(p.read_text("utf-8")) and str(p.relative_to(SRC)) not in RAY_MODULES)
    assert offenders == [], f"Ray is called outside WorkerSet / tune.py: {offenders}"


def test_the_ray_scan_sees_each_way_of_calling_ray():
    assert calls_ray("    from ray.util import placement_group\n")
    assert calls_ray("x = self._ray.get(ref)\n")
    assert calls_ray("ray = init_ray()\n")
    assert not calls_ray("# an array.shape\nstray = 1\n")
