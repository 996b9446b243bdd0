"""Augmented random search, V2-t (Mania, Guy & Recht 2018): antithetic perturbations of a
linear (or small MLP) policy on normalised states, the top `rollouts_used` directions only,
and a step scaled by the standard deviation of their returns.

Per iteration the perturbation workers try `num_rollouts / 2` directions (`num_rollouts`
perturbed episodes, as RLlib 1.x counts them); then, over the directions whose better
return is in the top `rollouts_used / num_rollouts` fraction,

    g = sum_i (R+_i - R-_i) * eps_i / (b * std(R of those directions))
    theta <- theta + sgd_stepsize * momentum-averaged g   (RLlib 1.x's SGD: sgd_momentum 0.9)

Returns used by the update are shifted by `-|offset|` per step (the ARS paper's correction
for an alive bonus); reported returns are not.

`episode_reward_mean` is the current policy's return: the mean of the unperturbed evaluation
episodes (at least `min_eval_episodes` per iteration, more with `eval_prob`) of the last
`report_length` iterations; `rlfleet/algorithms/evolution/trainer.py` has the details.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from rlfleet.algorithms.evolution import Collection, EvolutionTrainer, weighted_noise_sum
from rlfleet.algorithms.evolution.keys import search_keys
from rlfleet.config import ConfigKey, algorithm_config, finite_number, int_at_least, number_above, number_in

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = search_keys(action_noise_std=0.0, eval_prob=0.03) + [
    K("num_rollouts", 32, "Perturbed episodes per iteration (num_rollouts / 2 directions, each tried in both signs).",
      int_at_least(1)),
    K("rollouts_used", 32, "Of those, the top share rollouts_used / num_rollouts of directions (by their better "
      "return) makes the step.", int_at_least(1)),
    K("sgd_stepsize", 0.01, "Step size of the update (SGD on the flat parameters, with sgd_momentum).",
      number_above(0)),
    K("sgd_momentum", 0.9, "Momentum of that SGD: 0.9 is RLlib 1.x's optimizer, 0 the ARS paper's plain step "
      "(benchmarks/zoo_cases/swimmer-ars.yaml uses 0).", number_in(0, 0.999)),
    K("offset", 0.0, "Subtracted (as |offset|) from every step's reward in the returns the update uses.",
      finite_number),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class ARSTrainer(EvolutionTrainer):
    """ARS V2-t on the flat parameters of a linear (`model.fcnet_hiddens: []`) or MLP policy."""

    _name = "ARS"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        if config["rollouts_used"] > config["num_rollouts"]:
            raise ValueError(f"rollouts_used={config['rollouts_used']} is more than num_rollouts="
                             f"{config['num_rollouts']}; the update uses a share of the rollouts gathered, so set "
                             "rollouts_used <= num_rollouts")

    def setup(self, config: dict) -> None:
        super().setup(config)
        self._velocity = np.zeros(self.num_params)

    def collection(self) -> Collection:
        directions = -(-int(self.config["num_rollouts"]) // 2)
        per_task = -(-directions // self._workers_sharing())
        return self._new_collection(per_task, lambda b: False, max_directions=directions)

    def update(self, batch: Collection) -> Dict[str, float]:
        returns = batch.returns - abs(float(self.config["offset"])) * batch.lengths
        best = returns.max(axis=1)
        share = float(self.config["rollouts_used"]) / float(self.config["num_rollouts"])
        keep = best >= np.percentile(best, 100.0 * (1.0 - share))
        used = returns[keep]
        g = weighted_noise_sum(used[:, 0] - used[:, 1], batch.indices[keep], self.noise, self.num_params)
        g /= keep.sum()
        spread = float(np.std(used))
        if not np.isclose(spread, 0.0):
            g /= spread
        # RLlib 1.x's SGD (`rllib/agents/ars/optimizers.py`): v <- m v + (1 - m) grad on the
        # negated estimate, theta <- theta - lr v.
        momentum = float(self.config["sgd_momentum"])
        self._velocity = momentum * self._velocity + (1.0 - momentum) * -g
        step = -float(self.config["sgd_stepsize"]) * self._velocity
        self.theta = self.theta + step
        norm = float(np.linalg.norm(self.theta))
        return {"grad_norm": float(np.linalg.norm(g)), "update_ratio": float(np.linalg.norm(step)) / max(norm, 1e-12),
                "directions_used": int(keep.sum())}

    def _algorithm_state(self) -> Dict[str, Any]:
        return {"velocity": self._velocity.copy()}

    def _set_algorithm_state(self, state: Dict[str, Any]) -> None:
        self._velocity = np.array(state["velocity"], np.float64)


__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "ARSTrainer"]
