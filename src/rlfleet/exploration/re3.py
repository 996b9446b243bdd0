"""RE3 (Seo et al. 2021, "State Entropy Maximization with Random Encoders for Efficient
Exploration"): a randomly initialised encoder that never trains embeds each observation; the
distance from an embedding to its k-th nearest neighbour within the train batch estimates the
state entropy there, and beta_t x log(1 + distance / its running std) is added to the reward
of each replayed row just before the policy's update. For off-policy algorithms (SAC, DQN,
DDPG, TD3, ...): their train batches come from replay, so the bonus follows the current batch.

How it differs from RLlib 1.x's (`rllib/utils/exploration/random_encoder.py`; same idea,
other plumbing):
- RLlib 1.x computes the embeddings in postprocessing (stored with the replayed rows)
  and the bonus in an `on_learn_on_batch` callback the user must add. Here the exploration
  does both at learning time (the encoder never changes, so the embeddings are the same):
  nothing to add to the callbacks, nothing extra stored in the replay buffer.
- RLlib 1.x's bonus takes the index of the k-th neighbour from an argsort in place of its
  distance; here it is the distance (the paper's estimate), excluding the row itself.
- beta_schedule "linear_decay": beta x (1 - rho)^t, with t counted in iterations of
  `timesteps_per_iteration` env steps (RLlib 1.x counts training iterations, which
  `min_iter_time_s` may lengthen).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.exploration.curiosity import feature_model_config
from rlfleet.exploration.reward_bonus import RewardBonus
from rlfleet.exploration.uniform import uniform_actions
from rlfleet.models.catalog import ModelCatalog
from rlfleet.utils.compression import decompress_columns
from rlfleet.utils.seeding import derive_seed

BETA_SCHEDULES = ("constant", "linear_decay")


class RunningMeanStd:
    """Mean and variance over every value seen, merged batch by batch (RLlib 1.x's
    initial count 1e-4, variance 1)."""

    def __init__(self):
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def update(self, x: np.ndarray) -> None:
        n, mean, var = len(x), float(np.mean(x)), float(np.var(x))
        total = self.count + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.var = (self.var * self.count + var * n + delta ** 2 * self.count * n / total) / total
        self.count = total

    @property
    def std(self) -> float:
        return float(np.sqrt(self.var))

    def get_state(self) -> dict:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def set_state(self, state: dict) -> None:
        self.mean, self.var, self.count = float(state["mean"]), float(state["var"]), float(state["count"])


def knn_distances(embeddings: torch.Tensor, k: int) -> torch.Tensor:
    """The distance from each row to its k-th nearest other row (k clipped to rows - 1)."""
    k = max(1, min(int(k), len(embeddings) - 1))
    distances = torch.cdist(embeddings, embeddings)
    # The smallest of each row is the row itself (0): the k-th other neighbour is at index k.
    return torch.kthvalue(distances, k + 1, dim=-1).values


class RE3(RewardBonus):
    """A fixed random encoder's k-NN state-entropy bonus on each train batch.

    Args:
        action_space: any space the sub-exploration serves.
        embeds_dim: the size of the embeddings.
        encoder_net_config: overrides of the policy's `model` config for the encoder (built by
            the ModelCatalog with `embeds_dim` outputs, randomly initialised, never trained);
            None: the policy's model config.
        beta: the bonus's scale.
        beta_schedule: "constant" or "linear_decay" (beta x (1 - rho)^t, see the module doc).
        rho: the decay rate of "linear_decay".
        k_nn: the neighbour whose distance is the entropy estimate (the k-th nearest).
        random_timesteps: act uniformly at random for this many first timesteps (exploring).
        sub_exploration: the exploration that picks the actions afterwards,
            `{"type": ..., **options}`; `default_sub_exploration` when not given.
        policy_config, model, generator: given by the policy.
    """

    kind = "RE3"

    def __init__(self, action_space: gym.Space, *, embeds_dim: int = 128, encoder_net_config: Optional[dict] = None,
                 beta: float = 0.2, beta_schedule: str = "constant", rho: float = 0.1, k_nn: int = 50,
                 random_timesteps: int = 10000, sub_exploration: Any = None, policy_config: Optional[dict] = None,
                 model: Optional[torch.nn.Module] = None, generator: Optional[torch.Generator] = None):
        if model is None or not hasattr(model, "obs_space"):
            raise ValueError("exploration_config.type 'RE3' needs the policy's model (a TorchPolicy passes it as "
                             "`model`)")
        if isinstance(embeds_dim, bool) or not isinstance(embeds_dim, (int, np.integer)) or embeds_dim < 1:
            raise ValueError(f"exploration_config.embeds_dim must be an int >= 1, got {embeds_dim!r}")
        if isinstance(k_nn, bool) or not isinstance(k_nn, (int, np.integer)) or k_nn < 1:
            raise ValueError(f"exploration_config.k_nn must be an int >= 1 (the k-th nearest neighbour), "
                             f"got {k_nn!r}")
        if not float(beta) >= 0.0:
            raise ValueError(f"exploration_config.beta must be >= 0 (the bonus's scale), got {beta!r}")
        if beta_schedule not in BETA_SCHEDULES:
            raise ValueError(f"exploration_config.beta_schedule must be one of {list(BETA_SCHEDULES)}, "
                             f"got {beta_schedule!r}")
        if not 0.0 <= float(rho) < 1.0:
            raise ValueError(f"exploration_config.rho must be in [0, 1) (the decay per iteration), got {rho!r}")
        cfg = policy_config or {}
        self.embeds_dim, self.k_nn = int(embeds_dim), int(k_nn)
        self.beta, self.beta_schedule, self.rho = float(beta), beta_schedule, float(rho)
        self._random_timesteps = int(random_timesteps)
        self.steps_per_iteration = max(1, int(cfg.get("timesteps_per_iteration") or 1))
        encoder_config = feature_model_config(cfg, encoder_net_config, "encoder_net_config")
        seed = derive_seed(generator.initial_seed() if generator is not None else 0, "re3")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed & 0xFFFFFFFF)
            encoder = ModelCatalog.get_model(model.obs_space, action_space, self.embeds_dim, encoder_config,
                                             name="re3_encoder")
        self._init_bonus(action_space, sub_exploration, encoder.requires_grad_(False), model)
        self.encoder = self.networks
        self.distance_stats = RunningMeanStd()

    # --- acting ---------------------------------------------------------------------------
    @property
    def random_timesteps(self) -> int:
        return max(self._random_timesteps, super().random_timesteps)

    def get_exploration_action(self, dist, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Uniformly random actions for the first `random_timesteps` (exploring), then the
        sub-exploration's `(actions, logp)`."""
        if explore and timestep < self._random_timesteps:
            self.last_timestep = timestep
            return uniform_actions(self.action_space, dist.inputs, generator)
        return self.sub_exploration.get_exploration_action(dist, explore, timestep, generator)

    # --- the bonus, on the learner's batch ------------------------------------------------
    def current_beta(self, timestep: int) -> float:
        if self.beta_schedule == "linear_decay":
            return self.beta * (1.0 - self.rho) ** (int(timestep) // self.steps_per_iteration)
        return self.beta

    def intrinsic_rewards(self, obs: np.ndarray, timestep: int) -> np.ndarray:
        """beta_t x log(1 + d_k / std(d_k)) per row, d_k the k-NN distance of its embedding
        within `obs` (updating the running std first, as RLlib 1.x)."""
        with torch.inference_mode():
            embeddings, _ = self.encoder({"obs": torch.as_tensor(obs).to(self.device)}, [], None)
            distances = knn_distances(embeddings.float(), self.k_nn).cpu().numpy().astype(np.float64)
        self.distance_stats.update(distances)
        return (self.current_beta(timestep) * np.log1p(distances / max(self.distance_stats.std, 1e-8))
                ).astype(np.float32)

    def on_learn_on_batch(self, policy, batch) -> None:
        """Adds the bonus to `rewards` of the train batch (off-policy batches only)."""
        if "advantages" in batch:
            raise ValueError("exploration_config.type 'RE3' adds its bonus to replayed train batches (SAC, DQN, "
                             "DDPG, TD3, ...); this policy's batch holds advantages computed before it could: use "
                             "'Curiosity' for on-policy algorithms")
        if batch.count < 2:
            return
        obs = np.asarray(decompress_columns(batch, ["obs"])["obs"])
        intrinsic = self.intrinsic_rewards(obs, policy.global_timestep)
        extrinsic = np.asarray(batch["rewards"], np.float32)
        batch["rewards"] = extrinsic + intrinsic
        self._stats = {"intrinsic_reward_mean": float(intrinsic.mean()),
                       "extrinsic_reward_mean": float(extrinsic.mean()),
                       "re3_beta": self.current_beta(policy.global_timestep)}

    # --- state ----------------------------------------------------------------------------
    def get_state(self) -> dict:
        return {**super().get_state(), "distance_stats": self.distance_stats.get_state()}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        if "distance_stats" in state:
            self.distance_stats.set_state(state["distance_stats"])
