"""DDPG's policy (Lillicrap et al. 2016), with TD3's three changes as options (Fujimoto et
al. 2018): twin critics (`twin_q`), delayed actor updates (`policy_delay`) and target
policy smoothing (`smooth_target_policy`, `target_noise`, `target_noise_clip`)."""
from __future__ import annotations

from typing import Any, Dict, Tuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from rlfleet.algorithms.ddpg.ddpg_model import DDPGModel
from rlfleet.algorithms.off_policy import soft_update
from rlfleet.algorithms.sac.sac_policy import frozen
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
    # sum(w^2) / 2 over weight matrices (biases are not regularised), as the reference.
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

    def __init__(self, observation_space, action_space, config, **kwargs):
        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise ValueError(f"DDPG/TD3 need a 1-D Box action space, got {action_space}; use DQN or SAC "
                             "for discrete actions")
        super().__init__(observation_space, action_space, config, **kwargs)
        self.num_critic_updates = 0

    def make_model_and_action_dist(self):
        cfg = self.config
        low, high = policy_action_bounds(self.action_space, cfg["normalize_actions"])
        model = DDPGModel(self.observation_space, self.action_space, int(np.prod(self.action_space.shape)),
                          cfg["model"], f"{self.policy_id}_ddpg", low=low, high=high,
                          actor_hiddens=cfg["actor_hiddens"], actor_hidden_activation=cfg["actor_hidden_activation"],
                          critic_hiddens=cfg["critic_hiddens"],
                          critic_hidden_activation=cfg["critic_hidden_activation"], twin_q=bool(cfg["twin_q"]))
        return Deterministic, model

    def make_optimizer(self) -> torch.optim.Optimizer:
        self.actor_optimizer = torch.optim.Adam(self.model.actor_parameters(), lr=self.config["actor_lr"])
        # `self.optimizer` (the one TorchPolicy knows) is the critic's.
        return torch.optim.Adam(self.model.critic_parameters(), lr=self.config["critic_lr"])

    def loss(self, model, dist_class, train_batch):
        return ddpg_losses(self, model, dist_class, train_batch)

    def learn_on_batch(self, samples: SampleBatch) -> Dict[str, Any]:
        result: Dict[str, Any] = {}
        if self._learn_hook:
            self.callbacks.on_learn_on_batch(policy=self, train_batch=samples, result=result)
        losses, stats = self.loss(self.model, self.dist_class, self.to_tensors(samples))
        update_actor = self.num_critic_updates % int(self.config["policy_delay"]) == 0
        self.num_critic_updates += 1
        steps = [("critic", self.optimizer, self.model.critic_parameters())]
        if update_actor:
            steps.append(("actor", self.actor_optimizer, self.model.actor_parameters()))
        for _, opt, _ in steps:
            opt.zero_grad(set_to_none=True)
        # Disjoint parameters (see `ddpg_losses`): one backward pass serves both.
        (losses["critic"] + losses["actor"] if update_actor else losses["critic"]).backward()
        grad_clip = self.config.get("grad_clip")
        for name, opt, params in steps:
            if grad_clip is not None:
                stats[f"{name}_gnorm"] = torch.nn.utils.clip_grad_norm_(params, grad_clip)
            opt.step()
        result["td_error"] = stats.pop("td_error").numpy()
        result["learner_stats"] = {k: float(v) for k, v in stats.items()}
        if hasattr(self.exploration, "get_info"):
            result["learner_stats"].update(self.exploration.get_info())
        return result

    def update_target(self, tau: float = None) -> None:
        """Polyak-averages actor and critics into their targets with `tau` (default: config `tau`)."""
        tau = self.config["tau"] if tau is None else tau
        m = self.model
        soft_update(m.target_actor, m.actor, tau)
        soft_update(m.target_critic, m.critic, tau)
        if m.twin_critic is not None:
            soft_update(m.target_twin_critic, m.twin_critic, tau)

    def get_state(self) -> Dict[str, Any]:
        state = super().get_state()
        state["num_critic_updates"] = int(self.num_critic_updates)
        if "optimizer" in state:  # the checkpoint format keeps optimizer state: keep the actor's too
            from rlfleet.policy.torch_policy import optimizer_state

            state["actor_optimizer"] = optimizer_state(self.actor_optimizer)
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        self.num_critic_updates = int(state.get("num_critic_updates", 0))
        if "actor_optimizer" in state:
            from rlfleet.policy.torch_policy import load_optimizer_state

            load_optimizer_state(self.actor_optimizer, state["actor_optimizer"])
