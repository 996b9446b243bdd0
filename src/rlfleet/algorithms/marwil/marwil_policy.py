"""MARWIL's policy: returns as advantages, and the exponentially advantage-weighted
log-likelihood loss (Wang et al. 2018, "Exponentially Weighted Imitation Learning for
Batched Historical Data"). With `beta == 0` it is behaviour cloning."""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import torch

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy, model_forward
from rlfleet.rollout.postprocessing import bootstrap_values, compute_advantages

SB = SampleBatch


def marwil_loss(policy: "MARWILTorchPolicy", model, dist_class, batch: Dict[str, torch.Tensor]
                ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """-mean(exp(beta * A / sqrt(ma(A^2))) * log pi(a|s)) + vf_coeff * 0.5 * mean(A^2).

    `A` is the discounted return (the `advantages` column) minus V(s); the moving average
    of A^2 (`policy.ma_adv_norm`) is updated in place, as RLlib 1.x does (Wang et al. 2018's
    running normaliser of the advantage). With beta 0
    the loss is -mean(log pi(a|s)) and no value function is learnt.
    """
    cfg = policy.config
    logits, _ = model_forward(model, batch)
    dist = dist_class(logits, model)
    logp = dist.logp(batch[SB.ACTIONS])
    stats: Dict[str, torch.Tensor] = {}
    if cfg["beta"] != 0.0:
        values = model.value_function()
        adv = batch[SB.ADVANTAGES] - values
        adv_sq_mean = torch.mean(adv ** 2)
        vf_loss = 0.5 * adv_sq_mean
        rate = cfg["moving_average_sqd_adv_norm_update_rate"]
        policy.ma_adv_norm += rate * (float(adv_sq_mean.detach()) - policy.ma_adv_norm)
        weights = torch.exp(cfg["beta"] * adv.detach() / (1e-8 + policy.ma_adv_norm ** 0.5))
        policy_loss = -torch.mean(weights * logp)
        total = policy_loss + cfg["vf_coeff"] * vf_loss
        returns = batch[SB.ADVANTAGES]
        stats.update(vf_loss=vf_loss.detach(), moving_average_sqd_adv_norm=torch.tensor(policy.ma_adv_norm),
                     vf_explained_var=1.0 - torch.var(returns - values.detach()) / torch.var(returns).clamp_min(1e-8))
    else:
        policy_loss = -torch.mean(logp)
        total = policy_loss
    if cfg["bc_logstd_coeff"] > 0.0 and hasattr(dist, "log_std"):
        total = total - cfg["bc_logstd_coeff"] * torch.mean(dist.log_std)
    total = model.custom_loss(total, batch)
    stats.update(policy_loss=policy_loss.detach(), total_loss=total.detach())
    return total, stats


class MARWILTorchPolicy(TorchPolicy):
    """Acts with its action distribution; learns from (offline) batches with `marwil_loss`."""

    def __init__(self, observation_space, action_space, config, **kwargs):
        super().__init__(observation_space, action_space, config, **kwargs)
        self.ma_adv_norm = float(config["moving_average_sqd_adv_norm_start"])
        beta = config["beta"] != 0.0
        self.loss_columns = (SB.OBS, SB.ACTIONS, SB.ADVANTAGES) if beta else (SB.OBS, SB.ACTIONS)

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        """`advantages` := discounted returns, bootstrapped from V(new_obs) where a
        trajectory is cut without terminating (the loss subtracts V(s) itself)."""
        if SB.NEXT_OBS in sample_batch and self.config["beta"] != 0.0:
            bootstrap = bootstrap_values(self, sample_batch)
        else:
            bootstrap = np.zeros(sample_batch.count, np.float32)
        return compute_advantages(sample_batch, bootstrap, self.config["gamma"], use_gae=False, use_critic=False)

    def loss(self, model, dist_class, train_batch):
        return marwil_loss(self, model, dist_class, train_batch)

    def get_state(self):
        state = super().get_state()
        state["ma_adv_norm"] = float(self.ma_adv_norm)
        return state

    def set_state(self, state):
        super().set_state(state)
        self.ma_adv_norm = float(state.get("ma_adv_norm", self.ma_adv_norm))
