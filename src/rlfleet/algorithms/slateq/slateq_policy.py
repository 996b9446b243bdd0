"""SlateQ's policy: acting by the slate search (slateq_model.py) with SlateEpsilonGreedy,
and the loss: the choice model's cross-entropy on the observed choices, and the decomposed
TD update of Qbar on the item the user actually picked (the null item when none).

Targets by `slateq_strategy` (the paper's decomposed SARSA and Q-learning, and a myopic one):

| strategy | target for Qbar(s, picked item)                                         |
|----------|-------------------------------------------------------------------------|
| QL       | r + gamma * max_A' Q(s', A'), the slate search with the target Q-net     |
| SARSA    | r + gamma * Q(s', A'), A' the slate shown next (the target Q-net)        |
| MYOP     | r (immediate engagement only)                                            |
| RANDOM   | no learning: uniformly random slates of distinct candidates              |

Q(s', A') decomposes with the current choice model; terminal steps bootstrap nothing.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import torch
import torch.nn.functional as F

from rlfleet.algorithms.slateq.exploration import SlateEpsilonGreedy
from rlfleet.algorithms.slateq.slateq_model import SlateDistribution, SlateQModel, slate_values
from rlfleet.models.target_network import soft_update
from rlfleet.policy.numpy_actor import obs_array
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER, TorchPolicy
from rlfleet.replay import PRIO_WEIGHTS
from rlfleet.replay.n_step import trajectory_end_rows

SB = SampleBatch
NEXT_ACTIONS = "next_actions"
CHOICE_OPTIMIZER = "choice_model"


def slateq_loss(policy: "SlateQTorchPolicy", model: SlateQModel, dist_class, batch: Dict[str, torch.Tensor]):
    """SlateQ's two losses on one replayed batch.

    Returns:
        `({"default": Q loss, "choice_model": choice loss}, stats)`; `stats["td_error"]` per sample.
    """
    cfg = policy.config
    layout = model.layout
    user, docs = layout.split(batch[SB.OBS])
    actions = batch[SB.ACTIONS].long()
    rows = torch.arange(actions.shape[0])
    picked = layout.clicks(batch[SB.NEXT_OBS])  # slate position, slate_size for no click
    shown = docs.gather(1, actions.unsqueeze(-1).expand(-1, -1, layout.doc_dim))

    # === the user choice model: which of the shown documents (or none) was picked ===
    choice_loss = F.cross_entropy(model.choice_model(user, shown), picked)

    # === the decomposed TD target ===
    strategy = cfg["slateq_strategy"]
    with torch.no_grad():
        if strategy == "MYOP":
            next_value = torch.zeros(actions.shape[0])
        elif strategy == "SARSA":
            next_user, next_docs = layout.split(batch[SB.NEXT_OBS])
            next_q = model.target_q_net(next_user, next_docs)
            next_value = slate_values(model.item_weights(next_user, next_docs), next_q,
                                      batch[NEXT_ACTIONS].long().unsqueeze(1)).squeeze(1)
        else:
            next_value = model.select(batch[SB.NEXT_OBS], target=True)[1]
        alive = 1.0 - batch[SB.TERMINATEDS].float()
        target = batch[SB.REWARDS].float() + cfg["gamma"] * alive * next_value

    # === Qbar of the picked item (the null item, index num_candidates, for no click) ===
    q_all = model.q_net(user, docs)
    clicked = picked < layout.slate_size
    item = torch.where(clicked, actions[rows, picked.clamp(max=layout.slate_size - 1)],
                       torch.full_like(picked, layout.num_candidates))
    q_picked = q_all[rows, item]
    td_error = q_picked - target
    if cfg["use_huber"]:
        per_sample = F.huber_loss(q_picked, target, reduction="none", delta=cfg["huber_threshold"])
    else:
        per_sample = 0.5 * td_error ** 2
    q_loss = (batch[PRIO_WEIGHTS].float() * per_sample).mean()
    stats = {"q_loss": q_loss.detach(), "choice_loss": choice_loss.detach(), "mean_q": q_picked.mean().detach(),
             "click_rate": clicked.float().mean(), "mean_td_error": td_error.abs().mean().detach(),
             "td_error": td_error.detach()}
    return {DEFAULT_OPTIMIZER: q_loss, CHOICE_OPTIMIZER: choice_loss}, stats


class SlateQTorchPolicy(TorchPolicy):
    """Acts by the slate search (or at random for RANDOM); learns with `slateq_loss`."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, PRIO_WEIGHTS)

    def __init__(self, observation_space, action_space, config, **kwargs):
        super().__init__(observation_space, action_space, config, **kwargs)
        if not isinstance(self.exploration, SlateEpsilonGreedy):
            raise ValueError(f"SlateQ explores with exploration_config.type 'SlateEpsilonGreedy' (distinct random "
                             f"documents per slate), got {type(self.exploration).__name__}")
        if config["slateq_strategy"] == "SARSA":
            self.loss_columns = self.loss_columns + (NEXT_ACTIONS,)

    def make_model_and_action_dist(self):
        cfg = self.config
        model = SlateQModel(self.observation_space, self.action_space, cfg["model"], f"{self.policy_id}_slateq",
                            hiddens=cfg["fcnet_hiddens_per_candidate"], slate_selection=cfg["slate_selection"])
        return SlateDistribution, model

    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        model = self.model
        return {DEFAULT_OPTIMIZER: self.make_adam(model.q_net.parameters(), lr=self.cur_lr,
                                                  eps=self.config["adam_epsilon"]),
                CHOICE_OPTIMIZER: self.make_adam(model.choice_model.parameters(), lr=self.config["lr_choice_model"])}

    # --- acting ------------------------------------------------------------------------
    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore=None, timestep=None, **kwargs):
        explore = self.config.get("explore", True) if explore is None else explore
        timestep = self.global_timestep if timestep is None else timestep
        obs = torch.as_tensor(obs_array(obs_batch), dtype=torch.float32)
        layout = self.model.layout
        with torch.inference_mode():
            if self.config["slateq_strategy"] == "RANDOM":
                slates = torch.rand(obs.shape[0], layout.num_candidates, generator=self.generator).argsort(1)
                slates = slates[:, :layout.slate_size]
            else:
                slates = self.exploration.slates(self.model.select(obs)[0], layout.num_candidates, explore,
                                                 timestep, self.generator)
        n = obs.shape[0]
        extra = {SB.ACTION_LOGP: np.zeros(n, np.float32), SB.ACTION_PROB: np.ones(n, np.float32)}
        return slates.numpy().astype(np.int64), [], extra

    # --- learning ------------------------------------------------------------------------
    def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches=None, episode=None):
        """SARSA: adds `next_actions`, each row's next slate; a trajectory's last row (an
        episode's end, where nothing is bootstrapped, or a truncation's) takes the greedy slate
        of its next observation."""
        if self.config["slateq_strategy"] != "SARSA" or sample_batch.count == 0:
            return sample_batch
        actions = np.asarray(sample_batch[SB.ACTIONS])
        nxt = np.empty_like(actions)
        nxt[:-1] = actions[1:]
        ends = np.flatnonzero(trajectory_end_rows(sample_batch))
        end_obs = torch.as_tensor(np.asarray(sample_batch[SB.NEXT_OBS])[ends], dtype=torch.float32)
        with torch.inference_mode():
            nxt[ends] = self.model.select(end_obs)[0].numpy()
        sample_batch[NEXT_ACTIONS] = nxt
        return sample_batch

    def loss(self, model, dist_class, train_batch):
        return slateq_loss(self, model, dist_class, train_batch)

    def update_target(self, tau: Optional[float] = None) -> None:
        """Copies the online item Q-net into the target one (`tau` < 1: Polyak average)."""
        soft_update(self.model.target_q_net, self.model.q_net, self.config["tau"] if tau is None else tau)
