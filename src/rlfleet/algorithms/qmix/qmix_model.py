"""QMIX's networks (Rashid et al. 2018): one Q-network shared by the members of a
group, a mixer that combines their chosen Q-values into the team's, and target copies of both.

- `AgentNetwork`: fed a member's observation and its one-hot index (so that shared weights
  can still act differently per member); feed-forward for now (see its doc).
- `QMixer`: hypernetworks conditioned on the global state give non-negative weights, so the
  team's Q-value is monotonic in every member's (the argmax of each member is the team's).
- `VDNMixer`: the sum of the members' Q-values (Sunehag et al. 2017).
- mixer None: independent Q-learners (each member's Q-value learns the team's reward).
"""
from __future__ import annotations

import copy
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from rlfleet.algorithms.qmix.group_layout import GroupLayout
from rlfleet.models.torch_model import TorchModel


class AgentNetwork(nn.Module):
    """One member's Q-values from its observation (with its index): ReLU layers of
    `model.fcnet_hiddens`, then a linear Q head.

    The reference's agent network has a GRU between its two layers; rlfleet's multi-agent
    sampler does not run recurrent policies yet, so this one is feed-forward.
    """

    def __init__(self, input_dim: int, hiddens: List[int], num_actions: int):
        super().__init__()
        layers: List[nn.Module] = []
        for width in hiddens:
            layers += [nn.Linear(input_dim, width), nn.ReLU()]
            input_dim = width
        layers.append(nn.Linear(input_dim, num_actions))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Q `[..., A]` of inputs `[..., input_dim]`."""
        return self.net(x)


class QMixer(nn.Module):
    """The monotonic mixing network (one hypernetwork layer per weight, as the reference)."""

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
    `[B, D]` give the masked Q-values `[B, n_agents * A]`."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, mixer: Optional[str],
                 mixing_embed_dim: int):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.layout = GroupLayout(obs_space, action_space, model_config.get("action_mask_key") or "action_mask")
        n = self.layout.n_agents
        self.agent = AgentNetwork(self.layout.obs_dim + n, list(model_config["fcnet_hiddens"]),
                                  self.layout.num_actions)
        self.mixer = make_mixer(mixer, self.layout, mixing_embed_dim)
        self.target_agent = copy.deepcopy(self.agent)
        self.target_mixer = copy.deepcopy(self.mixer)
        for p in [*self.target_agent.parameters(), *(self.target_mixer.parameters() if self.mixer else [])]:
            p.requires_grad_(False)
        self.register_buffer("agent_ids", torch.eye(n), persistent=False)

    def member_q(self, net: AgentNetwork, flat: torch.Tensor) -> torch.Tensor:
        """Masked Q-values `[..., n, A]` of `net` for flattened group observations `[..., D]`."""
        n = self.layout.n_agents
        ids = self.agent_ids.expand(*flat.shape[:-1], n, n)
        return self.layout.masked(net(torch.cat([self.layout.agent_obs(flat), ids], -1)), flat)

    def forward(self, input_dict, state, seq_lens):
        q = self.member_q(self.agent, input_dict["obs"].float())
        return q.reshape(q.shape[0], -1), state

    def learnable_parameters(self) -> List[nn.Parameter]:
        """The online agent network's and mixer's parameters (what the optimizer steps)."""
        return [*self.agent.parameters(), *(self.mixer.parameters() if self.mixer is not None else [])]


__all__ = ["AgentNetwork", "QMIXModel", "QMixer", "VDNMixer", "make_mixer"]
