"""Attention nets (`use_attention`): a GTrXL-style gated transformer over a memory of past steps.

GTrXL (Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement Learning"): each
block is layer norm -> relative-position multi-head attention over `[memory, current steps]`
-> ReLU -> GRU gate with the block's input, then layer norm -> position-wise MLP -> ReLU ->
GRU gate. The gates start near the identity (`attention_init_gru_gate_bias`), so an
untrained net passes its inputs through and learns like a feed-forward net first.

Memory is carried exactly like an LSTM's state: one state tensor per block, `[M,
attention_dim]`, holding the inputs that block saw at the last M steps (oldest first; zeros
at an episode start), with `M = max(attention_memory_inference, attention_memory_training)`.
A step shifts its block inputs in (`state_out = [memory[1:], input]`), so the samplers,
`compute_single_action` and sequence batching (`state_in_k` at sequence starts) treat it
as any other recurrent state. Each step attends to itself and the `attention_memory_inference`
steps before it when acting, `attention_memory_training` when learning (a sliding window over
the memory and the sequence so far); with the two equal, learning sees exactly what acting saw.

`attention_use_n_prev_actions` / `_rewards` feed the last n actions / rewards: the previous
one comes from the `prev_actions` / `prev_rewards` columns, the n - 1 before it ride along as
one more state tensor each (shifted like the memory).

As with the LSTM, `vf_share_layers: False` gives the value function its own transformer (its
own memory tensors after the policy's).
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from rlfleet.models.recurrent import ActionEncoder
from rlfleet.models.sequence_wrapper import SequenceModelWrapper


class GRUGate(nn.Module):
    """`out = (1 - z) * x + z * h` with `z = sigmoid(W_z y + U_z x - bias)`, the gated skip
    connection of GTrXL; a positive `init_bias` keeps `z` small at first (out ~= x)."""

    def __init__(self, dim: int, init_bias: float):
        super().__init__()
        self.w = nn.Linear(dim, 3 * dim, bias=False)  # from y: r, z, h
        self.u = nn.Linear(dim, 2 * dim, bias=False)  # from x: r, z
        self.u_h = nn.Linear(dim, dim, bias=False)    # from r * x
        self.bias = nn.Parameter(torch.full((dim,), float(init_bias)))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        wr, wz, wh = self.w(y).chunk(3, dim=-1)
        ur, uz = self.u(x).chunk(2, dim=-1)
        r = torch.sigmoid(wr + ur)
        z = torch.sigmoid(wz + uz - self.bias)
        h = torch.tanh(wh + self.u_h(r * x))
        return (1.0 - z) * x + z * h


def sinusoid(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal encodings `[..., dim]` of (relative) positions."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / max(half, 1))
    angles = positions.float().unsqueeze(-1) * freqs
    out = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    return F.pad(out, (0, dim - 2 * half))


class RelativeMultiHeadAttention(nn.Module):
    """Transformer-XL attention: content term `(q + u) . k` plus position term
    `(q + v) . R(i - j)`, with `R` a projection of the sinusoidal encoding of the distance."""

    def __init__(self, dim: int, num_heads: int, head_dim: int):
        super().__init__()
        self.h, self.d = num_heads, head_dim
        self.q = nn.Linear(dim, num_heads * head_dim, bias=False)
        self.kv = nn.Linear(dim, 2 * num_heads * head_dim, bias=False)
        self.r = nn.Linear(dim, num_heads * head_dim, bias=False)
        self.u = nn.Parameter(torch.zeros(num_heads, head_dim))
        self.v = nn.Parameter(torch.zeros(num_heads, head_dim))
        self.out = nn.Linear(num_heads * head_dim, dim, bias=False)
        self.dim = dim

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, distance: torch.Tensor,
                allowed: torch.Tensor) -> torch.Tensor:
        """queries `[B, T, D]`, keys `[B, K, D]`, distance `[T, K]` (query minus key position),
        allowed `[T, K]` bool -> `[B, T, D]`."""
        b, t, _ = queries.shape
        k_len = keys.shape[1]
        q = self.q(queries).view(b, t, self.h, self.d)
        k, v = self.kv(keys).view(b, k_len, 2, self.h, self.d).unbind(2)
        rel = self.r(sinusoid(distance.clamp_min(0), self.dim)).view(t, k_len, self.h, self.d)
        scores = (torch.einsum("bthd,bkhd->bhtk", q + self.u, k)
                  + torch.einsum("bthd,tkhd->bhtk", q + self.v, rel)) / math.sqrt(self.d)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.out(torch.einsum("bhtk,bkhd->bthd", weights, v).reshape(b, t, self.h * self.d))


class GTrXLBlock(nn.Module):
    """One gated transformer block (attention sub-layer, then position-wise MLP sub-layer)."""

    def __init__(self, dim: int, num_heads: int, head_dim: int, mlp_dim: int, gate_bias: float):
        super().__init__()
        self.norm_attn = nn.LayerNorm(dim)
        self.attn = RelativeMultiHeadAttention(dim, num_heads, head_dim)
        self.gate_attn = GRUGate(dim, gate_bias)
        self.norm_mlp = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.ReLU(), nn.Linear(mlp_dim, dim))
        self.gate_mlp = GRUGate(dim, gate_bias)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, distance: torch.Tensor,
                allowed: torch.Tensor) -> torch.Tensor:
        normed = self.norm_attn(torch.cat([memory, x], dim=1))
        attended = self.attn(normed[:, memory.shape[1]:], normed, distance, allowed)
        y = self.gate_attn(x, F.relu(attended))
        return self.gate_mlp(y, F.relu(self.mlp(self.norm_mlp(y))))


class GTrXL(nn.Module):
    """Input projection plus `num_blocks` GTrXL blocks; carries one memory tensor per block."""

    def __init__(self, in_size: int, *, dim: int, num_blocks: int, num_heads: int, head_dim: int, mlp_dim: int,
                 gate_bias: float, memory: int):
        super().__init__()
        self.dim, self.memory = dim, memory
        self.embed = nn.Linear(in_size, dim)
        self.blocks = nn.ModuleList(GTrXLBlock(dim, num_heads, head_dim, mlp_dim, gate_bias)
                                    for _ in range(num_blocks))

    def forward(self, x: torch.Tensor, memories: List[torch.Tensor], window: int
                ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """x `[B, T, in]`, memories `[B, M, dim]` each -> (outputs `[B, T, dim]`, new memories)."""
        t, m = x.shape[1], self.memory
        query_pos = torch.arange(t).unsqueeze(1) + m          # [T, 1]
        key_pos = torch.arange(m + t).unsqueeze(0)            # [1, M + T]
        distance = query_pos - key_pos                        # [T, M + T]
        allowed = (distance >= 0) & (distance <= window)
        h = self.embed(x)
        new_memories = []
        for block, memory in zip(self.blocks, memories):
            memory = memory.float()
            new_memories.append(torch.cat([memory, h], dim=1)[:, -m:])
            h = block(h, memory, distance, allowed)
        return h, new_memories


class AttentionWrapper(SequenceModelWrapper):
    """A GTrXL over a base model's features, with logits and value heads on its output.

    Args:
        obs_space, action_space, num_outputs, model_config, name: as for every model.
        base_class: the feature model class (as for `LSTMWrapper`).
        base_kwargs: extra keyword arguments for `base_class`.
    """

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, base_class: type,
                 base_kwargs: Optional[dict] = None):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        cfg = model_config
        self.dim = int(cfg.get("attention_dim", 64))
        self.num_blocks = int(cfg.get("attention_num_transformer_units", 1))
        self.memory_inference = int(cfg.get("attention_memory_inference", 50))
        self.memory_training = int(cfg.get("attention_memory_training", 50))
        self.memory = max(self.memory_inference, self.memory_training)
        self.n_prev_actions = int(cfg.get("attention_use_n_prev_actions", 0))
        self.n_prev_rewards = int(cfg.get("attention_use_n_prev_rewards", 0))
        # What the policy must feed (and the sampler record) besides obs and state.
        self.uses_prev_actions = self.n_prev_actions > 0
        self.uses_prev_rewards = self.n_prev_rewards > 0
        self.vf_share_layers = bool(cfg.get("vf_share_layers", True))
        self.action_encoder = ActionEncoder(action_space) if self.uses_prev_actions else None
        self.base, self.gtrxl = self._branch(base_class, base_kwargs, f"{name}_base")
        if self.vf_share_layers:
            self.value_base, self.value_gtrxl = None, None
        else:
            self.value_base, self.value_gtrxl = self._branch(base_class, base_kwargs, f"{name}_value_base")
        self.make_heads(num_outputs, self.dim)

    def _branch(self, base_class: type, base_kwargs: Optional[dict], name: str):
        base = self.feature_base(base_class, base_kwargs, name)
        in_size = (int(base.num_outputs) + self.n_prev_actions * (self.action_encoder.size if self.action_encoder
                                                                  else 0) + self.n_prev_rewards)
        cfg = self.model_config
        gtrxl = GTrXL(in_size, dim=self.dim, num_blocks=self.num_blocks,
                      num_heads=int(cfg.get("attention_num_heads", 1)),
                      head_dim=int(cfg.get("attention_head_dim", 32)),
                      mlp_dim=int(cfg.get("attention_position_wise_mlp_dim", 32)),
                      gate_bias=float(cfg.get("attention_init_gru_gate_bias", 2.0)), memory=self.memory)
        return base, gtrxl

    # --- state layout: [policy memories..., (value memories...), (older actions), (older rewards)] ---
    def get_initial_state(self) -> List[torch.Tensor]:
        branches = 1 if self.vf_share_layers else 2
        state = [torch.zeros(self.memory, self.dim) for _ in range(branches * self.num_blocks)]
        if self.n_prev_actions > 1:
            state.append(torch.zeros(self.n_prev_actions - 1, self.action_encoder.size))
        if self.n_prev_rewards > 1:
            state.append(torch.zeros(self.n_prev_rewards - 1))
        return state

    def _history(self, input_dict, state: List[torch.Tensor], n: int, b: int
                 ) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
        """Per row, the last n actions (encoded) and rewards, flattened: `(parts, new history state)`."""
        t = n // b
        parts, new_state = [], []
        idx = (2 if not self.vf_share_layers else 1) * self.num_blocks
        for count, key, encode in ((self.n_prev_actions, "prev_actions", self.action_encoder),
                                   (self.n_prev_rewards, "prev_rewards", None)):
            if count == 0:
                continue
            cur = input_dict[key]
            cur = encode(cur) if encode is not None else cur.float().reshape(n, 1)
            cur = cur.reshape(b, t, -1)                                    # [B, T, E]
            if count > 1:
                older = state[idx].float().reshape(b, count - 1, -1)       # [B, n - 1, E]
                idx += 1
                seq = torch.cat([older, cur], dim=1)                       # [B, n - 1 + T, E]
                # Row i sees the window ending at its own previous action / reward.
                windows = torch.stack([seq[:, i:i + t] for i in range(count)], dim=2)  # [B, T, count, E]
                tail = seq[:, -(count - 1):]
                new_state.append(tail if key == "prev_actions" else tail.squeeze(-1))
            else:
                windows = cur.unsqueeze(2)
            parts.append(windows.reshape(n, -1))
        return parts, new_state

    def forward(self, input_dict, state, seq_lens):
        n, b = self.num_sequences(input_dict, seq_lens)
        initial = self.get_initial_state()
        if not state:
            state = [s.expand(b, *s.shape) for s in initial]
        if len(state) != len(initial):
            raise ValueError(f"AttentionWrapper: got {len(state)} state tensors, expected {len(initial)}")
        window = self.memory_inference if seq_lens is None else self.memory_training
        history, history_state = self._history(input_dict, state, n, b)
        k = self.num_blocks
        self._features, memories = self._run(self.base, self.gtrxl, input_dict, history, state[:k], b, window)
        state_out = list(memories)
        if self.value_gtrxl is not None:
            self._value_features, value_memories = self._run(self.value_base, self.value_gtrxl, input_dict,
                                                             history, state[k:2 * k], b, window)
            state_out += value_memories
        return self.logits_out(), state_out + history_state

    def _run(self, base, gtrxl, input_dict, history, memories, b: int, window: int):
        feats, _ = base(input_dict, [], None)
        n = feats.shape[0]
        x = torch.cat([feats] + history, dim=-1) if history else feats
        out, new_memories = gtrxl(x.reshape(b, n // b, -1), memories, window)
        return out.reshape(n, self.dim), new_memories


__all__ = ["AttentionWrapper", "GTrXL", "GTrXLBlock", "GRUGate", "RelativeMultiHeadAttention"]
