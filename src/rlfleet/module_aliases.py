"""Where moved modules went, so that their old import paths keep working.

`MOVED` maps each old module path to its new one; `install()` (run by `import rlfleet`)
adds a `sys.meta_path` finder that answers an import of an old path with the module at the
new one: the same module object, so `rlfleet.logger.UnifiedLogger is
rlfleet.results.logger.UnifiedLogger`. Configs, YAML files and checkpoints that name a class
by its old path (`env: rlfleet.algorithms.maddpg.example_envs:SimpleSpread`) load as before.
A module that moves gets one line in `MOVED`; no file is left at its old place.

`lazy_exports` gives a package the names of its submodules without importing them before
they are asked for (PEP 562 module `__getattr__`), so `from rlfleet.trainer import Trainer`
works while `import rlfleet.trainer.resources` stays as cheap as the module itself.

This module imports nothing of rlfleet (tests/architecture/test_layers.py checks it): `import rlfleet`
stays light.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

_TRAINER = ("trainer_policies", "trainer_checks", "evaluation", "fault_tolerance", "resources", "acting",
            "evaluate_checkpoint")
_RESULTS = ("logger", "run_folder", "result_values", "progress", "plot")
_ALGORITHMS_COMMON = ("off_policy", "off_policy_common", "multi_agent", "sampling", "sequence_learning",
                      "sequence_replay", "replay_keys", "vtrace", "custom_models")

# old module path -> new module path
MOVED: Dict[str, str] = {
    **{f"rlfleet.{m}": f"rlfleet.trainer.{m}" for m in _TRAINER},
    **{f"rlfleet.{m}": f"rlfleet.results.{m}" for m in _RESULTS},
    **{f"rlfleet.algorithms.{m}": f"rlfleet.algorithms.common.{m}" for m in _ALGORITHMS_COMMON},
    "rlfleet.algorithms.registry": "rlfleet.registry",
    # split by job into common/{async_sampling, learner_thread, mix_in_replay, learner_lock};
    # the package exports the old module's public names
    "rlfleet.algorithms.async_learner": "rlfleet.algorithms.common",
    "rlfleet.algorithms.maddpg.example_envs": "rlfleet.env.examples.maddpg_envs",
    "rlfleet.algorithms.qmix.team_envs": "rlfleet.env.examples.team_envs",
    "rlfleet.league.connect_four": "rlfleet.policy.examples.connect_four",
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (imported there, once)."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._target_spec: Optional[importlib.machinery.ModuleSpec] = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        module = importlib.import_module(self._target)
        self._target_spec = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        # The import system gave the module the old path's spec: give it back its own (it runs
        # nothing else, the module ran when it was imported at its new path).
        module.__spec__ = self._target_spec


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of `MOVED` (only those: every other import is left to Python)."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Any = None) -> Optional[importlib.machinery.ModuleSpec]:
        new = MOVED.get(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    """Adds the finder to `sys.meta_path` once (after Python's own finders: a module that
    exists at a path is always found there first)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())


def lazy_exports(package: str, names: Dict[str, Tuple[str, str]]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `names[name] = (module, attribute)`
    on first use and keeps it in the package's namespace.

    Args:
        package: the package's `__name__`.
        names: exported name -> (module that defines it, its name there).
    """
    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = names[name]
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
