"""APPO's policy: PPO's clipped surrogate (Schulman et al. 2017, arXiv:1707.06347) in IMPALA's
asynchronous data flow.

The "old" policy of the surrogate's ratio depends on `vtrace`:

- `vtrace: True`: a target network refreshed every `target_update_frequency` updates; the
  ratio pi / pi_old is estimated through the behaviour policy mu that sampled, and the
  advantages are V-trace's, computed on the learner.
- `vtrace: False`: the behaviour policy itself (the `action_logp` / `action_dist_inputs` the
  workers recorded); the advantages are the workers' GAE. This is PPO's surrogate: over the
  `num_sgd_iter` passes the learner makes on a train batch, the ratio moves away from 1 and the
  clip bounds how far the policy drifts from the one that sampled. Measured against a target
  refreshed after every pass instead, each pass would restart near ratio 1 and the clip would
  not bind across the passes.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Tuple

import numpy as np
import torch

from rlfleet.algorithms.impala.impala_policy import ImpalaTorchPolicy
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import masked_mean, model_forward
from rlfleet.rollout.postprocessing import postprocess_with_critic

SB = SampleBatch
OLD_LOGP = "old_action_logp"  # log pi_old(a|x) under the target network
OLD_DIST_INPUTS = "old_action_dist_inputs"


def appo_surrogate_loss(policy: "APPOTorchPolicy", model, dist_class, batch: Dict[str, torch.Tensor]
                        ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """-mean(min(r A, clip(r, 1 - c, 1 + c) A)) + vf_loss_coeff * 0.5 * mean((V - vs)^2)
    - entropy_coeff * mean(entropy) [+ kl_coeff * KL(old || new)].

    With V-trace, r = pi / pi_old is estimated as clamp(mu / pi_old, 0, 2) * pi / mu, mu being
    the behaviour policy that sampled and pi_old the target network; A and vs are V-trace's.
    Without, pi_old is mu itself (`learn_on_batch` fills the old-policy columns from the
    behaviour's), so the weight is exp(0) = 1 and r = pi / mu; A and vs come from the workers.
    """
    cfg = policy.config
    logits, _ = model_forward(model, batch)
    reduce_mean = masked_mean(batch)
    dist = dist_class(logits, model)
    logp = dist.logp(batch[SB.ACTIONS])
    behaviour_logp = batch[SB.ACTION_LOGP]
    is_ratio = torch.clamp(torch.exp(behaviour_logp - batch[OLD_LOGP]), 0.0, 2.0)
    ratio = is_ratio * torch.exp(logp - behaviour_logp)
    adv = batch[SB.ADVANTAGES]
    clip = cfg["clip_param"]
    surrogate = torch.min(adv * ratio, adv * torch.clamp(ratio, 1.0 - clip, 1.0 + clip))
    policy_loss = -reduce_mean(surrogate)
    vf_loss = 0.5 * reduce_mean(torch.pow(model.value_function() - batch[SB.VALUE_TARGETS], 2.0))
    entropy = reduce_mean(dist.entropy())
    kl = reduce_mean(dist_class(batch[OLD_DIST_INPUTS], model).kl(dist))
    total = policy_loss + cfg["vf_loss_coeff"] * vf_loss - policy.entropy_coeff * entropy
    if cfg["use_kl_loss"]:
        total = total + policy.kl_coeff * kl
    total = model.custom_loss(total, batch)
    return total, {"total_loss": total.detach(), "policy_loss": policy_loss.detach(), "vf_loss": vf_loss.detach(),
                   "entropy": entropy.detach(), "kl": kl.detach()}


class APPOTorchPolicy(ImpalaTorchPolicy):
    """IMPALA's policy with a target network and the clipped surrogate loss."""

    loss_reduction = "mean"  # appo_surrogate_loss averages over rows (A2C's loss sums)
    loss_columns = (SB.OBS, SB.ACTIONS, SB.ACTION_LOGP, SB.ADVANTAGES, SB.VALUE_TARGETS, OLD_LOGP, OLD_DIST_INPUTS)

    def __init__(self, observation_space, action_space, config, **kwargs):
        super().__init__(observation_space, action_space, config, **kwargs)
        self.target_model = copy.deepcopy(self.model)
        self.target_model.requires_grad_(False)
        self.kl_coeff = float(config["kl_coeff"])
        self.updates_since_target = 0

    def update_target(self) -> None:
        """The target network (the "old" policy) takes the current weights."""
        self.target_model.load_state_dict(self.model.state_dict())
        self.updates_since_target = 0

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        if self.config["vtrace"]:
            return sample_batch
        # Without V-trace the workers compute the advantages, with APPO's `lambda`, `use_gae`, `use_critic`.
        return postprocess_with_critic(self, sample_batch, self.config["gamma"], self.config["lambda"],
                                       self.config["use_gae"], self.config["use_critic"])

    def vtrace_target_logits(self, obs, current_logits):
        logits, _ = model_forward(self.target_model, {SB.OBS: obs})
        return logits

    def on_vtrace(self, samples, target_logits, target_logp):
        samples[OLD_DIST_INPUTS] = target_logits.cpu().numpy()
        samples[OLD_LOGP] = target_logp.cpu().numpy()

    def learn_on_batch(self, samples: SampleBatch) -> Dict[str, Any]:
        if self.config["vtrace"]:
            samples = self.with_vtrace_targets(samples)
        else:  # advantages from the workers; the old policy is the behaviour policy (module docstring)
            missing = [c for c in (SB.ACTION_LOGP, SB.ACTION_DIST_INPUTS) if c not in samples]
            if missing:
                raise ValueError(f"APPO with 'vtrace': False measures its ratio against the policy that sampled, but "
                                 f"the train batch has no {missing} column (data recorded without them?); record "
                                 "them with the data, or set 'vtrace': True")
            samples = SampleBatch(samples)  # new columns, same arrays: the batch is replayed as it came
            samples[OLD_LOGP] = samples[SB.ACTION_LOGP]
            samples[OLD_DIST_INPUTS] = samples[SB.ACTION_DIST_INPUTS]
        result = super(ImpalaTorchPolicy, self).learn_on_batch(samples)
        stats = result["learner_stats"]
        if self.config["use_kl_loss"]:
            stats["kl_coeff"] = self.kl_coeff
            self.update_kl(stats["kl"])
        self.updates_since_target += 1
        if self.updates_since_target >= self.config["target_update_frequency"]:
            self.update_target()
        return result

    def update_kl(self, sampled_kl: float) -> float:
        """As PPO's adaptive KL coefficient."""
        if sampled_kl > 2.0 * self.config["kl_target"]:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * self.config["kl_target"]:
            self.kl_coeff *= 0.5
        return self.kl_coeff

    def loss(self, model, dist_class, train_batch):
        return appo_surrogate_loss(self, model, dist_class, train_batch)

    def get_state(self):
        state = super().get_state()
        state["kl_coeff"] = float(self.kl_coeff)
        state["target_weights"] = {k: v.detach().cpu().numpy().copy()
                                   for k, v in self.target_model.state_dict().items()}
        return state

    def set_state(self, state):
        super().set_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.kl_coeff))
        target = state.get("target_weights")
        if target is not None:
            self.target_model.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in target.items()})
        else:
            self.update_target()
