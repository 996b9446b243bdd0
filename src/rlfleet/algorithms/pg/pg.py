"""Vanilla policy gradient (REINFORCE with discounted returns, Williams 1992)."""
from __future__ import annotations

from typing import Dict, List, Tuple

import torch

from rlfleet.algorithms.common.multi_agent import SingleUpdateTrainer
from rlfleet.config import ConfigKey, algorithm_config, override
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy, masked_mean, model_forward
from rlfleet.rollout.postprocessing import compute_advantages

SB = SampleBatch

ALGO_KEYS: List[ConfigKey] = [
    override("num_workers", 0),
    override("lr", 0.0004),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


def pg_loss(policy, model, dist_class, batch: Dict[str, torch.Tensor]) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """-E[log pi(a|s) * return]: the score-function estimator."""
    logits, _ = model_forward(model, batch)
    dist = dist_class(logits, model)
    # masked_mean: padded rows of recurrent sequences count for nothing.
    loss = -masked_mean(batch)(dist.logp(batch[SB.ACTIONS]) * batch[SB.ADVANTAGES])
    loss = model.custom_loss(loss, batch)
    return loss, {"policy_loss": loss.detach()}


class PGTorchPolicy(TorchPolicy):
    """PG's policy: `pg_loss` on each trajectory's discounted returns (no critic, no
    bootstrapping)."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.ADVANTAGES)

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        # REINFORCE (Williams 1992) has no critic, so it never bootstraps: returns are plain discounted sums.
        zeros = torch.zeros(sample_batch.count).numpy()
        return compute_advantages(sample_batch, zeros, self.config["gamma"], use_gae=False, use_critic=False)

    def loss(self, model, dist_class, train_batch):
        return pg_loss(self, model, dist_class, train_batch)


class PGTrainer(SingleUpdateTrainer):
    """Policy gradient: one gradient step per train batch (`SingleUpdateTrainer`'s loop)."""

    _name = "PG"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = PGTorchPolicy
