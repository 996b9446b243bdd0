"""Curiosity (Pathak et al. 2017, "Curiosity-driven Exploration by Self-supervised
Prediction", the intrinsic curiosity module ICM): a feature net phi, an inverse model
predicting the action from (phi(s), phi(s')) and a forward model predicting phi(s') from
(phi(s), a). The forward model's error, times `eta`, is added to each row's reward in
postprocessing, before the algorithm's own postprocessing (advantages, n-step returns)
reads it; actions come from `sub_exploration`.

How it differs from RLlib 1.x's (`rllib/utils/exploration/curiosity.py`; same maths, other
plumbing):
- RLlib 1.x trains the ICM inside `postprocess_trajectory`, so it refuses remote
  workers (each would train its own). Here postprocessing, on whichever worker sampled, only
  computes the intrinsic reward, with the ICM weights the learner last sent (they travel
  with the policy's weights, prefixed `exploration.`), and the ICM trains where the policy
  learns (`on_learn_on_batch`, on the train batch, before the policy's update): one Adam
  step per piece of trajectory RLlib 1.x would postprocess (one episode's rows within
  one env's fragment: at most `rollout_fragment_length` rows, fewer where an episode ends),
  in order, as many steps as RLlib 1.x takes. With episodes shorter than a fragment
  that is many more steps than one per fragment: the forward model learns what it has seen
  as fast as RLlib 1.x's, so the novelty of visited states fades as fast.
- Each row's intrinsic reward is kept in an `intrinsic_rewards` column; the learner reports
  its mean per step and the intrinsic return of the episodes that ended
  (`info/learner/<policy>/learner_stats/intrinsic_return_mean`), beside the extrinsic returns
  (`episode_reward_mean`, which the sampler measures before postprocessing).

Where it runs: every algorithm whose policy learns on train batches in the trainer (PPO, PG,
A2C, also the off-policy ones, whose replayed rows then carry the reward computed when they
were sampled); A3C refuses it (its workers send gradients, no train batch reaches the ICM).
DD-PPO's workers each learn, so each trains its own ICM, as RLlib 1.x's workers would.
The NumPy fast paths stay on: the actor acts for a StochasticSampling sub-exploration, and
the policy's learner never sees the ICM (its update runs in torch, apart).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfleet.exploration.reward_bonus import RewardBonus
from rlfleet.models.catalog import ModelCatalog
from rlfleet.models.distributions import Categorical, MultiCategorical
from rlfleet.models.fcnet import activation_class, dense_net
from rlfleet.utils.compression import decompress_columns
from rlfleet.utils.optimizer_state import load_optimizer_state, optimizer_state
from rlfleet.utils.seeding import derive_seed

# The column postprocessing adds (each row's intrinsic reward, already inside `rewards`).
INTRINSIC_REWARDS = "intrinsic_rewards"
# Episodes whose intrinsic return is still being summed (an episode cut across train
# batches); the oldest are forgotten past this many (a worker that died mid-episode).
_MAX_OPEN_EPISODES = 10000


def action_dims(action_space: gym.Space, kind: str) -> Tuple[int, ...]:
    """The sizes of the one-hot blocks of `action_space` (Discrete: one; MultiDiscrete: one
    per component).

    Raises:
        ValueError: for any other action space, naming the exploration `kind`.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        return (int(action_space.n),)
    if isinstance(action_space, gym.spaces.MultiDiscrete) and np.ndim(action_space.nvec) == 1:
        return tuple(int(n) for n in action_space.nvec)
    raise ValueError(f"exploration_config.type {kind!r} needs a Discrete or MultiDiscrete action space (its inverse "
                     f"model predicts the action), got {action_space}; use StochasticSampling, or RE3 for other "
                     "spaces with off-policy algorithms")


def one_hot_actions(actions: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    """`[B, sum(dims)]` float one-hot blocks of Discrete (`[B]`) or MultiDiscrete (`[B, k]`) actions."""
    actions = actions.long().reshape(len(actions), -1)
    return torch.cat([nn.functional.one_hot(actions[:, i], n).float() for i, n in enumerate(dims)], dim=-1)


def check_positive_sizes(name: str, value: Any) -> Tuple[int, ...]:
    """`value` as a tuple of positive ints (an MLP's hidden sizes) or a ValueError naming the key."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                and v > 0 for v in value):
        return tuple(int(v) for v in value)
    raise ValueError(f"exploration_config.{name} must be a list of positive layer sizes, got {value!r}")


def feature_model_config(policy_config: dict, overrides: Optional[dict], key: str) -> dict:
    """The `model` config a feature / encoder net is built from: the policy's, with the
    value branch shared (it is never used), updated with `overrides`.

    Raises:
        ValueError: naming `exploration_config.<key>.<entry>` for an entry that is no model
            key, or for a recurrent net (the features are of single observations).
    """
    model = dict(policy_config.get("model") or {})
    overrides = dict(overrides or {})
    unknown = sorted(k for k in overrides if model and k not in model)
    if unknown:
        raise ValueError(f"exploration_config.{key} has unknown model keys {unknown}; it takes the keys of `model` "
                         f"(e.g. fcnet_hiddens, fcnet_activation, conv_filters), which it overrides")
    config = {**model, "vf_share_layers": True, **overrides}
    for memory in ("use_lstm", "use_attention"):
        if config.get(memory):
            raise ValueError(f"exploration_config.{key} builds a recurrent net ({memory}: True, from the policy's "
                             f"model unless overridden); set exploration_config.{key}.{memory}: False")
    return config


def _xavier(net: nn.Module) -> nn.Module:
    # RLlib 1.x initialises the ICM's fully connected layers with Xavier-uniform weights.
    for layer in net.modules():
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return net


class Curiosity(RewardBonus):
    """The intrinsic curiosity module: `eta` x the forward model's error is added to each
    row's reward in postprocessing; the ICM trains on the learner's train batches.

    Args:
        action_space: Discrete or MultiDiscrete.
        feature_dim: the size of the feature vector phi(s).
        feature_net_config: overrides of the policy's `model` config for the feature net
            (built by the ModelCatalog with `feature_dim` outputs; its value branch unused);
            None: the policy's model config.
        inverse_net_hiddens, inverse_net_activation: the inverse model's hidden layers
            (input phi(s) ++ phi(s'), output the action's logits).
        forward_net_hiddens, forward_net_activation: the forward model's hidden layers
            (input phi(s) ++ one-hot(a), output phi(s') predicted).
        beta: the loss weighting: (1 - beta) x inverse loss + beta x forward loss.
        eta: the intrinsic reward's scale: eta x 0.5 x ||phi(s')_predicted - phi(s')||^2.
        lr: the ICM's own Adam learning rate (the policy's `optimizer` options apply).
        sub_exploration: the exploration that picks the actions, `{"type": ..., **options}`
            (`make_exploration` builds it; `default_sub_exploration` when not given).
        policy_config, model, generator: given by the policy.
    """

    kind = "Curiosity"

    def __init__(self, action_space: gym.Space, *, feature_dim: int = 288, feature_net_config: Optional[dict] = None,
                 inverse_net_hiddens: Sequence[int] = (256,), inverse_net_activation: str = "relu",
                 forward_net_hiddens: Sequence[int] = (256,), forward_net_activation: str = "relu",
                 beta: float = 0.2, eta: float = 1.0, lr: float = 1e-3, sub_exploration: Any = None,
                 policy_config: Optional[dict] = None, model: Optional[torch.nn.Module] = None,
                 generator: Optional[torch.Generator] = None):
        self.action_dims = action_dims(action_space, "Curiosity")
        if model is None or not hasattr(model, "obs_space"):
            raise ValueError("exploration_config.type 'Curiosity' needs the policy's model (a TorchPolicy passes it "
                             "as `model`)")
        if isinstance(feature_dim, bool) or not isinstance(feature_dim, (int, np.integer)) or feature_dim < 1:
            raise ValueError(f"exploration_config.feature_dim must be an int >= 1, got {feature_dim!r}")
        if not 0.0 <= float(beta) <= 1.0:
            raise ValueError(f"exploration_config.beta must be in [0, 1] (the forward loss's weight), got {beta!r}")
        if not float(eta) >= 0.0:
            raise ValueError(f"exploration_config.eta must be >= 0 (the intrinsic reward's scale), got {eta!r}")
        if not float(lr) > 0.0:
            raise ValueError(f"exploration_config.lr must be > 0 (the ICM's Adam learning rate), got {lr!r}")
        for key, name in (("inverse_net_activation", inverse_net_activation),
                          ("forward_net_activation", forward_net_activation)):
            try:
                activation_class(name)
            except ValueError as e:
                raise ValueError(f"exploration_config.{key}: {e}") from None
        cfg = policy_config or {}
        self.feature_dim = int(feature_dim)
        self.beta, self.eta, self.lr = float(beta), float(eta), float(lr)
        # The longest piece of one env's trajectory RLlib 1.x postprocesses (and learns on) at once.
        self.max_piece_rows = max(1, int(cfg.get("rollout_fragment_length", 200) or 200))
        features = feature_model_config(cfg, feature_net_config, "feature_net_config")
        inverse = check_positive_sizes("inverse_net_hiddens", inverse_net_hiddens)
        forward = check_positive_sizes("forward_net_hiddens", forward_net_hiddens)
        n_act, f = sum(self.action_dims), self.feature_dim
        # Built on torch's RNG seeded from the policy's seed (forked: nobody else's draws move).
        seed = derive_seed(generator.initial_seed() if generator is not None else 0, "curiosity")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed & 0xFFFFFFFF)
            icm = nn.ModuleDict({
                "feature_net": ModelCatalog.get_model(model.obs_space, action_space, f, features,
                                                      name="curiosity_feature_net"),
                "inverse_net": _xavier(dense_net(2 * f, list(inverse), inverse_net_activation, n_act)),
                "forward_net": _xavier(dense_net(f + n_act, list(forward), forward_net_activation, f)),
            })
        self._init_bonus(action_space, sub_exploration, icm, model)
        self.icm = self.networks
        self._optimizer: Any = None  # Adam, built where the ICM first learns (the policy builds it)
        self._pending_optimizer_state: Optional[dict] = None
        self._open_returns: "OrderedDict[Tuple[int, int], float]" = OrderedDict()
        self._last_return: Optional[float] = None

    # --- the ICM's maths ------------------------------------------------------------------
    def _tensors(self, batch) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch = decompress_columns(batch, ["obs", "new_obs"])
        obs, next_obs = (torch.as_tensor(np.asarray(batch[k])).to(self.device) for k in ("obs", "new_obs"))
        actions = torch.as_tensor(np.asarray(batch["actions"])).to(self.device)
        return obs, next_obs, actions

    def losses(self, obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor
               ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`(forward error per row, forward loss, inverse loss)`: the error is
        0.5 x ||forward(phi(s), a) - phi(s')||^2, the forward loss its mean, the inverse
        loss the mean of -log p(a | phi(s), phi(s'))."""
        phis, _ = self.icm["feature_net"]({"obs": torch.cat([obs, next_obs])}, [], None)
        phi, next_phi = torch.chunk(phis, 2)
        predicted = self.icm["forward_net"](torch.cat([phi, one_hot_actions(actions, self.action_dims)], dim=-1))
        error = 0.5 * torch.sum((predicted - next_phi) ** 2, dim=-1)
        logits = self.icm["inverse_net"](torch.cat([phi, next_phi], dim=-1))
        if len(self.action_dims) == 1:
            logp = Categorical(logits).logp(actions.reshape(-1))
        else:
            logp = MultiCategorical(logits, input_lens=self.action_dims).logp(actions.long())
        return error, error.mean(), -logp.mean()

    def intrinsic_rewards(self, batch) -> np.ndarray:
        """eta x the forward model's error on each row of `batch` (obs, new_obs, actions)."""
        with torch.inference_mode():
            error, _, _ = self.losses(*self._tensors(batch))
        return (self.eta * error).cpu().numpy().astype(np.float32)

    # --- the hooks: postprocessing (any worker) and learning (the learner) ----------------
    def postprocess_trajectory(self, policy, batch):
        """Adds the intrinsic reward to `rewards` (and keeps it as `intrinsic_rewards`)."""
        if batch.count == 0:
            return batch
        intrinsic = self.intrinsic_rewards(batch)
        batch["rewards"] = (np.asarray(batch["rewards"], np.float32) + intrinsic).astype(np.float32)
        batch[INTRINSIC_REWARDS] = intrinsic
        return batch

    def on_learn_on_batch(self, policy, batch) -> None:
        """Trains the ICM on `batch` (one Adam step per `trajectory_pieces` piece, in order)
        and records what the learner reports."""
        n = batch.count
        if n == 0:
            return
        optimizer = self.optimizer(policy)
        obs, next_obs, actions = self._tensors(batch)
        sums = np.zeros(3)
        for start, end in self.trajectory_pieces(batch):
            _, forward_loss, inverse_loss = self.losses(obs[start:end], next_obs[start:end], actions[start:end])
            loss = (1.0 - self.beta) * inverse_loss + self.beta * forward_loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            sums += (end - start) * np.array([float(x.detach()) for x in (loss, forward_loss, inverse_loss)])
        sums /= n
        self._stats = {"curiosity_loss": float(sums[0]), "curiosity_forward_loss": float(sums[1]),
                       "curiosity_inverse_loss": float(sums[2])}
        self._record_rewards(batch)

    def trajectory_pieces(self, batch) -> List[Tuple[int, int]]:
        """`(start, end)` row ranges of `batch`, one per piece of trajectory RLlib 1.x
        postprocesses: a run of rows of one episode (and agent), cut every `max_piece_rows`
        rows (a fragment's length); without `eps_id`, every `max_piece_rows` rows."""
        n = batch.count
        bounds = [0, n]
        if "eps_id" in batch:
            eps_id = np.asarray(batch["eps_id"])
            change = eps_id[1:] != eps_id[:-1]
            if "agent_index" in batch:
                agent = np.asarray(batch["agent_index"])
                change |= agent[1:] != agent[:-1]
            bounds = [0, *(np.flatnonzero(change) + 1).tolist(), n]
        return [(start, min(end, start + self.max_piece_rows)) for begin, end in zip(bounds[:-1], bounds[1:])
                for start in range(begin, end, self.max_piece_rows)]

    def _record_rewards(self, batch) -> None:
        if INTRINSIC_REWARDS not in batch:  # rows postprocessed elsewhere (e.g. replayed offline data)
            return
        intrinsic = np.asarray(batch[INTRINSIC_REWARDS], np.float64)
        self._stats["intrinsic_reward_mean"] = float(intrinsic.mean())
        self._stats["extrinsic_reward_mean"] = float(np.mean(np.asarray(batch["rewards"], np.float64) - intrinsic))
        if "eps_id" not in batch or "dones" not in batch:
            return
        finished = self._episode_returns(intrinsic, np.asarray(batch["eps_id"]), np.asarray(batch["dones"]),
                                         np.asarray(batch["agent_index"]) if "agent_index" in batch else None)
        # No episode ended in this batch: the last mean stays (results keep their keys).
        self._last_return = float(np.mean(finished)) if finished else self._last_return
        if self._last_return is not None:
            self._stats["intrinsic_return_mean"] = self._last_return

    def _episode_returns(self, intrinsic: np.ndarray, eps_id: np.ndarray, dones: np.ndarray,
                         agent_index: Optional[np.ndarray]) -> list:
        """Sums `intrinsic` per (episode, agent) run of rows, carrying episodes cut across
        batches; returns the returns of the episodes whose last row is here."""
        agent = np.zeros(len(eps_id), np.int64) if agent_index is None else agent_index.astype(np.int64)
        change = np.ones(len(eps_id), bool)
        change[1:] = (eps_id[1:] != eps_id[:-1]) | (agent[1:] != agent[:-1])
        starts = np.flatnonzero(change)
        sums = np.add.reduceat(intrinsic, starts)
        lasts = np.append(starts[1:], len(eps_id)) - 1
        finished = []
        for s, last, total in zip(starts, lasts, sums):
            key = (int(eps_id[s]), int(agent[s]))
            total += self._open_returns.pop(key, 0.0)
            if dones[last]:
                finished.append(total)
            else:
                self._open_returns[key] = total
        while len(self._open_returns) > _MAX_OPEN_EPISODES:
            self._open_returns.popitem(last=False)
        return finished

    def optimizer(self, policy) -> Any:
        """The ICM's Adam at `lr`, built by `policy.make_adam` on first use (with any state
        `set_state` received before then)."""
        if self._optimizer is None:
            self._optimizer = policy.make_adam(self.icm.parameters(), lr=self.lr)
            pending, self._pending_optimizer_state = self._pending_optimizer_state, None
            if pending is not None:
                load_optimizer_state(self._optimizer, pending)
        return self._optimizer

    # --- info, weights and state ----------------------------------------------------------
    def get_state(self) -> dict:
        state: Dict[str, Any] = super().get_state()
        if self._optimizer is not None:
            state["optimizer"] = optimizer_state(self._optimizer)
        elif self._pending_optimizer_state is not None:
            state["optimizer"] = self._pending_optimizer_state
        return state

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        saved = state.get("optimizer")
        if saved is not None:
            if self._optimizer is None:
                self._pending_optimizer_state = saved
            else:
                load_optimizer_state(self._optimizer, saved)

