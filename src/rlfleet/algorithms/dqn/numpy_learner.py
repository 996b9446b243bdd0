"""DQN's NumPy learner: the (dueling) Q-network's forward pass, the Huber TD loss's gradient
by hand and Adam, on NumPy views of the torch parameters (`rlfleet.policy.numpy_learner`;
why: see there: at these sizes torch's per-op dispatch costs more than the arithmetic).

It computes what `dqn_loss` and `TorchPolicy._step` compute: the n-step target from the
target net (double Q: the online net picks the next action), the Huber loss (delta 1)
weighted by the replay weights, the dueling combination V + A - mean(A) (the maths:
`rlfleet.fast.dqn`), gradient clipping and the NaN guard. Its tests train both paths side by
side and compare weights, optimizer state, stats and TD errors.

`DQNTorchPolicy.numpy_learner` names it; `learn_on_batch` hands it the call where exact
(`unsupported_reason`): the policy is `DQNTorchPolicy` itself; one atom (not distributional),
no noisy layers, no action mask, a fully connected trunk and heads (tanh, ReLU or no
activation), float32 on the CPU, rlfleet's `Adam` without weight decay, AMSGrad or
`maximize`; and, as SAC's, only while torch runs on one thread.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from rlfleet.algorithms.dqn.dqn_model import DQNModel
from rlfleet.algorithms.common.off_policy_common import replay_columns
from rlfleet.fast.dqn import QNet, dqn_gradients
from rlfleet.policy.numpy_learner import FlatAdam, OffPolicyNumpyLearner, clip_guard_and_step, module_layers, nets_reason
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER


def unsupported_reason(policy) -> Optional[str]:
    """Why the NumPy learner cannot stand in for the torch update on `policy`, a DQNTorchPolicy
    itself (not a subclass: `numpy_learner_reason` checks), as far as its networks and
    optimizers go (None: it can)."""
    model = policy.model
    if type(model) is not DQNModel or model.num_atoms != 1 or model.mask_layout is not None:
        return "a distributional head, an action mask or another model"
    if model.custom_trunk:
        return "a custom model (model.custom_model) as the trunk"
    cfg = policy.config
    if cfg["noisy"] or not model.q_net.flatten:
        return "noisy layers or an image trunk"
    nets = []
    for net in (model.q_net, model.target_q_net):
        nets += [net.trunk, net.advantage] + ([net.value] if net.value is not None else [])
    return nets_reason(policy, nets, {DEFAULT_OPTIMIZER: list(model.q_net.parameters())})


def _qnet(net, grad_views=None) -> QNet:
    """NumPy views of one `QNetwork` (trunk, advantage head, value head when dueling)."""
    return QNet(module_layers(net.trunk, grad_views), module_layers(net.advantage, grad_views),
                module_layers(net.value, grad_views) if net.value is not None else None)


class DQNNumpyLearner(OffPolicyNumpyLearner):
    """The NumPy learner of one DQNTorchPolicy (check `unsupported_reason` first)."""

    family = "DQN"
    unsupported_reason = staticmethod(unsupported_reason)

    def _bind(self) -> None:
        model = self.policy.model
        self.adams = {DEFAULT_OPTIMIZER: FlatAdam(self.policy.optimizers[DEFAULT_OPTIMIZER])}
        self.online = _qnet(model.q_net, self.adams[DEFAULT_OPTIMIZER].grad_views)
        self.target = _qnet(model.target_q_net)

    def _update(self, cols: Dict[str, np.ndarray]) -> Dict[str, Any]:
        policy = self.policy
        obs, next_obs, actions, rewards, discounts, weights = replay_columns(cols, policy.config["gamma"])
        self.adams[DEFAULT_OPTIMIZER].grad.fill(0.0)
        stats = dqn_gradients(self.online, self.target, obs, next_obs, actions[:, 0].astype(np.int64), rewards,
                              discounts, weights, policy.config["double_q"])
        clip_guard_and_step(policy, self.adams, {DEFAULT_OPTIMIZER: stats["loss"]}, stats)
        return stats


__all__ = ["DQNNumpyLearner", "unsupported_reason"]
