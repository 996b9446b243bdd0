"""The Decision Transformer network (Chen et al. 2021, arXiv:2106.01345, section 3).

Each step contributes three tokens, return-to-go, observation and action, each embedded by
its own linear layer plus a learned embedding of the step's timestep (the paper's only
position information), then a LayerNorm. A causal `torch.nn.TransformerEncoder` (pre-LN GPT
blocks with GELU) reads the `3 K` tokens; the action is predicted from the observation
token (which sees the step's return-to-go and observation and everything before, never the
step's own action); with the optional loss weights, the next observation and return-to-go
from the action token.

Acting (`forward`, the interface rollout workers and the exporter call) keeps the last `K`
steps as the recurrent state: one `[B, K, 3 + obs_dim + action_dim]` tensor per row whose
columns are `CONTEXT_COLUMNS` then the observation then the action input (Box: the
normalized action; Discrete: its one-hot). Each step drops the oldest row and appends
(return-to-go, t, 1, obs, 0): the return-to-go starts at `target_return` and falls by each
reward received (the paper's evaluation, section 3, "at test time"), t counts steps from 0.
The action predicted for the new row is written into it (the greedy one; the policy
overwrites it with a sampled Discrete action when exploring).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

# The first columns of each context row, then the observation, then the action input.
CONTEXT_COLUMNS = ("return_to_go", "timestep", "valid")
_R, _T, _VALID = 0, 1, 2


class DTModel(nn.Module):
    """Decision Transformer over (return-to-go, observation, action) token triples.

    Args:
        obs_dim: flat observation size.
        action_in_dim: action input size (Box: its flat size; Discrete: `n`, one-hot).
        action_out_dim: action head size (Box: its flat size; Discrete: `n` logits).
        discrete: Discrete actions (logits out, one-hot in) or Box (tanh out).
        config: the trainer config (`embed_dim`, `num_layers`, `num_heads`, `embed_pdrop`,
            `resid_pdrop`, `max_ep_len`, `rtg_scale`, `target_return`, `model.max_seq_len`).
    """

    # The exporter and rollout workers read these (policy/model_inputs.py, policy/export.py).
    uses_prev_actions = False
    uses_prev_rewards = True  # the rewards lower the return-to-go
    has_value_function = False

    def __init__(self, obs_dim: int, action_in_dim: int, action_out_dim: int, discrete: bool, config: dict):
        super().__init__()
        h = int(config["embed_dim"])
        self.obs_dim, self.action_in_dim, self.discrete = int(obs_dim), int(action_in_dim), bool(discrete)
        self.context_length = int(config["model"]["max_seq_len"])
        self.max_ep_len = int(config["max_ep_len"])
        self.rtg_scale = float(config["rtg_scale"])
        self.target_return = float(config["target_return"]) if config.get("target_return") is not None else 0.0
        self.embed_timestep = nn.Embedding(self.max_ep_len, h)
        # GPT-2's initialisation of embeddings (std 0.02, as the paper's GPT-2 model has):
        # torch's default N(0, 1) rows would swamp the return-to-go and observation inputs,
        # and the model would tell episodes apart by their timesteps alone.
        nn.init.normal_(self.embed_timestep.weight, std=0.02)
        self.embed_return = nn.Linear(1, h)
        self.embed_obs = nn.Linear(self.obs_dim, h)
        self.embed_action = nn.Linear(self.action_in_dim, h)
        # The paper normalises the stacked token embeddings; off, the embeddings keep the
        # observations' scale (a linear embedding of a 3-dim observation loses most of it to
        # LayerNorm: on Pendulum, cloning the swing-up expert fails with it, see the trainer docstring).
        self.embed_ln = nn.LayerNorm(h) if config["embed_layer_norm"] else nn.Identity()
        self.embed_drop = nn.Dropout(float(config["embed_pdrop"]))
        layer = nn.TransformerEncoderLayer(h, int(config["num_heads"]), dim_feedforward=4 * h,
                                           dropout=float(config["resid_pdrop"]), activation="gelu",
                                           batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, int(config["num_layers"]), norm=nn.LayerNorm(h),
                                                 enable_nested_tensor=False)
        self.num_heads = int(config["num_heads"])
        self.predict_action = nn.Linear(h, int(action_out_dim))
        self.predict_obs = nn.Linear(h, self.obs_dim)
        self.predict_return = nn.Linear(h, 1)

    # --- the sequence model -------------------------------------------------------------
    def sequence_forward(self, rtg: torch.Tensor, obs: torch.Tensor, actions_in: torch.Tensor,
                         timesteps: torch.Tensor, mask: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Predictions at every step of `[B, K]` segments (`mask`: 1 real step, 0 padding).

        Returns:
            `{"actions": [B, K, action_out] (tanh for Box, logits for Discrete),
            "obs": [B, K, obs_dim] (the next observation), "returns_to_go": [B, K]
            (the next step's)}`.
        """
        b, k = rtg.shape
        time = self.embed_timestep(timesteps.long().clamp(0, self.max_ep_len - 1))
        tokens = torch.stack([self.embed_return(rtg.unsqueeze(-1) / self.rtg_scale) + time,
                              self.embed_obs(obs) + time, self.embed_action(actions_in) + time], dim=2)
        x = self.embed_drop(self.embed_ln(tokens.reshape(b, 3 * k, -1)))
        x = self.transformer(x, mask=self._attention_mask(mask))
        x = x.reshape(b, k, 3, -1)
        action = self.predict_action(x[:, :, 1])
        return {"actions": action if self.discrete else torch.tanh(action),
                "obs": self.predict_obs(x[:, :, 2]), "returns_to_go": self.predict_return(x[:, :, 2]).squeeze(-1)}

    def _attention_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """`[B * heads, 3K, 3K]` additive mask: causal, padding tokens hidden as keys. Each
        token still sees itself, so a padding token's attention is defined (no NaN)."""
        b, k = mask.shape
        n = 3 * k
        keys = (mask > 0.5).repeat_interleave(3, dim=1)  # [B, 3K]
        causal = torch.ones(n, n, dtype=torch.bool, device=mask.device).tril()
        eye = torch.eye(n, dtype=torch.bool, device=mask.device)
        allowed = causal.unsqueeze(0) & (keys.unsqueeze(1) | eye.unsqueeze(0))
        additive = torch.zeros(b, n, n, device=mask.device).masked_fill(~allowed, float("-inf"))
        return additive.repeat_interleave(self.num_heads, dim=0)

    # --- acting: one step with the rolling context as state ---------------------------------
    def get_initial_state(self) -> List[np.ndarray]:
        """The empty context: `[K, 3 + obs_dim + action_in_dim]` zeros (no valid row)."""
        return [np.zeros((self.context_length, len(CONTEXT_COLUMNS) + self.obs_dim + self.action_in_dim),
                         np.float32)]

    def forward(self, input_dict: Dict[str, torch.Tensor], state: List[torch.Tensor],
                seq_lens: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """One step: `(action outputs [B, action_out], [context out])` (see the module docstring)."""
        ctx = state[0].float()
        obs = input_dict["obs"].float().reshape(ctx.shape[0], -1)
        rewards = input_dict.get("prev_rewards")
        rewards = torch.zeros(ctx.shape[0]) if rewards is None else rewards.float().reshape(-1)
        last = ctx[:, -1]
        started = last[:, _VALID] > 0.5
        rtg = torch.where(started, last[:, _R] - rewards, torch.full_like(rewards, self.target_return))
        t = torch.where(started, last[:, _T] + 1.0, torch.zeros_like(rewards))
        row = torch.cat([rtg[:, None], t[:, None], torch.ones_like(t)[:, None], obs,
                         torch.zeros(ctx.shape[0], self.action_in_dim)], dim=1)
        ctx = torch.cat([ctx[:, 1:], row[:, None]], dim=1)
        o = len(CONTEXT_COLUMNS)
        preds = self.sequence_forward(ctx[:, :, _R], ctx[:, :, o:o + self.obs_dim], ctx[:, :, o + self.obs_dim:],
                                      ctx[:, :, _T], ctx[:, :, _VALID])
        out = preds["actions"][:, -1]
        greedy = nn.functional.one_hot(out.argmax(-1), self.action_in_dim).float() if self.discrete else out
        return out, [self.with_last_action(ctx, greedy)]

    def with_last_action(self, ctx: torch.Tensor, action_in: torch.Tensor) -> torch.Tensor:
        """`ctx` with the newest row's action input set to `action_in` `[B, action_in_dim]`."""
        o = len(CONTEXT_COLUMNS) + self.obs_dim
        actions = torch.cat([ctx[:, :-1, o:], action_in[:, None].to(ctx.dtype)], dim=1)
        return torch.cat([ctx[:, :, :o], actions], dim=2)

    def value_function(self) -> torch.Tensor:
        raise ValueError("the Decision Transformer has no value function")
