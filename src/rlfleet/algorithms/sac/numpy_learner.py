"""SAC's NumPy learner (continuous actions): the three losses' gradients by hand, then the
three Adam steps, on NumPy views of the torch parameters.

Why: at SAC's usual sizes ([256, 256] nets, 256 rows) a torch update spends a third or more
of its time in per-op dispatch and autograd bookkeeping; the arithmetic, done here with one
matrix product per layer and direction, is what is left (`benchmarks/learner.py` times both).

It computes what `sac_losses` and `TorchPolicy._step` compute: the reparameterised draw from
the squashed Gaussian (the same noise, drawn from the policy's torch generator in the same
order), log-std clamping, the twin-Q minimum (torch's rule for ties: half the gradient to
each), the critic loss with replay weights and n-step discounts, the actor loss through the
frozen Q-nets, the alpha loss, per-network gradient clipping, the NaN guard, and each
optimizer's `Adam` step on its own flat moment buffers (`rlfleet.policy.numpy_learner`).
Its tests train both paths side by side and compare weights, optimizer states, stats and
TD errors.

`SACTorchPolicy.numpy_learner` names it; `learn_on_batch` hands it the call where exact
(`unsupported_reason`): the policy is
`SACTorchPolicy` itself with Box actions, its nets Linear layers with tanh, ReLU or no
activation, float32 on the CPU, no towers, rlfleet `Adam`s without weight decay, AMSGrad or
`maximize`, and `_deterministic_loss` off; and only while torch runs on one thread (with more,
torch's multi-threaded products are as fast or faster). Everything else keeps the torch
path, as does `fast_path: "off"` (policy/fast_plan.py).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch

from rlfleet.algorithms.common.off_policy_common import replay_columns
from rlfleet.algorithms.sac.sac_model import SACModel
from rlfleet.fast.sac import SACNets, sac_gradients
from rlfleet.policy.numpy_learner import (FlatAdam, OffPolicyNumpyLearner, clip_guard_and_step, critic_layers,
                                          module_layers, nets_reason)
from rlfleet.utils.spaces import policy_action_bounds

_NAMES = ("critic", "actor", "alpha")


def unsupported_reason(policy) -> Optional[str]:
    """Why the NumPy learner cannot stand in for the torch update on `policy`, a SACTorchPolicy
    itself (not a subclass: `numpy_learner_reason` checks), as far as its networks and
    optimizers go (None: it can)."""
    model = policy.model
    if type(model) is not SACModel or model.discrete:
        return "discrete actions or another model"
    if policy.config["_deterministic_loss"]:
        return "_deterministic_loss"
    nets = [model.policy_net, model.q_net, model.target_q_net]
    if model.twin_q_net is not None:
        nets += [model.twin_q_net, model.target_twin_q_net]
    return nets_reason(policy, nets, {"critic": model.q_parameters(), "actor": model.policy_parameters(),
                                      "alpha": [model.log_alpha]})


class SACNumpyLearner(OffPolicyNumpyLearner):
    """The NumPy learner of one SACTorchPolicy (check `unsupported_reason` first)."""

    family = "SAC"
    unsupported_reason = staticmethod(unsupported_reason)

    def __init__(self, policy):
        super().__init__(policy)
        low, high = policy_action_bounds(policy.action_space, policy.config["normalize_actions"])
        self.low = np.asarray(low, np.float32)
        self.high = np.asarray(high, np.float32)

    def _bind(self) -> None:
        policy, model = self.policy, self.policy.model
        self.adams = {name: FlatAdam(policy.optimizers[name]) for name in _NAMES}
        q, target_q = critic_layers((model.q_net, model.twin_q_net), (model.target_q_net, model.target_twin_q_net),
                                    self.adams["critic"].grad_views)
        self.nets = SACNets(module_layers(model.policy_net, self.adams["actor"].grad_views), q, target_q,
                            model.log_alpha.detach().numpy(), self.adams["alpha"].grad_views[id(model.log_alpha)],
                            self.low, self.high)

    def _update(self, cols: Dict[str, np.ndarray]) -> Dict[str, Any]:
        policy = self.policy
        obs, next_obs, actions, rewards, discounts, weights = replay_columns(cols, policy.config["gamma"])
        shape = actions.shape
        # The noise in the torch path's order: the draw at s, then the one at s'.
        noise_t = torch.randn(shape, generator=policy.generator, dtype=torch.float32).numpy()
        noise_tp1 = torch.randn(shape, generator=policy.generator, dtype=torch.float32).numpy()
        for adam in self.adams.values():
            adam.grad.fill(0.0)
        stats = sac_gradients(self.nets, obs, next_obs, actions, rewards, discounts, weights, policy.target_entropy,
                              noise_t, noise_tp1, self.lanes)
        clip_guard_and_step(policy, self.adams, {k: stats[f"{k}_loss"] for k in _NAMES}, stats)
        # As the torch path reports it: the parameter's value once the step is taken.
        stats["log_alpha_value"] = float(self.nets.log_alpha)
        return stats


__all__ = ["SACNumpyLearner", "unsupported_reason"]
