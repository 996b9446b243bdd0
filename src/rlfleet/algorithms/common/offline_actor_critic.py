"""What CRR and IQL share: an actor-critic learnt from transitions replayed from offline
`input` (JSON files written by `output`, `minari:<id>`, a custom reader).

- the networks: SAC's (`SACModel`: a policy net giving a squashed Gaussian for Box actions
  or logits for Discrete ones, one or two Q-nets with Polyak-averaged targets) without SAC's
  entropy temperature, plus a state-value net where the algorithm asks for one (IQL);
- the keys both declare (`OFFLINE_AC_KEYS`): net sizes, learning rates, tau, twin Q, and
  the replay keys of `OffPolicyTrainer`, whose loop reads one batch of the input per
  `training_step` (instead of sampling the env), stores it and replays from it;
- the update rate: with `training_intensity` None one update of `train_batch_size` per row
  read (as CQL), so that `learning_starts` and `target_network_update_freq`, counted in rows
  read, count updates too once learning started.

Episode returns come from the env: evaluation (`evaluation_interval`,
`evaluation_config: {"input": "sampler", "explore": False}`) or `input_evaluation: ["simulation"]`.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfleet.algorithms.common.custom_models import refuse_custom_model
from rlfleet.algorithms.common.off_policy import OffPolicyTrainer
from rlfleet.algorithms.common.replay_keys import replay_keys
from rlfleet.algorithms.sac.sac_model import SACModel
from rlfleet.algorithms.sac.sac_policy import sac_action_dist
from rlfleet.config import (ConfigKey, activation, boolean, number_above, number_in, optional, override,
                            positive_int_list)
from rlfleet.models.fcnet import dense_net
from rlfleet.models.target_network import soft_update
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.utils.spaces import is_bounded_box

SB = SampleBatch
K = ConfigKey

# What the replay keys count here: rows read from the input (env steps where input is "sampler").
_OFFLINE_MEANINGS = {
    # Offline data arrive as they were written (often in order of quality): no learning until
    # the buffer holds the dataset is the safe habit, set per dataset (see the tuned examples).
    "learning_starts": "Rows read (env steps with input 'sampler') before learning starts; set it to the "
                       "dataset's size so that learning starts on all of it when its lines are ordered.",
    "training_intensity": "Replayed rows per row read; None: one update of train_batch_size per row read.",
}


def _replay_keys() -> List[ConfigKey]:
    keys = replay_keys(buffer_size=int(1e6), prioritized_replay=False, learning_starts=1000,
                       target_network_update_freq=0)
    return [k._replace(doc=_OFFLINE_MEANINGS[k.name]) if k.name in _OFFLINE_MEANINGS else k for k in keys]


OFFLINE_AC_KEYS: List[ConfigKey] = [
    K("twin_q", True, "Two Q-nets (and targets); the smaller estimate is used.", boolean),
    K("actor_hiddens", [256, 256], "Hidden layer sizes of the policy network.", positive_int_list),
    K("actor_hidden_activation", "relu", "Activation of the policy network's hidden layers.", activation),
    K("critic_hiddens", [256, 256], "Hidden layer sizes of each Q-network (and of the value network where "
      "there is one).", positive_int_list),
    K("critic_hidden_activation", "relu", "Activation of the Q- (and value) networks' hidden layers.", activation),
    K("actor_lr", 3e-4, "Learning rate of the policy network.", number_in(0)),
    K("critic_lr", 3e-4, "Learning rate of the Q-networks.", number_in(0)),
    K("tau", 5e-3, "Polyak averaging of the target Q-nets at each target update: target <- tau * online + "
      "(1 - tau) * target (1: copy).", number_above(0, 1)),
    K("grad_clip", None, "Clip each network's gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    *_replay_keys(),
    # The squashed Gaussian acts in [-1, 1] and the sampler unsquashes to the env's bounds.
    override("clip_actions", False),
    override("normalize_actions", True),
    override("timesteps_per_iteration", 1000),
    override("evaluation_config", {"input": "sampler", "explore": False}),
    override("num_workers", 0),
    override("min_iter_time_s", 0),
]


class OfflineActorCriticModel(SACModel):
    """SAC's networks without the entropy temperature (CRR and IQL regress the policy on
    weighted logged actions, with no entropy term), plus an optional state-value net.

    Args:
        value_model_config: `{"fcnet_hiddens", "fcnet_activation"}` of a V(s) net; None: none.
    """

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, policy_model_config: dict,
                 q_model_config: dict, twin_q: bool, value_model_config: Optional[dict] = None):
        super().__init__(obs_space, action_space, num_outputs, model_config, name,
                         policy_model_config=policy_model_config, q_model_config=q_model_config, twin_q=twin_q,
                         initial_alpha=1.0)
        del self.log_alpha  # no entropy temperature: it would sit unused in checkpoints and exports
        self.value_net = None
        if value_model_config is not None:
            self.value_net = dense_net(int(np.prod(obs_space.shape)), list(value_model_config["fcnet_hiddens"]),
                                       value_model_config["fcnet_activation"], 1)

    def state_value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s) `[B]` of the value net."""
        return self.value_net(self._flat(obs)).squeeze(-1)


class OfflineActorCriticPolicy(TorchPolicy):
    """Acts by sampling its policy (greedily with `explore: False`); learns with the
    subclass's `loss`, one optimizer per network ("critic", "actor", and "value" where the
    model has a value net), each stepped on its own loss.

    Subclasses set `_name`, `supports_discrete` and `value_net` and implement `loss`.
    """

    _name = "offline actor-critic"
    supports_discrete = False
    value_net = False
    loss_columns = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, N_STEPS, PRIO_WEIGHTS)

    def __init__(self, observation_space, action_space, config, **kwargs):
        name = self._name
        if isinstance(action_space, gym.spaces.Box):
            if len(action_space.shape) != 1:
                raise ValueError(f"{name} needs a 1-D Box action space, got shape {action_space.shape}")
            if not is_bounded_box(action_space):
                raise ValueError(f"{name} squashes actions into bounds; the action space {action_space} is "
                                 "unbounded (give the env finite action bounds)")
        elif not (isinstance(action_space, gym.spaces.Discrete) and self.supports_discrete):
            supported = "Box and Discrete" if self.supports_discrete else "1-D Box"
            fix = "" if self.supports_discrete else "; for discrete actions use CRR, BC, MARWIL or DQN"
            raise ValueError(f"{name} supports {supported} action spaces only, got {action_space}{fix}")
        super().__init__(observation_space, action_space, config, **kwargs)

    def make_model_and_action_dist(self):
        cfg = self.config
        refuse_custom_model(cfg["model"], self._name, "'actor_hiddens' and 'critic_hiddens'")
        dist_class, num_outputs = sac_action_dist(self.action_space, cfg["normalize_actions"])
        critic = {"fcnet_hiddens": cfg["critic_hiddens"], "fcnet_activation": cfg["critic_hidden_activation"]}
        model = OfflineActorCriticModel(
            self.observation_space, self.action_space, num_outputs, cfg["model"], f"{self.policy_id}_{self._name}",
            policy_model_config={"fcnet_hiddens": cfg["actor_hiddens"],
                                 "fcnet_activation": cfg["actor_hidden_activation"]},
            q_model_config=critic, twin_q=bool(cfg["twin_q"]), value_model_config=critic if self.value_net else None)
        return dist_class, model

    def min_q(self, nets: List[nn.Module], obs: torch.Tensor, actions: Optional[torch.Tensor] = None
              ) -> torch.Tensor:
        """The smallest of `nets`' Q(s, a) `[B]` (Box) or Q(s, .) `[B, n]` (Discrete)."""
        values = [self.model.q(net, obs, actions) for net in nets]
        return values[0] if len(values) == 1 else torch.min(torch.stack(values), dim=0).values

    def logged_action_q(self, nets: List[nn.Module], obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """`[B]`: the smallest of `nets`' Q(s, a) at the logged actions `a`."""
        if self.model.discrete:
            return self.min_q(nets, obs).gather(1, actions.long().unsqueeze(-1)).squeeze(-1)
        return self.min_q(nets, obs, actions)

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        cfg, model = self.config, self.model
        optimizers = {"critic": self.make_adam(model.q_parameters(), lr=cfg["critic_lr"]),
                      "actor": self.make_adam(model.policy_parameters(), lr=cfg["actor_lr"])}
        if model.value_net is not None:
            optimizers["value"] = self.make_adam(list(model.value_net.parameters()), lr=cfg["value_lr"])
        return optimizers

    def update_target(self, tau: float = None) -> None:
        """Polyak-averages the Q-nets into their targets with `tau` (default: config `tau`)."""
        tau = self.config["tau"] if tau is None else tau
        for target, net in zip(self.model.target_q_nets, self.model.q_nets):
            soft_update(target, net, tau)


def bellman_discounts(batch: Dict[str, torch.Tensor], gamma: float) -> torch.Tensor:
    """gamma ** n_steps, 0 past a terminal step: what multiplies the bootstrapped value."""
    return gamma ** batch[N_STEPS].float() * (1.0 - batch[SB.TERMINATEDS].float())


def critic_regression(q_values: List[torch.Tensor], target: torch.Tensor, weights: torch.Tensor
                      ) -> tuple:
    """`(loss, td_error)`: the sum over the Q-nets of 0.5 * mean(w * (Q_i - y)^2), and the
    per-row mean over the nets of |Q_i - y| (replay priorities)."""
    tds = [q - target for q in q_values]
    loss = sum(0.5 * (weights * td.pow(2)).mean() for td in tds)
    return loss, torch.stack([td.abs() for td in tds]).mean(dim=0).detach()


class OfflineActorCriticTrainer(OffPolicyTrainer):
    """`OffPolicyTrainer`'s loop reading offline `input`; one update per row read (with
    `training_intensity` None), as CQL."""

    def updates_owed(self, steps_sampled: int) -> int:
        if self.config.get("training_intensity") is None:
            return int(steps_sampled)
        return super().updates_owed(steps_sampled)


__all__ = ["OFFLINE_AC_KEYS", "OfflineActorCriticModel", "OfflineActorCriticPolicy", "OfflineActorCriticTrainer",
           "bellman_discounts", "critic_regression"]
