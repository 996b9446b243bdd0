"""DQN's update written out in NumPy: the (dueling) Q-network's forward pass, the Huber TD
loss's gradient by hand and Adam, on NumPy views of the torch parameters
(`rlfleet.policy.numpy_learner`; why: see there and issue 16).

It computes what `dqn_loss` and `TorchPolicy._step` compute: the n-step target from the
target net (double Q: the online net picks the next action), the Huber loss (delta 1)
weighted by the replay weights, the dueling combination V + A - mean(A), gradient clipping
and the NaN guard. `tests/test_fused_dqn.py` checks weights, optimizer state, stats and TD
errors against the torch path.

`DQNTorchPolicy.learn_on_batch` uses it where exact (`unsupported_reason`): the policy is
`DQNTorchPolicy` itself; one atom (not distributional), no noisy layers, no action mask, a
fully connected trunk and heads (tanh, ReLU or no activation), float32 on the CPU, rlfleet's
`Adam` without weight decay, AMSGrad or `maximize`; and, as SAC's, only while torch runs on
one thread.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from rlfleet.algorithms.dqn.dqn_model import DQNModel
from rlfleet.algorithms.off_policy_common import replay_columns
from rlfleet.fast.mlp import backward, forward
from rlfleet.policy.numpy_learner import FlatAdam, FusedUpdate, clip_guard_and_step, module_layers, nets_reason
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER


def unsupported_reason(policy) -> Optional[str]:
    """Why the fused update cannot stand in for the torch one on `policy` (None: it can)."""
    from rlfleet.algorithms.dqn.dqn_policy import DQNTorchPolicy

    if type(policy) is not DQNTorchPolicy:
        return f"the policy class is {type(policy).__name__}, not DQNTorchPolicy"
    model = policy.model
    if type(model) is not DQNModel or model.num_atoms != 1 or model.mask_layout is not None:
        return "a distributional head, an action mask or another model"
    cfg = policy.config
    if cfg["noisy"] or not model.q_net.flatten:
        return "noisy layers or an image trunk"
    nets = []
    for net in (model.q_net, model.target_q_net):
        nets += [net.trunk, net.advantage] + ([net.value] if net.value is not None else [])
    return nets_reason(policy, nets, {DEFAULT_OPTIMIZER: list(model.q_net.parameters())})


class _QNet:
    """NumPy views of one `QNetwork` (trunk, advantage head, value head when dueling)."""

    def __init__(self, net, grad_views=None):
        self.trunk = module_layers(net.trunk, grad_views)
        self.advantage = module_layers(net.advantage, grad_views)
        self.value = module_layers(net.value, grad_views) if net.value is not None else None

    def q(self, obs: np.ndarray):
        """`(Q [B, A], the layer outputs of trunk, advantage and value for backward)`."""
        trunk = forward(self.trunk[0], obs)
        adv = forward(self.advantage[0], trunk[-1])
        if self.value is None:
            return adv[-1], (trunk, adv, None)
        value = forward(self.value[0], trunk[-1])
        a = adv[-1]
        return value[-1] + a - a.mean(axis=1, keepdims=True), (trunk, adv, value)

    def backward(self, outs, d_q: np.ndarray) -> None:
        """Weight gradients of the loss whose gradient with respect to Q is `d_q`."""
        trunk, adv, value = outs
        if value is None:
            d_features = backward(self.advantage[0], self.advantage[1], adv, d_q, True)
        else:  # Q = V + A - mean(A)
            d_adv = d_q - d_q.mean(axis=1, keepdims=True)
            d_features = backward(self.advantage[0], self.advantage[1], adv, d_adv, True)
            d_features = d_features + backward(self.value[0], self.value[1], value, d_q.sum(1, keepdims=True), True)
        if self.trunk[0]:
            backward(self.trunk[0], self.trunk[1], trunk, d_features, False)


class FusedDQNUpdate(FusedUpdate):
    """The fused update for one policy (check `unsupported_reason` first). Views are
    rebuilt at each call, so loaded weights and optimizer states are the ones trained."""

    def _bind(self) -> None:
        model = self.policy.model
        self.adams = {DEFAULT_OPTIMIZER: FlatAdam(self.policy.optimizers[DEFAULT_OPTIMIZER])}
        self.online = _QNet(model.q_net, self.adams[DEFAULT_OPTIMIZER].grad_views)
        self.target = _QNet(model.target_q_net)

    def _update(self, cols: Dict[str, np.ndarray]) -> Dict[str, Any]:
        policy = self.policy
        cfg = policy.config
        obs, next_obs, actions, rewards, discounts, weights = replay_columns(cols, cfg["gamma"])
        n = len(rewards)
        rows = np.arange(n)
        actions = actions[:, 0].astype(np.int64)
        q_t, outs = self.online.q(obs)
        q_tp1_target, _ = self.target.q(next_obs)
        best = (self.online.q(next_obs)[0] if cfg["double_q"] else q_tp1_target).argmax(axis=1)
        q_selected = q_t[rows, actions]
        target = rewards + discounts * q_tp1_target[rows, best]
        td_error = q_selected - target
        abs_td = np.abs(td_error)
        per_sample = np.where(abs_td < 1.0, 0.5 * td_error * td_error, abs_td - 0.5)  # Huber, delta 1
        loss = float((weights * per_sample).mean())
        stats: Dict[str, Any] = {
            "mean_q": float(q_selected.mean()), "min_q": float(q_selected.min()), "max_q": float(q_selected.max()),
            "loss": loss, "mean_td_error": float(abs_td.mean()), "td_error": td_error,
        }
        self.adams[DEFAULT_OPTIMIZER].grad.fill(0.0)
        d_q = np.zeros_like(q_t)
        d_q[rows, actions] = weights * np.clip(td_error, -1.0, 1.0) * np.float32(1.0 / n)
        self.online.backward(outs, d_q)
        clip_guard_and_step(policy, self.adams, {DEFAULT_OPTIMIZER: loss}, stats)
        return stats


__all__ = ["FusedDQNUpdate", "unsupported_reason"]
