"""The advantage actor-critic policy shared by A2C and A3C (Mnih et al. 2016): GAE on the
workers, a summed policy-gradient + value + entropy loss, and gradient accumulation over
microbatches."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from rlfleet.policy.learning_loop import TorchGradients, clip_guard_and_step, exploration_learns, gnorm_stat
from rlfleet.policy.tensor_batch import flat_rows
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER, TorchPolicy, model_forward
from rlfleet.policy.rnn_sequencing import SEQ_MASK
from rlfleet.rollout.postprocessing import postprocess_with_critic
from rlfleet.utils.schedules import make_schedule

SB = SampleBatch


def _masked_sum(batch: Dict[str, torch.Tensor]):
    mask = batch.get(SEQ_MASK)
    if mask is None:
        return torch.sum
    flat = mask.reshape(-1).to(torch.float32)
    return lambda x: torch.sum(x * flat)


def actor_critic_loss(policy: "A2CTorchPolicy", model, dist_class, batch: Dict[str, torch.Tensor]
                      ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """-sum(logp * advantage) + vf_loss_coeff * 0.5 * sum((V - target)^2) - entropy_coeff * sum(entropy).

    Sums over the batch as RLlib 1.x's `a3c_torch_policy.py` does, so its tuned `lr`s carry over:
    the step grows with the batch and `grad_clip` (default 40) bounds it. Padded rows of recurrent
    sequences count for nothing."""
    cfg = policy.config
    logits, _ = model_forward(model, batch)
    dist = dist_class(logits, model)
    reduce_sum = _masked_sum(batch)
    logp = dist.logp(batch[SB.ACTIONS])
    policy_loss = -reduce_sum(logp * batch[SB.ADVANTAGES])
    entropy = reduce_sum(dist.entropy())
    total = policy_loss - policy.entropy_coeff * entropy
    if cfg.get("use_critic", True):
        vf_loss = 0.5 * reduce_sum(torch.pow(model.value_function() - batch[SB.VALUE_TARGETS], 2.0))
        total = total + cfg["vf_loss_coeff"] * vf_loss
    else:
        vf_loss = torch.zeros(())
    total = model.custom_loss(total, batch)
    return total, {"policy_loss": policy_loss.detach(), "vf_loss": vf_loss.detach(),
                   "entropy": entropy.detach(), "total_loss": total.detach()}


class A2CTorchPolicy(TorchPolicy):
    """Acts stochastically, records values, and learns with `actor_critic_loss`."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.ADVANTAGES, SB.VALUE_TARGETS)
    loss_reduction = "sum"  # actor_critic_loss sums over rows (towers add their shards' sums)

    def __init__(self, observation_space, action_space, config, **kwargs):
        super().__init__(observation_space, action_space, config, **kwargs)
        self.records_values = bool(config.get("use_critic", True))
        self.entropy_schedule = make_schedule(config["entropy_coeff"], config.get("entropy_coeff_schedule"),
                                              "entropy_coeff_schedule")
        self.entropy_coeff = self.entropy_schedule(0)

    def make_optimizers(self):
        cfg = self.config
        if cfg.get("opt_type", "adam") == "rmsprop":
            # torch.optim.RMSprop (SB3's A2C optimizer; IMPALA's in RLlib 1.x and in Espeholt et al.
            # 2018, arXiv:1802.01561, with a large epsilon): imports torch._dynamo on its first step
            # (a few seconds, once), which the lean Adam of policy/optim.py avoids.
            return {DEFAULT_OPTIMIZER: torch.optim.RMSprop(self.model.parameters(), lr=self.cur_lr, alpha=cfg["decay"],
                                                           momentum=cfg["momentum"], eps=cfg["epsilon"])}
        return super().make_optimizers()

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        cfg = self.config
        return postprocess_with_critic(self, sample_batch, cfg["gamma"], cfg["lambda"], cfg["use_gae"],
                                       cfg["use_critic"])

    def on_global_var_update(self, global_vars):
        super().on_global_var_update(global_vars)
        self.entropy_coeff = self.entropy_schedule(self.global_timestep)

    def loss(self, model, dist_class, train_batch):
        return actor_critic_loss(self, model, dist_class, train_batch)

    # --- gradients apart from the update (A2C microbatches, A3C workers) ---------------
    def compute_gradients(self, samples: SampleBatch) -> Tuple[List[Any], Dict[str, float]]:
        """Gradients of the loss on `samples` (NumPy, one per model parameter; None for a
        parameter the loss does not reach) and the loss's stats; the weights do not change."""
        params = list(self.model.parameters())
        for p in params:
            p.grad = None
        stats = self._accumulate(self.to_tensors(samples), 1.0)
        grads = [None if p.grad is None else p.grad.detach().numpy().copy() for p in params]
        for p in params:
            p.grad = None
        return grads, stats

    def apply_gradients(self, grads: List[Any]) -> Dict[str, float]:
        """One optimizer step with `grads` (as `compute_gradients` returns them), clipped to
        `grad_clip`. Returns `{"grad_gnorm": ...}` when clipping."""
        params = list(self.model.parameters())
        if len(grads) != len(params):
            raise ValueError(f"got {len(grads)} gradients for a model with {len(params)} parameters")
        for p, g in zip(params, grads):
            # np.array copies: gradients from Ray arrive as read-only views.
            p.grad = None if g is None else torch.as_tensor(np.array(g)).to(p.dtype)
        return self._clip_and_step()

    def learn_on_microbatches(self, samples: SampleBatch, microbatch_size: int) -> Dict[str, Any]:
        """One update from the gradients of `samples` summed over microbatches of
        `microbatch_size` rows (the loss is a sum, so this equals one pass over the whole
        batch with a fraction of the memory)."""
        exploration_learns(self, samples)  # Curiosity's ICM learns from the whole batch first
        optimizer = self.optimizers[DEFAULT_OPTIMIZER]
        optimizer.zero_grad(set_to_none=True)
        totals: Dict[str, float] = {}
        for start in range(0, samples.count, int(microbatch_size)):
            stats = self._accumulate(self.to_tensors(samples.slice(start, start + int(microbatch_size))), 1.0)
            for k, v in stats.items():
                totals[k] = totals.get(k, 0.0) + v
        totals.update(self._clip_and_step(totals))
        return {"learner_stats": self.learner_stats(totals)}

    def _accumulate(self, tensors: Dict[str, torch.Tensor], scale: float) -> Dict[str, float]:
        loss, stats = self.loss(self.model, self.dist_class, flat_rows(tensors))  # padded [S, T] rows: [S * T]
        (loss * scale).backward()
        return {k: float(v) for k, v in stats.items()}

    def _clip_and_step(self, stats: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """The learning loop's update tail (clip, NaN guard, step) on the accumulated
        gradients; the loss is in the gradients, so their norm tells whether it was finite."""
        guarded: Dict[str, Any] = dict(stats or {})
        _ = self.optimizers  # built on first use: TorchGradients reads their parameter lists
        clip_guard_and_step(self, TorchGradients(self), [DEFAULT_OPTIMIZER], {DEFAULT_OPTIMIZER: torch.zeros(())},
                            guarded)
        out = {"num_nonfinite_updates": float(self.nonfinite_guard.total)}
        if gnorm_stat(DEFAULT_OPTIMIZER) in guarded:
            out[gnorm_stat(DEFAULT_OPTIMIZER)] = float(guarded[gnorm_stat(DEFAULT_OPTIMIZER)])
        return out
