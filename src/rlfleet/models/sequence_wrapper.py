"""What the LSTM and attention wrappers share: a feature model under a sequence model, and
the logits and value heads on the sequence model's output.

`use_lstm` (`recurrent.LSTMWrapper`) and `use_attention` (`attention.AttentionWrapper`)
differ only in the sequence model; both build the base in feature mode, give the value
function its own base and sequence model with `vf_share_layers: False`, and support
`free_log_std`.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import nn

from rlfleet.models.fcnet import normc_init_
from rlfleet.models.torch_model import TorchModel


class SequenceModelWrapper(TorchModel):
    """The common part of `LSTMWrapper` and `AttentionWrapper`; a subclass builds its
    branches (`feature_base` + its sequence model), then calls `make_heads`, and sets
    `self._features` / `self._value_features` in `forward`."""

    def feature_base(self, base_class: type, base_kwargs: Optional[dict], name: str) -> Any:
        """The feature model of one branch: `base_class` with `num_outputs=None` (its
        `num_outputs` is then its feature size)."""
        # The base only makes features: its own value head would never be used.
        base_config = dict(self.model_config, vf_share_layers=True, free_log_std=False, no_final_linear=False)
        base = base_class(self.obs_space, self.action_space, None, base_config, name, **(base_kwargs or {}))
        if isinstance(getattr(base, "value_head", None), nn.Module):
            base.value_head = None
        return base

    def make_heads(self, num_outputs: int, in_size: int) -> None:
        """The logits head (halved, plus a free log-std, with `free_log_std`) and the value
        head on `in_size` features."""
        self.free_log_std = bool(self.model_config.get("free_log_std", False))
        if self.free_log_std:
            if num_outputs % 2:
                raise ValueError(f"free_log_std needs an even num_outputs, got {num_outputs}")
            num_outputs //= 2
            self.log_std = nn.Parameter(torch.zeros(num_outputs))
        self.logits = normc_init_(nn.Linear(in_size, num_outputs), 0.01)
        self.value_head = normc_init_(nn.Linear(in_size, 1), 0.01)
        self._features: Optional[torch.Tensor] = None
        self._value_features: Optional[torch.Tensor] = None

    def num_sequences(self, input_dict, seq_lens) -> Tuple[int, int]:
        """`(rows N, sequences B)`: one row per sequence when acting (`seq_lens` None)."""
        n = input_dict["obs"].shape[0]
        b = n if seq_lens is None else int(seq_lens.shape[0])
        if b == 0 or n % b:
            raise ValueError(f"{type(self).__name__}: {n} rows cannot be {b} equally padded sequences")
        return n, b

    def logits_out(self) -> torch.Tensor:
        logits = self.logits(self._features)
        if self.free_log_std:
            logits = torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return logits

    def value_function(self):
        feats = self._features if self.vf_share_layers else self._value_features
        return self.value_head(feats).squeeze(-1)


__all__ = ["SequenceModelWrapper"]
