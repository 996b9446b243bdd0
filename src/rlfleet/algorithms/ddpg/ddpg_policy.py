"""DDPG's policy (Lillicrap et al. 2016), with TD3's three changes as options (Fujimoto et
al. 2018): twin critics (`twin_q`), delayed actor updates (`policy_delay`) and target
policy smoothing (`smooth_target_policy`, `target_noise`, `target_noise_clip`)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlfleet.algorithms.ddpg.ddpg_model import DDPGModel
from rlfleet.algorithms.common.custom_models import refuse_custom_model
from rlfleet.algorithms.ddpg.numpy_learner import DDPGNumpyLearner
from rlfleet.models.target_network import soft_update
from rlfleet.algorithms.common.off_policy_common import frozen
from rlfleet.models.distributions import ActionDistribution
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.utils.spaces import policy_action_bounds

SB = SampleBatch


class Deterministic(ActionDistribution):
    """A point mass at `inputs` (the actor's actions); exploration adds the noise."""

    def sample(self, generator=None):
        return self.inputs

    def deterministic_sample(self):
        return self.inputs

    def logp(self, actions):
        return torch.zeros(actions.shape[0])

    def entropy(self):
        return torch.zeros(self.inputs.shape[0])

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return int(np.prod(action_space.shape))


def _l2(params) -> torch.Tensor:
    # tf.nn.l2_loss's sum(w^2) / 2 over weight matrices only (biases are not regularised), as RLlib 1.x's DDPG.
    return sum(0.5 * p.pow(2).sum() for p in params if p.dim() > 1)


def ddpg_losses(policy: "DDPGTorchPolicy", model: DDPGModel, dist_class, batch: Dict[str, torch.Tensor]
                ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """The critic and actor losses on one replayed batch.

    critic: E[w * err(Q_i(s, a) - y)] summed over the critics (err: 0.5 x^2, or Huber with
        `huber_threshold` when `use_huber`), y = r + gamma^n * (1 - terminated) * min_i Q'_i(s', a'),
        a' = mu'(s') (+ clip(N(0, target_noise), +-target_noise_clip), clipped to the bounds,
        when `smooth_target_policy`); plus `l2_reg` * L2 of the critics' weights.
    actor: -E[Q_1(s, mu(s))] plus `l2_reg` * L2 of the actor's weights.

    Returns:
        `({"critic": ..., "actor": ...}, stats)`; `stats["td_error"]` is Q_1's per-sample error.
    """
    cfg = policy.config
    obs, next_obs, actions = batch[SB.OBS], batch[SB.NEXT_OBS], batch[SB.ACTIONS]
    rewards = batch[SB.REWARDS].float()
    discounts = cfg["gamma"] ** batch[N_STEPS].float() * (1.0 - batch[SB.TERMINATEDS].float())
    weights = batch[PRIO_WEIGHTS].float()
    twin = model.twin_critic is not None

    with torch.no_grad():
        a_tp1 = model.act(model.target_actor, next_obs)
        if cfg["smooth_target_policy"]:
            noise = torch.randn(a_tp1.shape, generator=policy.generator) * cfg["target_noise"]
            noise = noise.clamp(-cfg["target_noise_clip"], cfg["target_noise_clip"])
            a_tp1 = torch.maximum(torch.minimum(a_tp1 + noise, model.high), model.low)
        q_tp1 = model.q(model.target_critic, next_obs, a_tp1)
        if twin:
            q_tp1 = torch.min(q_tp1, model.q(model.target_twin_critic, next_obs, a_tp1))
        target = rewards + discounts * q_tp1

    def err(x: torch.Tensor) -> torch.Tensor:
        if cfg["use_huber"]:
            return F.huber_loss(x, torch.zeros_like(x), reduction="none", delta=cfg["huber_threshold"])
        return 0.5 * x.pow(2)

    q_t = model.q(model.critic, obs, actions)
    td = q_t - target
    errors = err(td)
    if twin:
        errors = errors + err(model.q(model.twin_critic, obs, actions) - target)
    critic_loss = (weights * errors).mean()

    # The actor's gradient reaches the critic's input, never the critic's weights.
    with frozen(model.critic_parameters()):
        q_det = model.q(model.critic, obs, model.act(model.actor, obs))
    actor_loss = -q_det.mean()
    if cfg["l2_reg"]:
        critic_loss = critic_loss + cfg["l2_reg"] * _l2(model.critic_parameters())
        actor_loss = actor_loss + cfg["l2_reg"] * _l2(model.actor_parameters())
    stats = {
        "critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(),
        "mean_q": q_t.mean().detach(), "max_q": q_t.max().detach(), "min_q": q_t.min().detach(),
        "mean_td_error": td.abs().mean().detach(), "td_error": td.detach(),
    }
    return {"critic": critic_loss, "actor": actor_loss}, stats


class DDPGTorchPolicy(TorchPolicy):
    """A deterministic actor with exploration noise; critic steps every update, actor steps
    every `policy_delay` updates."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, N_STEPS, PRIO_WEIGHTS)
    # The NumPy learner (numpy_learner.py), used where `fast_plan` picks it (policy/fast_plan.py).
    numpy_learner = DDPGNumpyLearner

    def __init__(self, observation_space, action_space, config, **kwargs):
        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise ValueError(f"DDPG/TD3 need a 1-D Box action space, got {action_space}; use DQN or SAC "
                             "for discrete actions")
        super().__init__(observation_space, action_space, config, **kwargs)

    def make_model_and_action_dist(self):
        cfg = self.config
        refuse_custom_model(cfg["model"], "DDPG, TD3 and APEX_DDPG", "'actor_hiddens' and 'critic_hiddens'")
        low, high = policy_action_bounds(self.action_space, cfg["normalize_actions"])
        model = DDPGModel(self.observation_space, self.action_space, int(np.prod(self.action_space.shape)),
                          cfg["model"], f"{self.policy_id}_ddpg", low=low, high=high,
                          actor_hiddens=cfg["actor_hiddens"], actor_hidden_activation=cfg["actor_hidden_activation"],
                          critic_hiddens=cfg["critic_hiddens"],
                          critic_hidden_activation=cfg["critic_hidden_activation"], twin_q=bool(cfg["twin_q"]))
        return Deterministic, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        # The critic first: it steps every update, the actor only when `optimizers_to_step` says.
        return {
            "critic": self.make_adam(self.model.critic_parameters(), lr=self.config["critic_lr"]),
            "actor": self.make_adam(self.model.actor_parameters(), lr=self.config["actor_lr"]),
        }

    def optimizers_to_step(self) -> List[str]:
        """TD3's delayed policy updates: the actor (and, through the targets, the target
        actor) moves every `policy_delay` critic updates, starting with the first."""
        if self.num_grad_updates % int(self.config["policy_delay"]) == 0:
            return ["critic", "actor"]
        return ["critic"]

    def loss(self, model, dist_class, train_batch):
        return ddpg_losses(self, model, dist_class, train_batch)

    def update_target(self, tau: float = None) -> None:
        """Polyak-averages actor and critics into their targets with `tau` (default: config `tau`)."""
        tau = self.config["tau"] if tau is None else tau
        m = self.model
        soft_update(m.target_actor, m.actor, tau)
        soft_update(m.target_critic, m.critic, tau)
        if m.twin_critic is not None:
            soft_update(m.target_twin_critic, m.twin_critic, tau)
