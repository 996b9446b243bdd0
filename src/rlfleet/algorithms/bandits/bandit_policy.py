"""The linear bandit policies: act on the disjoint per-arm linear models
(`linear_models.py`) and update them online from each batch's (context, arm, reward) rows.

`LinUCBPolicy` acts on upper confidence bounds (`alpha`), `LinTSPolicy` on a posterior draw;
both act greedily on the estimates with `explore=False`. They need a Discrete action space
(the arms) and a flat Box observation space (the context).
"""
from __future__ import annotations

import secrets
from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.algorithms.bandits.linear_models import DisjointLinearModels
from rlfleet.policy.fast_plan import NUMPY, FastPathPlan
from rlfleet.policy.policy import Policy
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.utils.seeding import derive_seed

SB = SampleBatch

_NUMPY_ONLY = "the linear bandit models are NumPy only (there is no torch path)"


class LinearBanditPolicy(Policy):
    """A policy over `DisjointLinearModels`; subclasses choose the exploration scores.

    Args:
        observation_space: a Box of contexts (flattened to `prod(shape)` features).
        action_space: a Discrete space: one arm per action.
        config: the trainer config (`lambda_`, `seed`, `explore`; `alpha` for LinUCB,
            `posterior_scale` for LinTS).
    """

    # Its learner reads each step's env info (the bandit envs' `regret`): the rollout
    # worker records the `infos` column for it.
    needs_infos = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict, *,
                 policy_id: str = "default_policy"):
        super().__init__(observation_space, action_space, config)
        name = type(self).__name__
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"{name} needs a Discrete action space (one action per arm); got {action_space}")
        if not isinstance(observation_space, gym.spaces.Box):
            raise ValueError(f"{name} needs a Box observation space (the context); got {observation_space}")
        self.policy_id = policy_id
        self.dim = int(np.prod(observation_space.shape))
        self.models = DisjointLinearModels(int(action_space.n), self.dim, float(config.get("lambda_", 1.0)))
        seed = config.get("seed")
        base = derive_seed(seed, config.get("worker_index", 0), policy_id) if seed is not None else secrets.randbits(63)
        self.np_random = np.random.default_rng(base)

    # What results report under `info/learner/<pid>/fast_path*` (the trainer refuses
    # `fast_path: "off"`, which they cannot honour).
    fast_plan = FastPathPlan(actor=NUMPY, actor_reason=_NUMPY_ONLY, learner=NUMPY, learner_reason=_NUMPY_ONLY)

    def exploration_scores(self, contexts: np.ndarray) -> np.ndarray:
        """`[B, num_arms]` scores the policy acts on when exploring."""
        raise NotImplementedError  # abstract

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore: Optional[bool] = None, timestep: Optional[int] = None,
                        **kwargs) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
        contexts = np.asarray(obs_batch, np.float64).reshape(-1, self.dim)
        explore = self.config.get("explore", True) if explore is None else explore
        scores = self.exploration_scores(contexts) if explore else self.models.mean_scores(contexts)
        return scores.argmax(axis=1).astype(np.int64), [], {}

    def learn_on_batch(self, samples: SampleBatch) -> Dict[str, Any]:
        contexts = np.asarray(samples[SB.OBS], np.float64).reshape(-1, self.dim)
        self.models.update(contexts, np.asarray(samples[SB.ACTIONS]), np.asarray(samples[SB.REWARDS], np.float64))
        return {"learner_stats": {"num_updates": int(self.models.counts.sum())}}

    def get_weights(self) -> Dict[str, np.ndarray]:
        return self.models.get_arrays()

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        self.models.set_arrays(weights)

    def get_state(self) -> Dict[str, Any]:
        return dict(super().get_state(), rng={"numpy": self.np_random.bit_generator.state})

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        if "rng" in state:
            self.np_random.bit_generator.state = state["rng"]["numpy"]


class LinUCBPolicy(LinearBanditPolicy):
    """Acts on `theta_k . x + alpha * sqrt(x^T A_k^-1 x)` (LinUCB)."""

    def exploration_scores(self, contexts: np.ndarray) -> np.ndarray:
        return self.models.ucb_scores(contexts, float(self.config["alpha"]))


class LinTSPolicy(LinearBanditPolicy):
    """Acts on a draw from each arm's Gaussian posterior, its spread times `posterior_scale`
    (linear Thompson sampling)."""

    def exploration_scores(self, contexts: np.ndarray) -> np.ndarray:
        return self.models.thompson_scores(contexts, self.np_random, float(self.config["posterior_scale"]))


__all__ = ["LinearBanditPolicy", "LinUCBPolicy", "LinTSPolicy"]
