"""The ``rlfleet`` command: ``rlfleet train``, ``rlfleet evaluate`` and ``rlfleet list``.

    rlfleet train --run PPO --env CartPole-v1 --stop '{"episode_reward_mean": 450}'
    rlfleet train -f tuned_examples/ppo/cartpole-ppo.yaml
    rlfleet evaluate PATH/checkpoint_10 --episodes 10
    rlfleet list

Importing this module stays cheap (no torch, no algorithms): the registry names algorithms
by module and imports one only when it is looked up, so ``rlfleet --help`` answers instantly.

The package, one job per module: ``experiments`` (the command line and YAML files),
``results`` (stop criteria, progress lines), ``train``, ``commands`` (evaluate, plot,
config, list) and ``main`` (the parser).

Exit codes: 0 done, 2 usage error (bad flag, bad JSON/YAML, unknown algorithm, invalid
config, an optional package of an rlfleet extra not installed, a stop key missing from the first
result), 130 / 143 stopped by SIGINT (Ctrl-C) / SIGTERM (after finishing the iteration).
"""
from __future__ import annotations

from rlfleet.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError
from rlfleet.cli.experiments import Experiment, load_experiments
from rlfleet.cli.main import build_parser, main
from rlfleet.cli.results import format_progress, lookup_result, stop_criteria_met
from rlfleet.cli.train import run_experiment, run_tune_experiment

__all__ = ["EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "Experiment", "UsageError", "build_parser",
           "format_progress", "load_experiments", "lookup_result", "main", "run_experiment",
           "run_tune_experiment", "stop_criteria_met"]
