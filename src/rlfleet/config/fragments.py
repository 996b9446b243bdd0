"""How rollout fragments add up to a train batch: `rollout_fragment_length: "auto"` and the
warning when one round of fragments is far larger than `train_batch_size`.

A sampling round gives `rollout_fragment_length * num_envs_per_worker` env steps per worker
(the trainer's own worker when `num_workers` is 0); an algorithm that samples
`train_batch_size` steps per training step takes whole rounds until it has them. So with
`num_envs_per_worker: 256` and the default fragment of 200 steps one round is 51,200 steps,
whatever `train_batch_size` says.

- `"auto"` (RLlib 2.x's value: `AlgorithmConfig.get_rollout_fragment_length` in
  https://github.com/ray-project/ray/blob/master/rllib/algorithms/algorithm_config.py)
  makes the round about `train_batch_size`: `ceil(train_batch_size / (workers * envs))`
  steps per env, so a round overshoots the batch by less than one step per env.
- A round over `OVERSIZE_FACTOR` times `train_batch_size` is named in a warning with the
  keys that make it, for the trainers that sample `train_batch_size` per step
  (`Trainer.samples_train_batch`).
"""
from __future__ import annotations

import math
from typing import Any, Optional

from rlfleet.config.checks import InvalidValue, int_at_least

AUTO = "auto"
OVERSIZE_FACTOR = 2

_int_at_least_1 = int_at_least(1)


def fragment_length(value: Any) -> Any:
    """The check of `rollout_fragment_length`: an int >= 1 or "auto"."""
    if value == AUTO:
        return value
    try:
        return _int_at_least_1(value)
    except InvalidValue:
        raise InvalidValue('an int >= 1, or "auto" (train_batch_size / (num_workers * num_envs_per_worker), '
                           'rounded up)') from None


def _samplers(config: dict) -> int:
    return max(1, int(config.get("num_workers") or 0))


def resolve_auto_fragment(config: dict) -> None:
    """Replaces `rollout_fragment_length: "auto"` by the steps per env that make one sampling
    round of every worker's envs about `train_batch_size` (in place; after the value checks)."""
    if config.get("rollout_fragment_length") != AUTO:
        return
    envs = _samplers(config) * int(config.get("num_envs_per_worker") or 1)
    config["rollout_fragment_length"] = max(1, math.ceil(int(config["train_batch_size"]) / envs))


def oversized_batch_warning(config: dict) -> Optional[str]:
    """A warning naming the keys when one sampling round is over `OVERSIZE_FACTOR` times
    `train_batch_size` (None when it is not, or when the input is not the sampler).

    Args:
        config: a validated config (`rollout_fragment_length` resolved).
    """
    if config.get("input", "sampler") != "sampler":
        return None
    fragment, envs = int(config["rollout_fragment_length"]), int(config.get("num_envs_per_worker") or 1)
    workers, batch = _samplers(config), int(config["train_batch_size"])
    round_steps = fragment * envs * workers
    if round_steps <= OVERSIZE_FACTOR * batch:
        return None
    who = f" * {workers} workers (num_workers)" if config.get("num_workers") else ""
    return (f"each training step samples at least {round_steps:,} env steps against 'train_batch_size': {batch:,}: "
            f"one round of fragments is rollout_fragment_length {fragment} * num_envs_per_worker {envs}{who}; "
            f"set 'rollout_fragment_length': 'auto' (or {max(1, math.ceil(batch / (envs * workers)))}) to sample "
            f"about train_batch_size, or raise train_batch_size")


__all__ = ["AUTO", "OVERSIZE_FACTOR", "fragment_length", "oversized_batch_warning", "resolve_auto_fragment"]
