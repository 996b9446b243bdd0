"""Evolution strategies (Salimans, Ho, Chen, Sidor & Sutskever 2017): antithetic Gaussian
perturbations of the policy's flat parameters, centred-rank fitness shaping, Adam on the
estimated gradient with `l2_coeff` weight decay.

Per iteration the perturbation workers try directions until `episodes_per_batch` perturbed
episodes and `train_batch_size` perturbed env steps are gathered; then

    g = sum_i (rank(R+_i) - rank(R-_i)) * eps_i / (2N)
    theta <- theta + Adam(-g + l2_coeff * theta)   (a step against the argument)

`episode_reward_mean` is the current policy's return: the mean of the unperturbed evaluation
episodes (at least `min_eval_episodes` per iteration, more with `eval_prob`) of the last
`report_length` iterations; `rlfleet/algorithms/evolution/trainer.py` has the details.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from rlfleet.algorithms.evolution import Collection, EvolutionTrainer, centered_ranks, weighted_noise_sum
from rlfleet.algorithms.evolution.keys import search_keys
from rlfleet.config import ConfigKey, algorithm_config, int_at_least, number_above, number_in, one_of, override
from rlfleet.fast.adam import adam_delta

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = search_keys(action_noise_std=0.01, eval_prob=0.003) + [
    override("train_batch_size", 10000),
    K("episodes_per_batch", 1000, "Perturbed episodes gathered per iteration (at least; with train_batch_size "
      "perturbed env steps).", int_at_least(1)),
    K("l2_coeff", 0.005, "Weight decay added to the negated gradient estimate.", number_in(0)),
    K("stepsize", 0.01, "Adam's step size on the flat parameters.", number_above(0)),
    K("return_proc_mode", "centered_rank", "Fitness shaping of the returns (RLlib 1.x has centered_rank only, "
      "Salimans et al. 2017's choice).",
      one_of("centered_rank")),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


class ESTrainer(EvolutionTrainer):
    """Evolution strategies on the flat parameters of a fully connected policy."""

    _name = "ES"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS

    def setup(self, config: dict) -> None:
        super().setup(config)
        self._adam_m = np.zeros(self.num_params)
        self._adam_v = np.zeros(self.num_params)
        self._adam_t = 0

    def collection(self) -> Collection:
        episodes, steps = int(self.config["episodes_per_batch"]), int(self.config["train_batch_size"])
        per_task = -(-episodes // (2 * self._workers_sharing()))
        return self._new_collection(per_task, lambda b: b.noisy_episodes >= episodes and b.noisy_steps >= steps)

    def update(self, batch: Collection) -> Dict[str, float]:
        returns = batch.returns
        ranks = centered_ranks(returns)
        g = weighted_noise_sum(ranks[:, 0] - ranks[:, 1], batch.indices, self.noise, self.num_params) / returns.size
        grad = -g + float(self.config["l2_coeff"]) * self.theta
        self._adam_t += 1
        step = adam_delta(grad, self._adam_m, self._adam_v, self._adam_t, *ADAM_BETAS,
                          lr=float(self.config["stepsize"]), eps=ADAM_EPS)
        self.theta = self.theta + step
        norm = float(np.linalg.norm(self.theta))
        return {"grad_norm": float(np.linalg.norm(g)), "update_ratio": float(np.linalg.norm(step)) / max(norm, 1e-12)}

    def _algorithm_state(self) -> Dict[str, Any]:
        return {"adam_m": self._adam_m.copy(), "adam_v": self._adam_v.copy(), "adam_t": int(self._adam_t)}

    def _set_algorithm_state(self, state: Dict[str, Any]) -> None:
        self._adam_m = np.array(state["adam_m"], np.float64)
        self._adam_v = np.array(state["adam_v"], np.float64)
        self._adam_t = int(state["adam_t"])


__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "ESTrainer"]
