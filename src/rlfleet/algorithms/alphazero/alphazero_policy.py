"""AlphaZero's policy-value network: the catalog model (its logits the move priors, its value
branch the position's value), trained towards the search's visit distribution and the
episode's outcome (Silver et al. 2018):

    loss = mean over rows of  -sum_a pi(a) log p(a)  +  vf_loss_coeff * (z - v)^2

`pi` is the search's normalised visit counts at the row's position, `z` the outcome from the
mover's point of view (two-player: the mover's final result; single-player with ranked rewards:
the episode's ranked reward; else the return still to come). Acting without a search
(`compute_actions`, export, serving, the trainer's evaluation workers) uses the network's
priors alone, masked as every rlfleet model is.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np
import torch

from rlfleet.policy.model_inputs import model_inputs
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy

MCTS_POLICIES = "mcts_policies"
VALUE_LABEL = "value_label"


def alphazero_loss(policy, model, dist_class, batch: Dict[str, torch.Tensor]
                   ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Cross-entropy to the search's policy plus the squared value error (module doc)."""
    logits, _ = model({SampleBatch.OBS: batch[SampleBatch.OBS]}, [], None)
    log_p = torch.log_softmax(logits, dim=-1)
    target = batch[MCTS_POLICIES]
    # Masked logits are the lowest float: where the target is 0 their product must be 0, not nan.
    policy_loss = -(torch.where(target > 0, target * log_p, torch.zeros_like(log_p))).sum(-1).mean()
    value = model.value_function()
    value_loss = ((value - batch[VALUE_LABEL]) ** 2).mean()
    total = policy_loss + float(policy.config["vf_loss_coeff"]) * value_loss
    return total, {"total_loss": total.detach(), "policy_loss": policy_loss.detach(),
                   "vf_loss": value_loss.detach()}


class AlphaZeroPolicy(TorchPolicy):
    """The policy-value network; `evaluate` serves the tree search."""

    loss_columns = (SampleBatch.OBS, MCTS_POLICIES, VALUE_LABEL)

    def __init__(self, observation_space, action_space, config: dict, **kwargs: Any):
        super().__init__(observation_space, action_space, config, **kwargs)
        if self.is_recurrent():
            raise ValueError("AlphaZero's policy-value network must be feed-forward (the search evaluates "
                             "positions, not histories): set model.use_lstm and model.use_attention to False")

    def loss(self, model, dist_class, train_batch):
        return alphazero_loss(self, model, dist_class, train_batch)

    def evaluate(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Move priors `[B, A]` (a softmax over the masked logits) and values `[B]` of a
        batch of preprocessed observations."""
        input_dict, state = model_inputs(self, np.asarray(obs, np.float32), None, None, None)
        with torch.inference_mode():
            logits, _ = self.model(input_dict, state, None)
            priors = torch.softmax(logits.double(), dim=-1).cpu().numpy()
            values = self.model.value_function().double().cpu().numpy()
        return priors, values


def network_evaluator(policy: AlphaZeroPolicy, preprocess) -> Any:
    """`obs list -> (priors, values)` for the search: raw observations through the policy's
    preprocessor (`preprocess(obs) -> flat array`), one batched forward pass."""
    def evaluate(raw: List[Any]) -> Tuple[np.ndarray, np.ndarray]:
        return policy.evaluate(np.stack([preprocess(o) for o in raw]))
    return evaluate


__all__ = ["AlphaZeroPolicy", "alphazero_loss", "network_evaluator", "MCTS_POLICIES", "VALUE_LABEL"]
