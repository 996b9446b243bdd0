"""QMIX's agent networks: one Q-network shared by a group's members, fed each member's
observation with its one-hot index (so that shared weights can still act differently per
member). `agent_network` chooses:

- `"gru"` (the default, the QMIX paper's and RLlib 1.x's): fc -> ReLU -> GRU -> fc, all `model.lstm_cell_size`
  wide (64). The memory of each member is carried through the episode while acting (the
  multi-agent sampler's per-agent state, rollout/agent_memory.py) and re-run over each
  replayed episode from its start in the loss.
- `"mlp"`: ReLU layers of `model.fcnet_hiddens`, then a linear Q head; no memory.

Both take inputs `[B, T, n_agents, input_dim]` (T steps of B sequences; T = 1 when acting)
and a state `[B, n_agents, H]` (unused by the MLP) and return `(Q [B, T, n_agents, A], state
after the last step)`.
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn.functional as F
from torch import nn

AGENT_NETWORKS = ("gru", "mlp")


class GRUAgentNetwork(nn.Module):
    """fc -> ReLU -> GRU -> fc (RLlib 1.x's `RNNModel` fc1, GRUCell, fc2; one `nn.GRU` layer runs the
    same cell over a whole sequence at once).

    Args:
        input_dim: a member's observation plus its one-hot index.
        hidden: the width of every layer and of the memory (`model.lstm_cell_size`).
        num_actions: Q-values per member.
    """

    def __init__(self, input_dim: int, hidden: int, num_actions: int):
        super().__init__()
        self.hidden = hidden
        self.fc1 = nn.Linear(input_dim, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.fc2 = nn.Linear(hidden, num_actions)

    def initial_state(self, n_agents: int) -> List[torch.Tensor]:
        """Each member's memory at an episode's start: zeros `[n_agents, hidden]`."""
        return [torch.zeros(n_agents, self.hidden)]

    def forward(self, x: torch.Tensor, state: List[torch.Tensor]):
        b, t, n = x.shape[:3]
        # Each (sequence, member) pair is one GRU sequence.
        z = F.relu(self.fc1(x)).transpose(1, 2).reshape(b * n, t, self.hidden)
        out, h = self.rnn(z, state[0].reshape(1, b * n, self.hidden).contiguous())
        q = self.fc2(out).reshape(b, n, t, -1).transpose(1, 2)
        return q, [h.reshape(b, n, self.hidden)]


class MLPAgentNetwork(nn.Module):
    """ReLU layers of `hiddens`, then a linear Q head (no memory).

    Args:
        input_dim: a member's observation plus its one-hot index.
        hiddens: the hidden layers' widths (`model.fcnet_hiddens`).
        num_actions: Q-values per member.
    """

    def __init__(self, input_dim: int, hiddens: List[int], num_actions: int):
        super().__init__()
        layers: List[nn.Module] = []
        for width in hiddens:
            layers += [nn.Linear(input_dim, width), nn.ReLU()]
            input_dim = width
        layers.append(nn.Linear(input_dim, num_actions))
        self.net = nn.Sequential(*layers)

    def initial_state(self, n_agents: int) -> List[torch.Tensor]:
        return []

    def forward(self, x: torch.Tensor, state: List[torch.Tensor]):
        return self.net(x), state


def make_agent_network(kind: str, input_dim: int, model_config: dict, num_actions: int) -> nn.Module:
    """The agent network `kind` names (see the module docstring)."""
    if kind == "gru":
        return GRUAgentNetwork(input_dim, int(model_config["lstm_cell_size"]), num_actions)
    if kind == "mlp":
        return MLPAgentNetwork(input_dim, list(model_config["fcnet_hiddens"]), num_actions)
    raise ValueError(f"'agent_network': {kind!r} is not one of {AGENT_NETWORKS}")


__all__ = ["AGENT_NETWORKS", "GRUAgentNetwork", "MLPAgentNetwork", "make_agent_network"]
