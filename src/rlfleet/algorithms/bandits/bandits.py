"""Linear contextual bandits: LinUCB and LinTS trainers.

Each training step samples `train_batch_size` one-step episodes (contexts, arms pulled,
rewards), updates the per-arm linear models online, and syncs them to the workers. When the
env reports `info["regret"]` per step (as the example envs in
`rlfleet.env.examples.bandits` do), results carry `regret` (the summed regret of this
iteration's steps) and `cumulative_regret` (since the first step).
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from rlfleet.algorithms.bandits.bandit_policy import LinTSPolicy, LinUCBPolicy
from rlfleet.algorithms.common.multi_agent import sample_train_batch, trainable_batches
from rlfleet.config import ConfigKey, algorithm_config, number_above, number_in, override
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.trainer import Trainer

K = ConfigKey

BANDIT_KEYS: List[ConfigKey] = [
    override("num_workers", 0),
    override("rollout_fragment_length", 1),
    override("train_batch_size", 1),
    override("timesteps_per_iteration", 100),
    K("lambda_", 1.0, "Ridge prior precision of each arm's linear model (A starts as lambda_ * I).",
      number_above(0)),
]

UCB_KEYS: List[ConfigKey] = BANDIT_KEYS + [
    K("alpha", 1.0, "LinUCB: width of the confidence bound added to each arm's estimate, in standard deviations.",
      number_in(0)),
]

TS_KEYS: List[ConfigKey] = BANDIT_KEYS + [
    K("posterior_scale", 1.0, "LinTS: scale of the posterior's spread (v in Agrawal & Goyal 2013; 1: the "
      "unit-noise posterior of RLlib 1.x's LinTS); raise it for rewards of a large scale.", number_in(0)),
]


def batch_regret(batch) -> float | None:
    """The summed `info["regret"]` of a batch's steps; None when the env reports none."""
    total, seen = 0.0, False
    for part in batch.policy_batches.values():
        for info in part.get(SampleBatch.INFOS, ()):
            if isinstance(info, dict) and "regret" in info:
                total += float(info["regret"])
                seen = True
    return total if seen else None


class _LinearBanditTrainer(Trainer):
    """Sample, update the linear models online, sync; track regret."""

    samples_train_batch = True

    def validate_algorithm_config(self, config: dict) -> None:
        if config.get("fast_path") == "off":
            raise ValueError(f"fast_path='off' asks for torch, but {self._name}'s linear models are NumPy only; use "
                             "'auto' (the default) or 'require'")

    def setup(self, config: dict) -> None:
        self._regret_this_iter: float | None = None
        self._cumulative_regret = 0.0

    def training_step(self) -> Dict[str, Any]:
        # === sample ===
        batch = sample_train_batch(self)
        # === learn ===
        info = {pid: self.get_policy(pid).learn_on_batch(part) for pid, part in trainable_batches(self, batch)}
        regret = batch_regret(batch)
        if regret is not None:
            self._regret_this_iter = (self._regret_this_iter or 0.0) + regret
            self._cumulative_regret += regret
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return info

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        if self._regret_this_iter is not None:
            result["regret"] = float(self._regret_this_iter)
            result["cumulative_regret"] = float(self._cumulative_regret)
        self._regret_this_iter = None
        return result

    def get_state(self) -> Dict[str, Any]:
        return dict(super().get_state(), cumulative_regret=float(self._cumulative_regret))

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        self._cumulative_regret = float(state.get("cumulative_regret", 0.0))


class BanditLinUCBTrainer(_LinearBanditTrainer):
    """LinUCB (Li et al. 2010): act on upper confidence bounds of per-arm linear models."""

    _name = "BanditLinUCB"
    _algo_keys = UCB_KEYS
    _default_config = algorithm_config(UCB_KEYS)
    _policy_class = LinUCBPolicy


class BanditLinTSTrainer(_LinearBanditTrainer):
    """Linear Thompson sampling (Agrawal & Goyal 2013): act on posterior draws."""

    _name = "BanditLinTS"
    _algo_keys = TS_KEYS
    _default_config = algorithm_config(TS_KEYS)
    _policy_class = LinTSPolicy


UCB_CONFIG = BanditLinUCBTrainer._default_config
TS_CONFIG = BanditLinTSTrainer._default_config

__all__ = ["BanditLinUCBTrainer", "BanditLinTSTrainer", "UCB_CONFIG", "TS_CONFIG", "batch_regret"]
