"""What a TorchPolicy's loss reads from a loss batch: the model's outputs on it
(`model_forward`) and means over its real rows (`masked_mean`, which leaves padded sequence
rows out)."""
from __future__ import annotations

from typing import Callable, Dict

import torch

from rlfleet.policy.rnn_sequencing import SEQ_MASK
from rlfleet.policy.sample_batch import SampleBatch


def model_forward(model, batch: Dict[str, torch.Tensor]):
    """Runs `model` on a loss batch: obs, the previous actions / rewards when present, and for
    recurrent models the sequences' initial states and `seq_lens`. Returns `(out, state_out)`."""
    input_dict = {SampleBatch.OBS: batch[SampleBatch.OBS]}
    for key in (SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS):
        if key in batch:
            input_dict[key] = batch[key]
    state = []
    while f"state_in_{len(state)}" in batch:
        state.append(batch[f"state_in_{len(state)}"])
    return model(input_dict, state, batch.get(SampleBatch.SEQ_LENS))


def masked_mean(batch: Dict[str, torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """`mean(x)` over the real rows of a loss batch: padded sequence rows (`seq_mask` False)
    contribute nothing; a plain mean when the batch is not padded."""
    mask = batch.get(SEQ_MASK)
    if mask is None:
        return torch.mean
    count = mask.sum().clamp_min(1)

    def mean(x: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, x, torch.zeros((), dtype=x.dtype)).sum() / count

    return mean


__all__ = ["masked_mean", "model_forward"]
