"""QMIX's networks (Rashid et al. 2018): one Q-network shared by the members of a
group, a mixer that combines their chosen Q-values into the team's, and target copies of both.

- the agent network (agent_networks.py): fed a member's observation and its one-hot index (so
  that shared weights can still act differently per member); a GRU (the paper's and RLlib 1.x's) or an MLP.
- `QMixer`: hypernetworks conditioned on the global state give non-negative weights, so the
  team's Q-value is monotonic in every member's (the argmax of each member is the team's).
- `VDNMixer`: the sum of the members' Q-values (Sunehag et al. 2017).
- mixer None: independent Q-learners (each member's Q-value learns the team's reward).
"""
from __future__ import annotations

import copy
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from rlfleet.algorithms.qmix.agent_networks import make_agent_network
from rlfleet.algorithms.qmix.group_layout import GroupLayout
from rlfleet.models.torch_model import TorchModel


class QMixer(nn.Module):
    """The monotonic mixing network (one hypernetwork layer per weight, as RLlib 1.x's `mixers.py`)."""

    def __init__(self, n_agents: int, state_dim: int, embed_dim: int):
        super().__init__()
        self.n_agents, self.embed_dim = n_agents, embed_dim
        self.hyper_w_1 = nn.Linear(state_dim, embed_dim * n_agents)
        self.hyper_w_final = nn.Linear(state_dim, embed_dim)
        self.hyper_b_1 = nn.Linear(state_dim, embed_dim)
        self.V = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    def forward(self, agent_qs: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        """The team's Q `[...]` of the members' `[..., n_agents]` under states `[..., state_dim]`."""
        lead = agent_qs.shape[:-1]
        s = states.reshape(-1, states.shape[-1])
        qs = agent_qs.reshape(-1, 1, self.n_agents)
        w1 = torch.abs(self.hyper_w_1(s)).view(-1, self.n_agents, self.embed_dim)
        b1 = self.hyper_b_1(s).view(-1, 1, self.embed_dim)
        hidden = F.elu(torch.bmm(qs, w1) + b1)
        w_final = torch.abs(self.hyper_w_final(s)).view(-1, self.embed_dim, 1)
        y = torch.bmm(hidden, w_final) + self.V(s).view(-1, 1, 1)
        return y.reshape(lead)


class VDNMixer(nn.Module):
    """The team's Q-value as the sum of the members'."""

    def forward(self, agent_qs: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        return agent_qs.sum(-1)


def make_mixer(kind: Optional[str], layout: GroupLayout, embed_dim: int) -> Optional[nn.Module]:
    """The mixer `kind` names ("qmix", "vdn"), or None (independent learners)."""
    if kind == "qmix":
        return QMixer(layout.n_agents, layout.state_dim, embed_dim)
    if kind == "vdn":
        return VDNMixer()
    return None


class QMIXModel(TorchModel):
    """The agent network and mixer, with their target copies, as one module (one set of
    weights to sync and checkpoint). `forward` acts: the group's flattened observations
    `[B, D]` (and, with the GRU, the members' memories `[B, n_agents, H]`) give the masked
    Q-values `[B, n_agents * A]` (and the memories after the step)."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, mixer: Optional[str],
                 mixing_embed_dim: int, agent_network: str = "gru"):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.layout = GroupLayout(obs_space, action_space, model_config.get("action_mask_key") or "action_mask")
        n = self.layout.n_agents
        self.agent = make_agent_network(agent_network, self.layout.obs_dim + n, model_config, self.layout.num_actions)
        # The agent network reads observations only (no previous actions or rewards).
        self.uses_prev_actions = self.uses_prev_rewards = False
        self.mixer = make_mixer(mixer, self.layout, mixing_embed_dim)
        self.target_agent = copy.deepcopy(self.agent)
        self.target_mixer = copy.deepcopy(self.mixer)
        for p in [*self.target_agent.parameters(), *(self.target_mixer.parameters() if self.mixer else [])]:
            p.requires_grad_(False)
        self.register_buffer("agent_ids", torch.eye(n), persistent=False)

    def get_initial_state(self) -> List[torch.Tensor]:
        """The members' memories at an episode's start (none for the MLP)."""
        return self.agent.initial_state(self.layout.n_agents)

    def member_q(self, net: nn.Module, flat: torch.Tensor, state: List[torch.Tensor]
                 ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """Masked Q-values `[B, T, n, A]` of `net` (the online or target agent network) over
        T steps of B sequences of flattened group observations `[B, T, D]`, from the
        memories `state` (`[B, n, H]`, none for the MLP); and the memories after them."""
        n = self.layout.n_agents
        ids = self.agent_ids.expand(*flat.shape[:-1], n, n)
        q, state = net(torch.cat([self.layout.agent_obs(flat), ids], -1), state)
        return self.layout.masked(q, flat), state

    def forward(self, input_dict, state, seq_lens):
        q, state = self.member_q(self.agent, input_dict["obs"].float()[:, None], state)
        return q[:, 0].reshape(q.shape[0], -1), state

    def learnable_parameters(self) -> List[nn.Parameter]:
        """The online agent network's and mixer's parameters (what the optimizer steps)."""
        return [*self.agent.parameters(), *(self.mixer.parameters() if self.mixer is not None else [])]


__all__ = ["QMIXModel", "QMixer", "VDNMixer", "make_mixer"]
