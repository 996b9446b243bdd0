"""Recurrent models: an LSTM on top of a feature model (`use_lstm`).

`LSTMWrapper` builds the usual fully connected or vision net in feature mode (no output
layer), feeds its features (plus, with `lstm_use_prev_action` / `lstm_use_prev_reward`,
the previous action, one-hot encoded where discrete, and the previous reward) through an
`lstm_cell_size` LSTM, and puts the logits and value heads on the LSTM's output.

Inputs follow RLlib 1.x's `ModelV2` convention: `forward` takes flat rows `[N, ...]`;
- acting: `seq_lens` is None and every row is one env at one time step (T = 1);
- learning: `seq_lens` is `[B]` and the rows are B sequences padded to the same length
  T = N / B, sequence-major (`rlfleet.policy.rnn_sequencing.pad_batch_to_sequences`).
`state` is `[h, c]` (`[h, c, h_value, c_value]` with a separate recurrent critic), each
`[B, lstm_cell_size]`: the state at the start of each sequence.
The state returned is the one after the last row of each sequence (padding included, so it
is meaningful only when acting).
"""
from __future__ import annotations

from typing import List, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlfleet.models.sequence_wrapper import SequenceModelWrapper
from rlfleet.utils.spaces import flat_action_size, leaf_spaces


class ActionEncoder(nn.Module):
    """Encodes actions in the flat layout (`rlfleet.utils.spaces.action_layout`) as floats:
    one-hot for Discrete and MultiDiscrete parts, as-is for Box and MultiBinary parts."""

    def __init__(self, space: gym.Space):
        super().__init__()
        self.parts = []  # (kind, flat slots, encoded size, extra)
        for leaf in leaf_spaces(space):
            slots = flat_action_size(leaf)
            if isinstance(leaf, gym.spaces.Discrete):
                self.parts.append(("onehot", 1, int(leaf.n), [int(leaf.n)]))
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                nvec = [int(n) for n in np.asarray(leaf.nvec).ravel()]
                self.parts.append(("onehot", slots, sum(nvec), nvec))
            else:
                self.parts.append(("float", slots, slots, None))
        self.size = sum(p[2] for p in self.parts)

    def forward(self, actions: torch.Tensor) -> torch.Tensor:
        n = actions.shape[0]
        flat = actions.reshape(n, -1)
        out, start = [], 0
        for kind, slots, _, nvec in self.parts:
            part = flat[:, start:start + slots]
            start += slots
            if kind == "float":
                out.append(part.float())
            else:
                idx = part.round().long()
                out.extend(F.one_hot(idx[:, i].clamp_min(0), k).float() for i, k in enumerate(nvec))
        return torch.cat(out, dim=-1)


class LSTMWrapper(SequenceModelWrapper):
    """An LSTM over a base model's features, with logits and value heads on its output.

    With `vf_share_layers: False` (PPO's default) the value function has its own base and
    its own LSTM (a recurrent critic): the value loss then never reaches the policy's
    layers. (Measured on StatelessCartPole with vf_loss_coeff 1 and lr 2e-3, a shared LSTM
    stays at random play while a separate one learns; see the tuned example.) The state is
    then `[h, c, h_value, c_value]`; with `vf_share_layers: True` it is `[h, c]`.

    Args:
        obs_space, action_space, num_outputs, model_config, name: as for every model.
        base_class: the feature model class (FullyConnectedNetwork, VisionNetwork, or a
            custom model that supports `num_outputs=None` by setting `self.num_outputs` to
            its feature size).
        base_kwargs: extra keyword arguments for `base_class` (a custom model's config).
    """

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, base_class: type,
                 base_kwargs: Optional[dict] = None):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.cell_size = int(model_config.get("lstm_cell_size", 256))
        self.time_major = bool(model_config.get("_time_major", False))
        self.use_prev_action = bool(model_config.get("lstm_use_prev_action", False))
        self.use_prev_reward = bool(model_config.get("lstm_use_prev_reward", False))
        # What the policy must feed (and the sampler record) besides obs and state.
        self.uses_prev_actions, self.uses_prev_rewards = self.use_prev_action, self.use_prev_reward
        self.vf_share_layers = bool(model_config.get("vf_share_layers", True))
        self.action_encoder = ActionEncoder(action_space) if self.use_prev_action else None
        self.base, self.lstm = self._branch(base_class, base_kwargs, f"{name}_base")
        if self.vf_share_layers:
            self.value_base, self.value_lstm = None, None
        else:
            self.value_base, self.value_lstm = self._branch(base_class, base_kwargs, f"{name}_value_base")
        self.make_heads(num_outputs, self.cell_size)

    def _branch(self, base_class: type, base_kwargs: Optional[dict], name: str):
        """A feature model and the LSTM on its features (plus the previous action / reward)."""
        base = self.feature_base(base_class, base_kwargs, name)
        in_size = (int(base.num_outputs) + (self.action_encoder.size if self.use_prev_action else 0)
                   + int(self.use_prev_reward))
        return base, nn.LSTM(in_size, self.cell_size, batch_first=not self.time_major)

    def get_initial_state(self) -> List[torch.Tensor]:
        return [torch.zeros(self.cell_size) for _ in range(2 if self.vf_share_layers else 4)]

    def _run(self, base: nn.Module, lstm: nn.LSTM, input_dict, h0: torch.Tensor, c0: torch.Tensor, b: int):
        """`(outputs [N, cell], h [B, cell], c [B, cell])` of one branch over B sequences."""
        feats, _ = base(input_dict, [], None)
        n = feats.shape[0]
        parts = [feats]
        if self.use_prev_action:
            parts.append(self.action_encoder(input_dict["prev_actions"]))
        if self.use_prev_reward:
            parts.append(input_dict["prev_rewards"].float().reshape(n, 1))
        x = torch.cat(parts, dim=-1) if len(parts) > 1 else feats
        x = x.reshape(b, n // b, -1)
        hc = (h0.float().unsqueeze(0).contiguous(), c0.float().unsqueeze(0).contiguous())
        if self.time_major:
            out, (h, c) = lstm(x.transpose(0, 1), hc)
            out = out.transpose(0, 1)
        else:
            out, (h, c) = lstm(x, hc)
        return out.reshape(n, self.cell_size), h[0], c[0]

    def forward(self, input_dict, state, seq_lens):
        n, b = self.num_sequences(input_dict, seq_lens)
        if not state:
            state = [s.expand(b, -1) for s in self.get_initial_state()]
        expected = len(self.get_initial_state())
        if len(state) != expected:
            raise ValueError(f"LSTMWrapper: got {len(state)} state tensors, expected {expected} "
                             f"(vf_share_layers={self.vf_share_layers})")
        self._features, h, c = self._run(self.base, self.lstm, input_dict, state[0], state[1], b)
        state_out = [h, c]
        if self.value_lstm is not None:
            self._value_features, hv, cv = self._run(self.value_base, self.value_lstm, input_dict,
                                                     state[2], state[3], b)
            state_out += [hv, cv]
        return self.logits_out(), state_out


__all__ = ["LSTMWrapper", "ActionEncoder"]
