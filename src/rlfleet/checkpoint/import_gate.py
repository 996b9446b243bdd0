"""The import-trust gate of `Trainer.from_checkpoint`: a security boundary.

A checkpoint records the config's classes and functions by name, and importing a module
runs it, while a checkpoint may come from anyone. So before importing anything, every name
the config would import is checked against `rlfleet.utils.json_codec.ImportTrust`
(rlfleet, gymnasium, modules of the user's own code already imported, and
`trusted_modules`): recorded classes and functions, and strings rlfleet imports by name, at
any depth (`env` class paths and "module:Id" ids, `exploration_config.type` and
`logger_config.type` paths). Anything else is a `CheckpointError` naming the key, the name
and the two fixes (`config_overrides`, `trusted_modules`); nothing is imported. rlfleet's
entry points (the CLI, Tune, trainer classes), which act on whatever they are called with,
are never accepted as values.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from rlfleet.utils.json_codec import (
    DecodeError,
    ImportTrust,
    Untrusted,
    UntrustedImportError,
    decode,
    find_untrusted,
)
from rlfleet.utils.safe_files import CheckpointError


def nested_example(path: str) -> str:
    keys = path.split(".")
    text = "..."
    for key in reversed(keys):
        text = f"{{{key!r}: {text}}}"
    return text


def _env_string_module(text: str) -> Optional[str]:
    """The module resolving the `env` string `text` would import (see `rlfleet.env.registry`);
    None for a registered name or a plain Gymnasium id (registered by code already run)."""
    from rlfleet.env.registry import registered_envs  # deferred: gymnasium is slow to import

    if text in registered_envs():
        return None
    if ":" in text:  # "pkg.mod:Class" or Gymnasium's "module:Id-v0": both import the module
        return text.partition(":")[0]
    module, _, attr = text.rpartition(".")
    if module and attr and all(p.isidentifier() for p in text.split(".")):
        return module  # "pkg.mod.Class"
    return None


def _class_path_module(text: str) -> Optional[str]:
    """The module of a class path ("pkg.mod.Class" / "pkg.mod:Class"); None for a plain
    name (a built-in or registered one, looked up without importing)."""
    if ":" in text:
        return text.rpartition(":")[0].replace(":", ".") or None
    return text.rpartition(".")[0] or None


def _string_module(keys: Tuple[str, ...], text: str) -> Optional[str]:
    """The module a string at config `keys` makes rlfleet import, if any: strings under the
    keys rlfleet resolves by importing (`env`, `exploration_config.type`, `logger_config.type`).

    They are looked for at any depth, `env_config` included: a trusted class may be built
    from a nested dict and resolve such a string in turn (a trainer class given as `env` gets
    `env_config` as its config).
    """
    if not keys:
        return None
    if keys[-1] == "env":
        return _env_string_module(text)
    if keys[-1].isdigit():  # an item of a list of class paths
        keys = keys[:-1]
    if len(keys) >= 2 and keys[-1] == "type" and keys[-2] in ("exploration_config", "logger_config"):
        return _class_path_module(text)
    return None


# rlfleet's entry points run commands or build trainers from whatever they are called with (argv,
# a config dict): no config value is one, and naming one would reach untrusted names through
# the back door (`env: rlfleet.cli:main` made with env_config keys as argv).
_ENTRY_POINT_MODULES = ("rlfleet.cli", "rlfleet.tune")


def _is_entry_point(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in _ENTRY_POINT_MODULES)


class _CheckpointTrust(ImportTrust):
    """`ImportTrust` without rlfleet's entry points (even under `trusted_modules=["rlfleet"]`)."""

    def allows(self, module: str) -> bool:
        return not _is_entry_point(module) and super().allows(module)


def _checked_importer(trust: ImportTrust, ck_path: str, trainer_base: type):
    """`trust.importer()`, refusing rlfleet's entry points: the CLI, Tune, trainer classes."""
    importer = trust.importer()

    def load(name: str, path: str) -> Any:
        obj = importer(name, path)
        if isinstance(obj, type) and issubclass(obj, trainer_base):
            raise CheckpointError(
                f"Trainer.from_checkpoint({ck_path!r}): config key {path!r} records the trainer class {name!r}; a "
                f"trainer is never a config value (it would build a trainer from its arguments). Pass the right "
                f"value: config_overrides={{{nested_example(path.split('[')[0])[1:-1]}}}")
        return obj

    return load


def _untrusted_message(ck_path: str, found: List[Untrusted]) -> str:
    entry = [u for u in found if _is_entry_point(u.module)]
    if entry:
        keys = list(dict.fromkeys(u.path.split("[")[0] for u in entry))
        return (f"Trainer.from_checkpoint({ck_path!r}): config key {entry[0].path!r} records {entry[0].name!r}, an "
                "rlfleet entry point (it runs commands from its arguments), which is never a config value; "
                "nothing was imported. Pass the right value: config_overrides={"
                + ", ".join(nested_example(k)[1:-1] for k in keys) + "}")
    first = found[0]
    packages = sorted({u.module.split(".")[0] for u in found})
    # A list item (e.g. a policy spec's class) is overridden with its whole list.
    keys = list(dict.fromkeys(u.path.split("[")[0] for u in found))
    text = (f"Trainer.from_checkpoint({ck_path!r}): config key {first.path!r} records {first.name!r}, from module "
            f"{first.module!r}, which is not trusted, so it was not imported (importing a module runs its code, "
            "and a checkpoint may come from anyone).")
    for other in found[1:]:
        text += f" Also config key {other.path!r}: {other.name!r}."
    overrides = ", ".join(nested_example(k)[1:-1] for k in keys)
    return (text + " Loading imports only from rlfleet, gymnasium, your own modules already imported in this "
            f"process, and the modules you trust. To trust this code: trusted_modules={packages!r} (CLI: "
            + " ".join(f"--trust-module {p}" for p in packages)
            + f"); or pass the value yourself: config_overrides={{{overrides}}}.")



def decode_trusted_config(recorded: dict, overrides: dict, trusted_modules: Optional[Sequence[str]], ck_path: str,
                          trainer_base: type) -> dict:
    """The config `recorded` in the checkpoint at `ck_path`, with `overrides` applied, once
    every name it would import is trusted (else a `CheckpointError`, nothing imported).

    Args:
        trusted_modules: modules (packages) whose recorded classes and functions may be
            imported, besides rlfleet, gymnasium and the user's modules already imported.
        trainer_base: the trainer base class: no config value may be a subclass of it (the
            caller passes it, as this gate sits below the trainer).
    """
    trust = _CheckpointTrust(trusted_modules)
    # Every name is checked before anything is imported (an untrusted module never runs).
    found = find_untrusted(recorded, trust, overrides, _string_module)
    if found:
        raise CheckpointError(_untrusted_message(ck_path, found))
    try:
        return decode(recorded, overrides, importer=_checked_importer(trust, ck_path, trainer_base))
    except UntrustedImportError as exc:  # pragma: no cover - find_untrusted saw it first
        raise CheckpointError(_untrusted_message(ck_path, [Untrusted(exc.path, exc.name, exc.module)])) from None
    except DecodeError as exc:
        raise CheckpointError(
            f"Trainer.from_checkpoint({ck_path!r}): {exc}. Pass it in config_overrides, e.g. "
            f"config_overrides={nested_example(exc.path)}") from None
