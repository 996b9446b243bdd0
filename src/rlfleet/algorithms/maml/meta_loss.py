"""MAML's outer objective across tasks: PPO's clipped surrogate on each task's post-adaptation
batch, under the parameters that inner adaptation from the meta parameters gives, plus a KL
penalty per inner step (Finn et al. 2017, arXiv 1703.03400, with the PPO outer step and the
inner-step KL penalties of ProMP, Rothfuss et al. 2018, arXiv 1810.06784, section 5)."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch

from rlfleet.algorithms.maml.adaptation import adapt, forward_with, model_params
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch


def maml_loss(policy, model, dist_class, task_batches: Sequence[Sequence[Dict[str, torch.Tensor]]]
              ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """The meta loss on one iteration's tasks.

    For each task, batches `0 .. K-1` (K = `inner_adaptation_steps`) drive the inner steps
    from the model's own parameters, kept in the graph; batch `K`, sampled with the adapted
    policy, gets PPO's loss: `-min(r A, clip(r, 1 - clip_param, 1 + clip_param) A)` +
    `vf_loss_coeff` * clamped squared value error - `entropy_coeff` * entropy. The mean over
    tasks, plus `kl_coeffs[i]` times the mean KL of inner step `i` (from the policy that
    sampled batch `i` to the one the current meta parameters adapt to), is the loss.

    Args:
        policy: supplies the config and the per-step `kl_coeffs`.
        model: the policy model (the meta parameters are its parameters).
        dist_class: the action distribution class.
        task_batches: per task, its `K + 1` batches as tensors, in sampling order.

    Returns:
        `(loss, stats)`; stats `inner_kl` holds the mean KL per inner step (a `[K]` tensor).
    """
    cfg = policy.config
    steps = int(cfg["inner_adaptation_steps"])
    clip = float(cfg["clip_param"])
    params = model_params(model)
    outer: List[torch.Tensor] = []
    policy_losses, vf_losses, entropies, kls = [], [], [], []
    for batches in task_batches:
        chain, task_kls = adapt(model, dist_class, params, batches[:steps], inner_lr=float(cfg["inner_lr"]),
                                vf_loss_coeff=float(cfg["vf_loss_coeff"]),
                                vf_clip_param=float(cfg["vf_clip_param"]), create_graph=True)
        post = batches[steps]
        dist_inputs, values = forward_with(model, chain[-1], post)
        dist = dist_class(dist_inputs, model)
        ratio = torch.exp(dist.logp(post[SB.ACTIONS]) - post[SB.ACTION_LOGP])
        adv = post[SB.ADVANTAGES]
        policy_loss = -torch.mean(torch.min(adv * ratio, adv * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)))
        vf_loss = torch.mean(torch.clamp((values - post[SB.VALUE_TARGETS]) ** 2, 0.0, float(cfg["vf_clip_param"])))
        entropy = torch.mean(dist.entropy())
        outer.append(policy_loss + cfg["vf_loss_coeff"] * vf_loss - cfg["entropy_coeff"] * entropy)
        policy_losses.append(policy_loss)
        vf_losses.append(vf_loss)
        entropies.append(entropy)
        kls.append(torch.stack(task_kls) if task_kls else torch.zeros(0))
    total = torch.stack(outer).mean()
    mean_kls = torch.stack(kls).mean(dim=0)  # [K]: per inner step, over tasks
    if steps > 0:
        total = total + torch.sum(torch.as_tensor(policy.kl_coeffs, dtype=mean_kls.dtype) * mean_kls)
    stats = {
        "total_loss": total.detach(),
        "policy_loss": torch.stack(policy_losses).mean().detach(),
        "vf_loss": torch.stack(vf_losses).mean().detach(),
        "entropy": torch.stack(entropies).mean().detach(),
        "inner_kl": mean_kls.detach(),
    }
    return total, stats


__all__ = ["maml_loss"]
