"""Experiments to run, from the command line or a YAML file in RLlib 1.x's
``rllib train -f`` format (its tuned examples)."""
from __future__ import annotations

import argparse
import copy
import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from rlfleet.cli.common import UsageError
from rlfleet.cli.file_paths import resolve_file_paths
from rlfleet.results.logger import flatten_dict

# Keys an experiment in a YAML file may hold (RLlib 1.x's `rllib train -f` format). Search
# spaces in `config` (`{grid_search: [...]}`, `{choice: [...]}`, ...) or `num_samples` > 1 run
# the experiment through Ray Tune (rlfleet.tune); any other key is an error (a misspelt `stop:`
# would otherwise train forever).
_EXPERIMENT_KEYS = ("run", "env", "stop", "config", "local_dir", "checkpoint_freq", "checkpoint_every_s",
                    "checkpoint_at_end", "keep_checkpoints_num", "num_samples")

# A run trained in this process checkpoints this often (seconds) unless told otherwise, so that
# a run killed by preemption or the OOM killer can be resumed (`rlfleet train --resume`) having
# lost at most this much training.
DEFAULT_CHECKPOINT_EVERY_S = 600.0

_STOP_EXAMPLE = '\'{"episode_reward_mean": 450}\''
_CONFIG_EXAMPLE = '\'{"lr": 0.001}\''


@dataclass
class Experiment:
    """One training run as described by the command line or one entry of a YAML file."""

    name: str
    run: str
    env: Optional[str]
    stop: Dict[str, float] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)
    local_dir: Optional[str] = None
    checkpoint_freq: int = 0
    checkpoint_every_s: float = 0.0
    checkpoint_at_end: bool = False
    keep_checkpoints_num: Optional[int] = None
    num_samples: int = 1
    config_file: Optional[str] = None  # the YAML file it came from (absolute), if any

    @property
    def needs_tune(self) -> bool:
        """Whether only Ray Tune can run it (a search space in `config`, or `num_samples` > 1)."""
        from rlfleet.tune import find_search_space

        return self.num_samples > 1 or find_search_space(self.config) is not None


def _parse_json_object(text: str, flag: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"argument {flag}: invalid JSON ({exc.msg} at position {exc.pos}): "
                         f"{text!r}") from None
    if not isinstance(value, dict):
        example = _STOP_EXAMPLE if flag == "--stop" else _CONFIG_EXAMPLE
        raise UsageError(f"argument {flag}: must be a JSON object such as {example}, "
                         f"got {text!r}")
    return value


def _normalize_stop(stop: Any, where: str) -> Dict[str, float]:
    """Flattens nested stop dicts ({"evaluation": {"x": 1}} -> {"evaluation/x": 1}) and
    checks every threshold is a number."""
    if stop is None:
        return {}
    if not isinstance(stop, Mapping):
        raise UsageError(f"{where}: stop criteria must be a mapping of result key -> "
                         f"threshold such as {_STOP_EXAMPLE}, got {stop!r}")
    flat = flatten_dict(stop)
    for key, threshold in flat.items():
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise UsageError(f"{where}: threshold for stop key {key!r} must be a number, "
                             f"got {threshold!r}")
    return flat


def _deep_merge(base: Dict[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    """Returns base updated by override; nested dicts merge so that --config
    '{"model": {"fcnet_hiddens": [32]}}' keeps the file's other model keys."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _load_yaml(path: str) -> Dict[str, Any]:
    import yaml  # lazily: only -f needs it

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise UsageError(f"argument -f/--config-file: cannot read {path!r}: "
                         f"{exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"argument -f/--config-file: {path!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise UsageError(f"argument -f/--config-file: {path!r} must hold one or more "
                         f"experiments as `name: {{run: ..., env: ..., stop: ..., config: ...}}`")
    return data


def _check_experiment_keys(spec: Mapping[str, Any], where: str) -> None:
    for key in spec:
        if key in _EXPERIMENT_KEYS:
            continue
        close = difflib.get_close_matches(str(key), _EXPERIMENT_KEYS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(f"{where}: unknown key {key!r}; {hint}An experiment takes {list(_EXPERIMENT_KEYS)}")


def cli_stop(args: argparse.Namespace) -> Dict[str, float]:
    """The stop criteria given with --stop (empty without it)."""
    if args.stop is None:
        return {}
    return _normalize_stop(_parse_json_object(args.stop, "--stop"), "argument --stop")


def checked_checkpoint_settings(args: argparse.Namespace, spec: Mapping[str, Any], where: str) -> Dict[str, Any]:
    """`checkpoint_freq`, `checkpoint_every_s`, `checkpoint_at_end`, `keep_checkpoints_num`:
    the flags given, else `spec`'s entries (an experiment of a file, or a run's run.json),
    else the defaults; each checked.

    Raises:
        UsageError: naming the setting, the value and what is valid.
    """
    freq = args.checkpoint_freq if args.checkpoint_freq is not None else spec.get("checkpoint_freq", 0)
    if isinstance(freq, bool) or not isinstance(freq, int) or freq < 0:
        raise UsageError(f"{where}: checkpoint_freq must be an integer >= 0, got {freq!r}")
    every = getattr(args, "checkpoint_every_s", None)
    every = every if every is not None else spec.get("checkpoint_every_s", DEFAULT_CHECKPOINT_EVERY_S)
    if isinstance(every, bool) or not isinstance(every, (int, float)) or not every >= 0:
        raise UsageError(f"{where}: checkpoint_every_s must be a number of seconds >= 0 (0: never), got {every!r}")
    keep = getattr(args, "keep_checkpoints_num", None)
    keep = keep if keep is not None else spec.get("keep_checkpoints_num")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise UsageError(f"{where}: keep_checkpoints_num must be an integer >= 1, got {keep!r}")
    return {"checkpoint_freq": freq, "checkpoint_every_s": float(every), "keep_checkpoints_num": keep,
            "checkpoint_at_end": bool(args.checkpoint_at_end or spec.get("checkpoint_at_end"))}


def load_experiments(args: argparse.Namespace) -> List[Experiment]:
    """Builds the experiments to run from parsed ``rlfleet train`` arguments.

    With ``-f``, each experiment of the YAML file is updated by the flags given on the
    command line (``--stop`` and ``--config`` update the file's dicts, nested config dicts
    merge; ``--run``, ``--env``, ``--local-dir`` and checkpoint flags replace).

    Args:
        args: the namespace from :func:`build_parser`.

    Returns:
        The experiments, in file order.

    Raises:
        UsageError: bad JSON/YAML, missing ``--run``, non-numeric stop thresholds, or
            a bad ``num_samples``.
    """
    stop_flag = cli_stop(args)
    cli_config = _parse_json_object(args.config, "--config") if args.config is not None else {}

    if args.config_file:
        specs = _load_yaml(args.config_file)
        where_prefix = f"{args.config_file}: experiment "
    else:
        if not args.run:
            raise UsageError("the following arguments are required: --run (or -f FILE)")
        specs = {"default": {}}
        where_prefix = "experiment "

    experiments = []
    for name, spec in specs.items():
        where = f"{where_prefix}{name!r}"
        if not isinstance(spec, dict):
            raise UsageError(f"{where} must be a mapping with keys {list(_EXPERIMENT_KEYS)}, "
                             f"got {spec!r}")
        _check_experiment_keys(spec, where)

        run = args.run or spec.get("run")
        if not run or not isinstance(run, str):
            raise UsageError(f"{where} has no `run:` (the algorithm name, e.g. PPO)")

        file_config = spec.get("config") or {}
        if not isinstance(file_config, dict):
            raise UsageError(f"{where}: `config` must be a mapping, got {file_config!r}")
        config = _deep_merge(resolve_file_paths(file_config, args.config_file, where), cli_config)

        # Precedence for the env: --env, then --config's "env", then the experiment's `env:`,
        # then `config: {env: ...}` from the file.
        env = args.env or cli_config.get("env") or spec.get("env") or config.get("env")
        if env is not None:
            config["env"] = env  # keep one answer, whichever way the trainer reads it

        samples = spec.get("num_samples", 1)
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise UsageError(f"{where}: num_samples must be an integer >= 1, got {samples!r}")

        stop = _normalize_stop(spec.get("stop"), where)
        stop.update(stop_flag)

        experiments.append(Experiment(
            name=str(name),
            run=run,
            env=env,
            stop=stop,
            config=config,
            local_dir=args.local_dir or spec.get("local_dir"),
            num_samples=samples,
            config_file=os.path.abspath(args.config_file) if args.config_file else None,
            **checked_checkpoint_settings(args, spec, where),
        ))
        if experiments[-1].needs_tune:
            if getattr(args, "checkpoint_every_s", None) is not None or "checkpoint_every_s" in spec:
                raise UsageError(f"{where}: checkpoint_every_s applies to runs trained in this process; this "
                                 "experiment runs through Ray Tune (a search space or num_samples > 1), which "
                                 "checkpoints every checkpoint_freq iterations")
            experiments[-1].checkpoint_every_s = 0.0
    return experiments
