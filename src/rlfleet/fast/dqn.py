"""DQN's loss and its gradients in NumPy: `dqn_loss` with one atom (the n-step target from
the target net, double Q, the Huber loss with delta 1 weighted by the replay weights, the
dueling combination V + A - mean(A)). Returns the stats and writes the online net's
gradients; clipping and stepping are the learning loop's (policy/learning_loop.py)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from rlfleet.fast.mlp import backward, forward

# `(layers, grads)` of one part, as `rlfleet.fast.mlp.numpy_layers` returns them.
Part = Tuple[list, Optional[list]]


class QNet:
    """NumPy views of one Q-network: trunk, advantage head, value head (dueling) or None."""

    def __init__(self, trunk: Part, advantage: Part, value: Optional[Part]):
        self.trunk, self.advantage, self.value = trunk, advantage, value

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


def dqn_gradients(online: QNet, target: QNet, obs, next_obs, actions, rewards, discounts, weights,
                  double_q: bool) -> Dict[str, Any]:
    """The stats (with the per-sample `"td_error"`) of one update; writes the online net's
    gradients into its views (which the caller zeroed)."""
    n = len(rewards)
    rows = np.arange(n)
    q_t, outs = online.q(obs)
    q_tp1_target, _ = target.q(next_obs)
    best = (online.q(next_obs)[0] if double_q else q_tp1_target).argmax(axis=1)
    q_selected = q_t[rows, actions]
    td_error = q_selected - (rewards + discounts * q_tp1_target[rows, best])
    abs_td = np.abs(td_error)
    per_sample = np.where(abs_td < 1.0, 0.5 * td_error * td_error, abs_td - 0.5)  # Huber, delta 1
    loss = float((weights * per_sample).mean())
    d_q = np.zeros_like(q_t)
    d_q[rows, actions] = weights * np.clip(td_error, -1.0, 1.0) * np.float32(1.0 / n)
    online.backward(outs, d_q)
    return {"mean_q": float(q_selected.mean()), "min_q": float(q_selected.min()), "max_q": float(q_selected.max()),
            "loss": loss, "mean_td_error": float(abs_td.mean()), "td_error": td_error}


__all__ = ["QNet", "dqn_gradients"]
