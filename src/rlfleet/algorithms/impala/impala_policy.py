"""IMPALA's policy: the actor-critic loss on V-trace targets, computed on the learner with the
current network just before each update (Espeholt et al. 2018)."""
from __future__ import annotations

import numpy as np
import torch

from rlfleet.algorithms.a2c.a2c_policy import A2CTorchPolicy
from rlfleet.algorithms.common.vtrace import segment_ends, vtrace
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import _obs_array, model_forward
from rlfleet.rollout.postprocessing import postprocess_with_critic
from rlfleet.utils.compression import decompress_columns

SB = SampleBatch


class ImpalaTorchPolicy(A2CTorchPolicy):
    """With `vtrace` the workers record only what they did (`action_logp`); the learner turns
    each train batch into V-trace targets (`value_targets`) and advantages (`advantages`) and
    learns with the actor-critic loss. Without `vtrace`, the workers compute discounted
    returns (bootstrapped) minus values as A2C does, ignoring the policy lag."""

    def __init__(self, observation_space, action_space, config, **kwargs):
        if config["vtrace"] and config["model"].get("use_lstm"):
            raise ValueError("'vtrace': True with 'model': {'use_lstm': True} is not available yet in rlfleet; "
                             "use a feed-forward model or 'vtrace': False")
        super().__init__(observation_space, action_space, config, **kwargs)
        # The workers need values only for their own advantages (no V-trace).
        self.records_values = not config["vtrace"]

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        if self.config["vtrace"]:
            return sample_batch
        return postprocess_with_critic(self, sample_batch, self.config["gamma"], 1.0, False, True)

    def learn_on_batch(self, samples: SampleBatch):
        if self.config["vtrace"]:
            samples = self.with_vtrace_targets(samples)
        return super().learn_on_batch(samples)

    # --- V-trace on the learner ----------------------------------------------------------
    def vtrace_target_logits(self, obs: torch.Tensor, current_logits: torch.Tensor) -> torch.Tensor:
        """The action-distribution inputs of the policy V-trace evaluates: the current one
        (APPO: its target network)."""
        return current_logits

    def with_vtrace_targets(self, samples: SampleBatch) -> SampleBatch:
        """`samples` plus `advantages` (V-trace's policy-gradient advantages) and
        `value_targets` (vs), from one no-grad forward pass over the batch."""
        cfg = self.config
        samples = SampleBatch(decompress_columns(samples, [SB.OBS, SB.NEXT_OBS]))
        ends = segment_ends(samples)
        terminated = np.asarray(samples[SB.TERMINATEDS] if SB.TERMINATEDS in samples else samples[SB.DONES], bool)
        with torch.no_grad():
            obs = torch.as_tensor(_obs_array(samples[SB.OBS])).to(self.device)
            logits, _ = model_forward(self.model, {SB.OBS: obs})
            values = self.model.value_function()
            target_logits = self.vtrace_target_logits(obs, logits)
            target_logp = self.dist_class(target_logits, self.model).logp(torch.as_tensor(samples[SB.ACTIONS]))
        bootstrap = np.zeros(samples.count, np.float32)
        need = ends & ~terminated
        if need.any():
            bootstrap[need] = self.compute_values(np.asarray(samples[SB.NEXT_OBS])[need])
        vs, pg_adv = vtrace(
            behaviour_logp=samples[SB.ACTION_LOGP], target_logp=target_logp.cpu().numpy(),
            rewards=samples[SB.REWARDS], values=values.cpu().numpy(), bootstrap=bootstrap,
            discounts=cfg["gamma"] * (~terminated), ends=ends,
            clip_rho_threshold=cfg["vtrace_clip_rho_threshold"],
            clip_pg_rho_threshold=cfg["vtrace_clip_pg_rho_threshold"])
        samples[SB.VALUE_TARGETS] = vs
        samples[SB.ADVANTAGES] = pg_adv
        self.on_vtrace(samples, target_logits, target_logp)
        return samples

    def on_vtrace(self, samples: SampleBatch, target_logits: torch.Tensor, target_logp: torch.Tensor) -> None:
        """Hook: what else the loss needs from the V-trace pass (APPO: the target policy)."""
