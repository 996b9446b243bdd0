"""RNNSAC's policy: SAC's three losses (sac_policy.py) over replayed sequences, with a recurrent
actor and recurrent critics; the rows of each sequence's burn-in only warm the memories."""
from __future__ import annotations

from typing import Dict, Tuple

import torch

from rlfleet.algorithms.rnnsac.rnnsac_model import RNNSACModel
from rlfleet.algorithms.sac.sac_policy import SACTorchPolicy, sac_action_dist
from rlfleet.algorithms.common.sequence_learning import (SEQUENCE_COLUMNS, bootstrap_rows, loss_rows, masked_mean,
                                                  run_sequences, sequence_states, sequence_tensors)
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.replay.sequences import sequence_priorities

SB = SampleBatch


def _min_q(model: RNNSACModel, q_feats, twin_feats, actions=None, target: bool = False) -> torch.Tensor:
    """min over the critics (or target critics) of Q(features, actions)."""
    q_net, twin_net = (model.target_q_net, model.target_twin_q_net) if target else (model.q_net, model.twin_q_net)
    q = q_net.q(q_feats, actions)
    return q if twin_net is None else torch.min(q, twin_net.q(twin_feats, actions))


def rnnsac_losses(policy: "RNNSACTorchPolicy", model: RNNSACModel, dist_class, batch: Dict[str, torch.Tensor]
                  ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    """SAC's critic, actor and alpha losses (`sac_losses`) on S replayed sequences.

    The actor runs from the stored (or zero) start state, the critics from zeros, over every
    stored observation; row t's soft target bootstraps from row t + k (its n-step
    observation), and every loss averages over the trained rows only (after the burn-in,
    before the padding), importance-weighted per sequence.

    Returns:
        `({"critic", "actor", "alpha"}, stats)`; `stats["td_error"]` is each sequence's
        priority (`prioritized_replay_eta` mix of its rows' absolute TD errors).
    """
    cfg = policy.config
    actions = batch[SB.ACTIONS]
    s, length = actions.shape[:2]
    mask = loss_rows(batch, length)
    weights = batch[PRIO_WEIGHTS].float()[:, None]
    alpha = torch.exp(model.log_alpha)
    twin = model.twin_q_net is not None

    dist_inputs = run_sequences(model.policy_net, batch, sequence_states(policy, batch))
    t_obs = dist_inputs.shape[1]
    dist = dist_class(dist_inputs.reshape(s * t_obs, -1), model)
    q_feats = run_sequences(model.q_net, batch, [])
    twin_feats = run_sequences(model.twin_q_net, batch, []) if twin else None
    with torch.no_grad():
        target_feats = run_sequences(model.target_q_net, batch, [])
        target_twin_feats = run_sequences(model.target_twin_q_net, batch, []) if twin else None

    if model.discrete:
        log_pi = dist.log_probs.reshape(s, t_obs, -1)
        pi = log_pi.exp()
        chosen = actions.long().unsqueeze(-1)
        q_t = model.q_net.q(q_feats[:, :length]).gather(-1, chosen).squeeze(-1)
        twin_q_t = model.twin_q_net.q(twin_feats[:, :length]).gather(-1, chosen).squeeze(-1) if twin else None
        with torch.no_grad():
            q_next = _min_q(model, target_feats, target_twin_feats, target=True)
            v_next = (pi * (q_next - alpha * log_pi)).sum(-1)
        q_pi = _min_q(model, q_feats[:, :length].detach(), twin_feats[:, :length].detach() if twin else None)
        pi_t, log_pi_t = pi[:, :length], log_pi[:, :length]
        actor_rows = (pi_t * (alpha.detach() * log_pi_t - q_pi)).sum(-1)
        alpha_rows = -(pi_t.detach() * (model.log_alpha * (log_pi_t + policy.target_entropy).detach())).sum(-1)
        entropy_rows = -(pi_t * log_pi_t).sum(-1)
    else:
        if cfg["_deterministic_loss"]:
            sampled = dist.deterministic_sample()
            logp = dist.logp(sampled)
        else:
            sampled, logp = dist.sample_logp(policy.generator)
        sampled, logp = sampled.reshape(s, t_obs, -1), logp.reshape(s, t_obs)
        q_t = model.q_net.q(q_feats[:, :length], actions)
        twin_q_t = model.twin_q_net.q(twin_feats[:, :length], actions) if twin else None
        with torch.no_grad():
            q_next = _min_q(model, target_feats, target_twin_feats, sampled, target=True)
            v_next = q_next - alpha * logp
        # The actor's gradient reaches the action, not the critics (each loss steps only its own
        # optimizer's parameters: learning_loop.backward_each).
        q_pi = _min_q(model, q_feats[:, :length].detach(), twin_feats[:, :length].detach() if twin else None,
                      sampled[:, :length])
        logp_t = logp[:, :length]
        actor_rows = alpha.detach() * logp_t - q_pi
        alpha_rows = -(model.log_alpha * (logp_t + policy.target_entropy).detach())
        entropy_rows = -logp_t

    discounts = cfg["gamma"] ** batch[N_STEPS].float() * (1.0 - batch[SB.TERMINATEDS].float())
    target = (batch[SB.REWARDS].float() + discounts * bootstrap_rows(batch, v_next)).detach()
    td = q_t - target
    critic_loss = 0.5 * masked_mean(weights * td.pow(2), mask)
    abs_td = td.detach().abs()
    if twin:
        twin_td = twin_q_t - target
        critic_loss = critic_loss + 0.5 * masked_mean(weights * twin_td.pow(2), mask)
        abs_td = 0.5 * (abs_td + twin_td.detach().abs())
    actor_loss = masked_mean(actor_rows, mask)
    alpha_loss = masked_mean(alpha_rows, mask)
    priorities = sequence_priorities(abs_td.cpu().numpy(), mask.cpu().numpy(), cfg["prioritized_replay_eta"])
    q_rows = q_t.detach()[mask]
    stats = {
        "critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "alpha_loss": alpha_loss.detach(),
        "alpha_value": alpha.detach(), "log_alpha_value": model.log_alpha.detach(),
        "target_entropy": torch.tensor(float(policy.target_entropy)),
        "policy_entropy": masked_mean(entropy_rows.detach(), mask),
        "mean_q": q_rows.mean(), "max_q": q_rows.max(), "min_q": q_rows.min(),
        "mean_td_error": masked_mean(abs_td, mask), "td_error": torch.as_tensor(priorities),
    }
    return {"critic": critic_loss, "actor": actor_loss, "alpha": alpha_loss}, stats


class RNNSACTorchPolicy(SACTorchPolicy):
    """SAC with a recurrent actor and critics: acts by sampling its policy with the actor's memory
    carried from step to step; learns with `rnnsac_losses` on replayed sequences (SAC's three
    optimizers and target updates)."""

    loss_columns = SEQUENCE_COLUMNS
    numpy_learner = None  # the NumPy SAC learner restates feed-forward nets only

    def __init__(self, observation_space, action_space, config, **kwargs):
        super().__init__(observation_space, action_space, config, **kwargs)

    def make_model_and_action_dist(self):
        cfg = self.config
        if cfg["model"].get("custom_model"):
            raise ValueError("'model.custom_model' is not available for RNNSAC: its networks are set by "
                             "'policy_model' and 'Q_model' (and model.max_seq_len)")
        dist_class, num_outputs = sac_action_dist(self.action_space, cfg["normalize_actions"])
        model = RNNSACModel(self.observation_space, self.action_space, num_outputs, cfg["model"],
                            f"{self.policy_id}_rnnsac", policy_net_config={**cfg["model"], **cfg["policy_model"]},
                            q_net_config={**cfg["model"], **cfg["Q_model"]}, twin_q=bool(cfg["twin_q"]),
                            initial_alpha=cfg["initial_alpha"])
        return dist_class, model

    def to_tensors(self, batch: SampleBatch) -> Dict[str, torch.Tensor]:
        """The replayed sequences' columns as tensors, as stored (see replay/sequences.py)."""
        return sequence_tensors(self, batch, self.loss_columns)

    def loss(self, model, dist_class, train_batch):
        return rnnsac_losses(self, model, dist_class, train_batch)


__all__ = ["RNNSACTorchPolicy", "rnnsac_losses"]
