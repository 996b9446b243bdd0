"""The policy side of sequence replay (R2D2, RNNSAC): replayed sequences as tensors, networks
run over them from their start states, and the rows that carry a loss.

A replayed batch holds S sequences laid out as replay/sequences.py stores them: observation
columns `[S, T_obs, ...]`, per-step columns `[S, T, ...]`, `state_in_<k>` `[S, ...]`.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch
from torch import nn

from rlfleet.models.catalog import ModelCatalog
from rlfleet.models.sequence_wrapper import SequenceModelWrapper
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import _tensor
from rlfleet.policy.towers import to_device
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.replay.sequences import SEQ_LOSS_START

SB = SampleBatch

# What every sequence loss reads besides its own columns.
SEQUENCE_COLUMNS = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.TERMINATEDS, N_STEPS, PRIO_WEIGHTS, SB.SEQ_LENS,
                    SEQ_LOSS_START)


def recurrent_features(obs_space, action_space, model_config: dict, name: str, algorithm: str
                       ) -> Tuple[SequenceModelWrapper, int]:
    """`(memory, width)`: the catalog's recurrent model for `model_config` (`use_lstm`: LSTM,
    `use_attention`: GTrXL, over the usual feature model) giving its memory's output, of
    `width` features, instead of logits: the algorithm puts its own heads on it."""
    # One branch: the wrapper's separate value branch would never be used.
    memory = ModelCatalog.get_model(obs_space, action_space, 1, dict(model_config, vf_share_layers=True),
                                    name=f"{name}_memory")
    if not isinstance(memory, SequenceModelWrapper):
        raise ValueError(f"{algorithm} needs the catalog's recurrent model (use_lstm or use_attention); the model "
                         f"config gave a {type(memory).__name__} (action-masking Dict observations are not available "
                         f"for {algorithm} yet)")
    width = int(memory.logits.in_features)
    memory.logits = nn.Identity()
    memory.value_head = None
    return memory, width


def sequence_tensors(policy, batch: SampleBatch, columns: Sequence[str]) -> Dict[str, torch.Tensor]:
    """`columns`, the model's view columns and the recorded states of replayed sequences as
    tensors on the policy's device, laid out as stored."""
    columns = [*columns, *policy.view_columns, *(f"state_in_{k}" for k in range(policy.num_state_tensors()))]
    missing = [c for c in columns if c not in batch]
    if missing:
        raise ValueError(f"{type(policy).__name__} learns on replayed sequences and needs the columns {missing}; "
                         f"got {sorted(batch.keys())}")
    return {c: to_device(_tensor(batch[c]), policy.device) for c in columns}


def sequence_states(policy, batch: Dict[str, torch.Tensor]) -> List[torch.Tensor]:
    """The memory each replayed sequence starts from: the stored state, or zeros with
    `zero_init_states` (RLlib 1.x's R2D2 and RNNSAC default)."""
    states = [batch[f"state_in_{k}"] for k in range(policy.num_state_tensors())]
    return [torch.zeros_like(s) for s in states] if policy.config["zero_init_states"] else states


def run_sequences(net, batch: Dict[str, torch.Tensor], state: List[torch.Tensor]) -> torch.Tensor:
    """`[S, T_obs, ...]` outputs of `net` (a recurrent model: `(input_dict, state, seq_lens)`)
    over the stored observation rows of S sequences."""
    obs = batch[SB.OBS]
    s, t = obs.shape[:2]
    input_dict = {SB.OBS: obs.reshape(s * t, *obs.shape[2:])}
    for key in (SB.PREV_ACTIONS, SB.PREV_REWARDS):
        if key in batch:
            input_dict[key] = batch[key].reshape(s * t, *batch[key].shape[2:])
    out, _ = net(input_dict, state, torch.full((s,), t, dtype=torch.int32))
    return out.reshape(s, t, *out.shape[1:])


def loss_rows(batch: Dict[str, torch.Tensor], length: int) -> torch.Tensor:
    """`[S, length]` True on the trained rows: past the burn-in, before the padding."""
    t = torch.arange(length, device=batch[SB.SEQ_LENS].device)[None, :]
    return (t >= batch[SEQ_LOSS_START][:, None].long()) & (t < batch[SB.SEQ_LENS][:, None].long())


def bootstrap_rows(batch: Dict[str, torch.Tensor], values: torch.Tensor) -> torch.Tensor:
    """`values` `[S, T_obs, ...]` at the row each step bootstraps from (`t + n_steps[t]`):
    `[S, T, ...]` (padding rows, with n_steps 0, pick themselves)."""
    n_steps = batch[N_STEPS].long()
    idx = torch.arange(n_steps.shape[1], device=n_steps.device)[None, :] + n_steps
    idx = idx.reshape(*idx.shape, *([1] * (values.dim() - 2))).expand(-1, -1, *values.shape[2:])
    return values.gather(1, idx)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` over the rows where `mask` is True."""
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype)).sum() / mask.sum().clamp_min(1)


__all__ = ["SEQUENCE_COLUMNS", "bootstrap_rows", "loss_rows", "masked_mean", "recurrent_features", "run_sequences",
           "sequence_states", "sequence_tensors"]
