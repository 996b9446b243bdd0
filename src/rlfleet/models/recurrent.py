"""Recurrent models: an LSTM on top of a feature model (`use_lstm`).

`LSTMWrapper` builds the usual fully connected or vision net in feature mode (no output
layer), feeds its features (plus, with `lstm_use_prev_action` / `lstm_use_prev_reward`,
the previous action, one-hot encoded where discrete, and the previous reward) through an
`lstm_cell_size` LSTM, and puts the logits and value heads on the LSTM's output.

Inputs follow the reference's convention: `forward` takes flat rows `[N, ...]`;
- acting: `seq_lens` is None and every row is one env at one time step (T = 1);
- learning: `seq_lens` is `[B]` and the rows are B sequences padded to the same length
  T = N / B, sequence-major (`rlfleet.policy.rnn_sequencing.pad_batch_to_sequences`).
`state` is `[h, c]`, each `[B, lstm_cell_size]`: the state at the start of each sequence.
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

from rlfleet.models.fcnet import normc_init_
from rlfleet.models.torch_model import TorchModel
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


class LSTMWrapper(TorchModel):
    """An LSTM over a base model's features, with logits and value heads on its output.

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
        # The base only makes features: its own value head would never be used.
        base_config = dict(model_config, vf_share_layers=True, free_log_std=False, no_final_linear=False)
        self.base = base_class(obs_space, action_space, None, base_config, f"{name}_base", **(base_kwargs or {}))
        feat = int(self.base.num_outputs)
        if isinstance(getattr(self.base, "value_head", None), nn.Module):
            # The wrapper's own value head sits on the LSTM; the base's would never train.
            self.base.value_head = None
        self.cell_size = int(model_config.get("lstm_cell_size", 256))
        self.time_major = bool(model_config.get("_time_major", False))
        self.use_prev_action = bool(model_config.get("lstm_use_prev_action", False))
        self.use_prev_reward = bool(model_config.get("lstm_use_prev_reward", False))
        self.action_encoder = ActionEncoder(action_space) if self.use_prev_action else None
        in_size = feat + (self.action_encoder.size if self.use_prev_action else 0) + int(self.use_prev_reward)
        self.lstm = nn.LSTM(in_size, self.cell_size, batch_first=not self.time_major)
        self.free_log_std = bool(model_config.get("free_log_std", False))
        if self.free_log_std:
            if num_outputs % 2:
                raise ValueError(f"free_log_std needs an even num_outputs, got {num_outputs}")
            num_outputs //= 2
            self.log_std = nn.Parameter(torch.zeros(num_outputs))
        self.logits = normc_init_(nn.Linear(self.cell_size, num_outputs), 0.01)
        self.value_head = normc_init_(nn.Linear(self.cell_size, 1), 0.01)
        self._features: Optional[torch.Tensor] = None

    def get_initial_state(self) -> List[torch.Tensor]:
        return [torch.zeros(self.cell_size), torch.zeros(self.cell_size)]

    def forward(self, input_dict, state, seq_lens):
        feats, _ = self.base(input_dict, [], None)
        n = feats.shape[0]
        parts = [feats]
        if self.use_prev_action:
            parts.append(self.action_encoder(input_dict["prev_actions"]))
        if self.use_prev_reward:
            parts.append(input_dict["prev_rewards"].float().reshape(n, 1))
        x = torch.cat(parts, dim=-1) if len(parts) > 1 else feats
        b = n if seq_lens is None else int(seq_lens.shape[0])
        if b == 0 or n % b:
            raise ValueError(f"LSTMWrapper: {n} rows cannot be {b} equally padded sequences")
        x = x.reshape(b, n // b, -1)
        if not state:
            state = [s.expand(b, -1) for s in self.get_initial_state()]
        h0, c0 = state[0].float().unsqueeze(0), state[1].float().unsqueeze(0)
        if self.time_major:
            out, (h, c) = self.lstm(x.transpose(0, 1), (h0.contiguous(), c0.contiguous()))
            out = out.transpose(0, 1)
        else:
            out, (h, c) = self.lstm(x, (h0.contiguous(), c0.contiguous()))
        self._features = out.reshape(n, self.cell_size)
        logits = self.logits(self._features)
        if self.free_log_std:
            logits = torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return logits, [h[0], c[0]]

    def value_function(self):
        return self.value_head(self._features).squeeze(-1)


__all__ = ["LSTMWrapper", "ActionEncoder"]
