"""DDPG / TD3's NumPy learner: the critic and actor losses' gradients by hand, then the Adam
steps of the optimizers `optimizers_to_step` names, on NumPy views of the torch parameters
(`rlfleet.policy.numpy_learner`; why: see there: at these sizes torch's per-op dispatch costs
more than the arithmetic).

It computes what `ddpg_losses` and `TorchPolicy._step` compute: target policy smoothing
(the same noise, from the policy's torch generator), clipped double Q, squared or Huber
error with replay weights and n-step discounts, the L2 penalty on weight matrices, the actor
loss through the frozen first critic, TD3's delayed actor steps, per-network gradient
clipping and the NaN guard. Its tests train both paths side by side and compare weights,
optimizer states, stats and TD errors.

`DDPGTorchPolicy.numpy_learner` names it; `learn_on_batch` (DDPG, TD3, APEX-DDPG) hands it
the call where exact
(`unsupported_reason`): the policy is `DDPGTorchPolicy` itself, its nets Linear layers with
tanh, ReLU or no activation, float32 on the CPU, no towers, rlfleet `Adam`s without weight
decay, AMSGrad or `maximize`; and, as SAC's, only while torch runs on one thread.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch

from rlfleet.algorithms.ddpg.ddpg_model import DDPGModel
from rlfleet.algorithms.common.off_policy_common import replay_columns
from rlfleet.fast.ddpg import DDPGNets, DDPGSettings, ddpg_gradients
from rlfleet.policy.numpy_learner import (FlatAdam, OffPolicyNumpyLearner, clip_guard_and_step, critic_layers,
                                          module_layers, nets_reason)
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
_NAMES = ("critic", "actor")


def unsupported_reason(policy) -> Optional[str]:
    """Why the NumPy learner cannot stand in for the torch update on `policy`, a DDPGTorchPolicy
    itself (not a subclass: `numpy_learner_reason` checks), as far as its networks and
    optimizers go (None: it can)."""
    model = policy.model
    if type(model) is not DDPGModel:
        return "another model"
    nets = [model.actor, model.critic, model.target_actor, model.target_critic]
    if model.twin_critic is not None:
        nets += [model.twin_critic, model.target_twin_critic]
    return nets_reason(policy, nets, {"critic": model.critic_parameters(), "actor": model.actor_parameters()})


class DDPGNumpyLearner(OffPolicyNumpyLearner):
    """The NumPy learner of one DDPGTorchPolicy (check `unsupported_reason` first)."""

    family = "DDPG"
    unsupported_reason = staticmethod(unsupported_reason)

    def _bind(self) -> None:
        policy, model = self.policy, self.policy.model
        self.adams = {name: FlatAdam(policy.optimizers[name]) for name in _NAMES}
        critics, target_critics = critic_layers((model.critic, model.twin_critic),
                                                (model.target_critic, model.target_twin_critic),
                                                self.adams["critic"].grad_views)
        self.nets = DDPGNets(module_layers(model.actor, self.adams["actor"].grad_views),
                             module_layers(model.target_actor)[0], critics, target_critics, model.bounded,
                             model.low.numpy(), model.high.numpy())

    def _update(self, cols: Dict[str, np.ndarray]) -> Dict[str, Any]:
        policy = self.policy
        cfg = policy.config
        names = policy.optimizers_to_step()  # the critic; the actor every `policy_delay` updates
        obs, next_obs, actions, rewards, discounts, weights = replay_columns(cols, cfg["gamma"])
        # The torch path draws the smoothing noise from the policy's generator: the same draw.
        noise = (torch.randn(actions.shape, generator=policy.generator).numpy() if cfg["smooth_target_policy"]
                 else None)
        adams = {name: self.adams[name] for name in names}
        for adam in adams.values():
            adam.grad.fill(0.0)
        settings = DDPGSettings(cfg["smooth_target_policy"], cfg["target_noise"], cfg["target_noise_clip"],
                                cfg["use_huber"], cfg["huber_threshold"], cfg["l2_reg"])
        stats = ddpg_gradients(self.nets, obs, next_obs, actions, rewards, discounts, weights, settings, noise,
                               "actor" in adams, self.lanes)
        clip_guard_and_step(policy, adams, {"critic": stats["critic_loss"], "actor": stats["actor_loss"]}, stats)
        return stats


__all__ = ["DDPGNumpyLearner", "unsupported_reason"]
