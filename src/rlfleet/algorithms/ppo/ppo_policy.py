"""PPO's policy: GAE postprocessing and the clipped-surrogate loss (Schulman et al. 2017)."""
from __future__ import annotations

from typing import Dict, Tuple

import torch

from rlfleet.algorithms.ppo.numpy_learner import PPONumpyLearner
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy, masked_mean, model_forward
from rlfleet.rollout.postprocessing import postprocess_with_critic
from rlfleet.utils.schedules import make_schedule

SB = SampleBatch


def ppo_surrogate_loss(policy: "PPOTorchPolicy", model, dist_class, batch: Dict[str, torch.Tensor]
                       ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Clipped surrogate + KL penalty + clipped value loss - entropy bonus.

    Args:
        policy: supplies the coefficients (`kl_coeff`, `entropy_coeff`, config).
        model: the policy model.
        dist_class: the action distribution class.
        batch: tensors for the loss columns.

    Returns:
        `(total_loss, stats)`.
    """
    cfg = policy.config
    logits, _ = model_forward(model, batch)
    # Padded rows of recurrent sequences count for nothing (a plain mean otherwise).
    reduce_mean = masked_mean(batch)
    dist = dist_class(logits, model)
    old_dist = dist_class(batch[SB.ACTION_DIST_INPUTS], model)
    logp = dist.logp(batch[SB.ACTIONS])
    ratio = torch.exp(logp - batch[SB.ACTION_LOGP])
    adv = batch[SB.ADVANTAGES]
    clip = cfg["clip_param"]
    surrogate = torch.min(adv * ratio, adv * torch.clamp(ratio, 1.0 - clip, 1.0 + clip))
    # With a zero coefficient the KL / the entropy are only reported: computed without a
    # graph, so that backprop skips them (their gradient would be exactly zero).
    with torch.set_grad_enabled(torch.is_grad_enabled() and cfg["kl_coeff"] > 0.0):
        mean_kl = reduce_mean(old_dist.kl(dist))
    with torch.set_grad_enabled(torch.is_grad_enabled() and policy.entropy_coeff != 0.0):
        entropy = reduce_mean(dist.entropy())
    policy_loss = -reduce_mean(surrogate)

    total = policy_loss
    if policy.entropy_coeff != 0.0:
        total = total - policy.entropy_coeff * entropy
    if cfg["kl_coeff"] > 0.0:
        total = total + policy.kl_coeff * mean_kl
    if cfg["use_critic"]:
        values = model.value_function()
        vf_err = torch.pow(values - batch[SB.VALUE_TARGETS], 2.0)
        vf_loss = reduce_mean(torch.clamp(vf_err, 0, cfg["vf_clip_param"]))
        total = total + cfg["vf_loss_coeff"] * vf_loss
    else:
        vf_loss = torch.zeros(())
    total = model.custom_loss(total, batch)
    stats = {
        "total_loss": total.detach(),
        "policy_loss": policy_loss.detach(),
        "vf_loss": vf_loss.detach(),
        "kl": mean_kl.detach(),
        "entropy": entropy.detach(),
    }
    return total, stats


class PPOTorchPolicy(TorchPolicy):
    """Acts with a stochastic policy and records what the PPO loss needs."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.ACTION_LOGP, SB.ACTION_DIST_INPUTS, SB.ADVANTAGES, SB.VALUE_TARGETS)
    # The NumPy learner (numpy_learner.py), used where `fast_plan` picks it (policy/fast_plan.py).
    numpy_learner = PPONumpyLearner

    def __init__(self, observation_space, action_space, config, **kwargs):
        super().__init__(observation_space, action_space, config, **kwargs)
        self.records_values = bool(config["use_critic"])
        self.kl_coeff = float(config["kl_coeff"])
        self.kl_target = float(config["kl_target"])
        self.entropy_schedule = make_schedule(config["entropy_coeff"], config.get("entropy_coeff_schedule"),
                                              "entropy_coeff_schedule")
        self.entropy_coeff = self.entropy_schedule(0)

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        cfg = self.config
        return postprocess_with_critic(self, sample_batch, cfg["gamma"], cfg["lambda"], cfg["use_gae"],
                                       cfg["use_critic"])

    def update_kl(self, sampled_kl: float) -> float:
        """Adaptive KL coefficient: double the pressure when the policy moved too far."""
        if sampled_kl > 2.0 * self.kl_target:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * self.kl_target:
            self.kl_coeff *= 0.5
        return self.kl_coeff

    def on_global_var_update(self, global_vars):
        super().on_global_var_update(global_vars)
        self.entropy_coeff = self.entropy_schedule(self.global_timestep)

    def loss(self, model, dist_class, train_batch):
        return ppo_surrogate_loss(self, model, dist_class, train_batch)

    def get_state(self):
        state = super().get_state()
        state["kl_coeff"] = float(self.kl_coeff)
        return state

    def set_state(self, state):
        super().set_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.kl_coeff))
