"""SAC's policy: twin-Q soft Bellman targets, the reparameterised actor loss and automatic
entropy tuning (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications");
discrete actions as in Christodoulou 2019 ("Soft Actor-Critic for Discrete Action Settings")."""
from __future__ import annotations

import math
from typing import Dict, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.algorithms.common.custom_models import refuse_custom_model
from rlfleet.algorithms.sac.numpy_learner import SACNumpyLearner
from rlfleet.models.target_network import soft_update
from rlfleet.algorithms.sac.sac_model import SACModel
from rlfleet.models.distributions import Categorical, SquashedGaussian
from rlfleet.algorithms.common.off_policy_common import frozen
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.utils.spaces import is_bounded_box, policy_action_bounds

SB = SampleBatch


def sac_losses(policy: "SACTorchPolicy", model: SACModel, dist_class, batch: Dict[str, torch.Tensor]
               ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """SAC's three losses on one replayed batch, all from the same forward passes.

    critic: 0.5 * E[w * (Q_i(s, a) - y)^2] summed over the Q-nets, with
        y = r + gamma^n * (1 - terminated) * (min_i Q'_i(s', a') - alpha * log pi(a'|s')), a' ~ pi(.|s');
    actor: E[alpha * log pi(a~|s) - min_i Q_i(s, a~)], a~ ~ pi(.|s) reparameterised;
    alpha: -E[log_alpha * (log pi(a~|s) + target_entropy)].
    For discrete actions the expectations over actions are exact sums under pi.

    Args:
        policy: supplies the config, `target_entropy` and the torch generator.
        model: the SACModel.
        dist_class: the action distribution (squashed Gaussian or categorical).
        batch: tensors for `SACTorchPolicy.loss_columns`.

    Returns:
        `({"critic": ..., "actor": ..., "alpha": ...}, stats)`; `stats["td_error"]` is
        per sample (the mean of the Q-nets' absolute errors).
    """
    cfg = policy.config
    gen = policy.generator
    obs, next_obs = batch[SB.OBS], batch[SB.NEXT_OBS]
    rewards = batch[SB.REWARDS].float()
    discounts = cfg["gamma"] ** batch[N_STEPS].float() * (1.0 - batch[SB.TERMINATEDS].float())
    weights = batch[PRIO_WEIGHTS].float()
    alpha = torch.exp(model.log_alpha)
    twin = model.twin_q_net is not None

    dist_t = dist_class(model.policy_inputs(obs), model)
    with torch.no_grad():
        dist_tp1 = dist_class(model.policy_inputs(next_obs), model)

    if model.discrete:
        log_pi_t = dist_t.log_probs
        pi_t = log_pi_t.exp()
        actions = batch[SB.ACTIONS].long()
        rows = torch.arange(actions.shape[0])
        q_all = model.q(model.q_net, obs)
        twin_all = model.q(model.twin_q_net, obs) if twin else None
        q_t = q_all[rows, actions]
        twin_q_t = twin_all[rows, actions] if twin else None
        with torch.no_grad():
            log_pi_tp1 = dist_tp1.log_probs
            q_tp1 = model.q(model.target_q_net, next_obs)
            if twin:
                q_tp1 = torch.min(q_tp1, model.q(model.target_twin_q_net, next_obs))
            v_tp1 = (log_pi_tp1.exp() * (q_tp1 - alpha * log_pi_tp1)).sum(-1)
        q_pi = torch.min(q_all, twin_all) if twin else q_all
        actor_loss = (pi_t * (alpha.detach() * log_pi_t - q_pi.detach())).sum(-1).mean()
        alpha_loss = -(pi_t.detach() * (model.log_alpha * (log_pi_t + policy.target_entropy).detach())).sum(-1).mean()
        entropy = -(pi_t * log_pi_t).sum(-1).mean()
    else:
        if cfg["_deterministic_loss"]:
            a_t = dist_t.deterministic_sample()
            logp_t = dist_t.logp(a_t)
        else:
            a_t, logp_t = dist_t.sample_logp(gen)
        q_t = model.q(model.q_net, obs, batch[SB.ACTIONS])
        twin_q_t = model.q(model.twin_q_net, obs, batch[SB.ACTIONS]) if twin else None
        with torch.no_grad():
            if cfg["_deterministic_loss"]:
                a_tp1 = dist_tp1.deterministic_sample()
                logp_tp1 = dist_tp1.logp(a_tp1)
            else:
                a_tp1, logp_tp1 = dist_tp1.sample_logp(gen)
            q_tp1 = model.q(model.target_q_net, next_obs, a_tp1)
            if twin:
                q_tp1 = torch.min(q_tp1, model.q(model.target_twin_q_net, next_obs, a_tp1))
            v_tp1 = q_tp1 - alpha * logp_tp1
        # The actor's gradient flows through Q into the action, never into Q's weights: with
        # them frozen here, one backward pass of the summed losses gives each optimizer
        # exactly its own loss's gradient.
        with frozen(model.q_parameters()):
            q_pi = model.q(model.q_net, obs, a_t)
            if twin:
                q_pi = torch.min(q_pi, model.q(model.twin_q_net, obs, a_t))
        actor_loss = (alpha.detach() * logp_t - q_pi).mean()
        alpha_loss = -(model.log_alpha * (logp_t + policy.target_entropy).detach()).mean()
        entropy = -logp_t.mean()

    target = (rewards + discounts * v_tp1).detach()
    td = q_t - target
    critic_loss = 0.5 * (weights * td.pow(2)).mean()
    td_error = td.abs()
    if twin:
        twin_td = twin_q_t - target
        critic_loss = critic_loss + 0.5 * (weights * twin_td.pow(2)).mean()
        td_error = 0.5 * (td_error + twin_td.abs())
    stats = {
        "critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "alpha_loss": alpha_loss.detach(),
        "alpha_value": alpha.detach(), "log_alpha_value": model.log_alpha.detach(),
        "target_entropy": torch.tensor(float(policy.target_entropy)), "policy_entropy": entropy.detach(),
        "mean_q": q_t.mean().detach(), "max_q": q_t.max().detach(), "min_q": q_t.min().detach(),
        "mean_td_error": td_error.mean().detach(), "td_error": td_error.detach(),
    }
    return {"critic": critic_loss, "actor": actor_loss, "alpha": alpha_loss}, stats


def sac_action_dist(space: gym.Space, normalize_actions: bool):
    """`(dist_class, num_outputs)` of SAC's policy: categorical for Discrete actions, a squashed
    Gaussian within the (normalised) bounds for Box actions."""
    if isinstance(space, gym.spaces.Discrete):
        return Categorical, int(space.n)
    low, high = policy_action_bounds(space, normalize_actions)
    low_t, high_t = torch.as_tensor(low), torch.as_tensor(high)

    def dist_class(inputs, model=None):
        return SquashedGaussian(inputs, model, low_t, high_t)

    return dist_class, 2 * int(np.prod(space.shape))


class SACTorchPolicy(TorchPolicy):
    """Acts by sampling its (squashed Gaussian or categorical) policy; three optimizers
    (critic, actor, alpha), each stepped on its own loss by TorchPolicy."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, N_STEPS, PRIO_WEIGHTS)
    # The NumPy learner (numpy_learner.py), used where `fast_plan` picks it (policy/fast_plan.py).
    numpy_learner = SACNumpyLearner

    def __init__(self, observation_space, action_space, config, **kwargs):
        if isinstance(action_space, gym.spaces.Box):
            if len(action_space.shape) != 1:
                raise ValueError(f"SAC needs a 1-D Box action space, got shape {action_space.shape}")
            if not is_bounded_box(action_space):
                raise ValueError(f"SAC squashes actions into bounds; the action space {action_space} is unbounded")
        elif not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"SAC supports Box and Discrete action spaces, got {action_space}")
        if config.get("_use_beta_distribution"):
            raise ValueError("'_use_beta_distribution': True is not available yet in this version of rlfleet "
                             "(needs a Beta action distribution); use the default False")
        super().__init__(observation_space, action_space, config, **kwargs)
        target_entropy = config["target_entropy"]
        if target_entropy in (None, "auto"):
            if isinstance(action_space, gym.spaces.Discrete):
                # 98% of the uniform policy's entropy (Christodoulou 2019, arXiv:1910.07207, as RLlib 1.x).
                target_entropy = 0.98 * -math.log(1.0 / int(action_space.n))
            else:
                target_entropy = -float(np.prod(action_space.shape))
        self.target_entropy = float(target_entropy)

    def make_model_and_action_dist(self):
        cfg = self.config
        refuse_custom_model(cfg["model"], "SAC and CQL", "'policy_model' and 'Q_model'")
        space = self.action_space
        dist_class, num_outputs = sac_action_dist(space, cfg["normalize_actions"])
        model = SACModel(self.observation_space, space, num_outputs, cfg["model"], f"{self.policy_id}_sac",
                         policy_model_config=cfg["policy_model"], q_model_config=cfg["Q_model"],
                         twin_q=bool(cfg["twin_q"]), initial_alpha=cfg["initial_alpha"])
        return dist_class, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        # eps=1e-7: Keras' Adam default, which RLlib 1.x's torch SAC kept "to match tf.keras";
        # the `optimizer` config key overrides it.
        opt = self.config["optimization"]
        return {
            "critic": self.make_adam(self.model.q_parameters(), lr=opt["critic_learning_rate"], eps=1e-7),
            "actor": self.make_adam(self.model.policy_parameters(), lr=opt["actor_learning_rate"], eps=1e-7),
            "alpha": self.make_adam([self.model.log_alpha], lr=opt["entropy_learning_rate"], eps=1e-7),
        }

    def loss(self, model, dist_class, train_batch):
        return sac_losses(self, model, dist_class, train_batch)

    def update_target(self, tau: float = None) -> None:
        """Polyak-averages the Q-nets into their targets with `tau` (default: config `tau`)."""
        tau = self.config["tau"] if tau is None else tau
        soft_update(self.model.target_q_net, self.model.q_net, tau)
        if self.model.twin_q_net is not None:
            soft_update(self.model.target_twin_q_net, self.model.twin_q_net, tau)
