"""What a TorchPolicy's model reads besides observations: the recurrent state and, where the
model asks for them, the previous actions and rewards (`view_columns`)."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np
import torch

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.towers import to_device
from rlfleet.utils.spaces import action_layout


def recurrence(policy, model_config: dict) -> Tuple[List[np.ndarray], int, List[str]]:
    """`(initial state, max_seq_len, view_columns)` of `policy.model`.

    Raises:
        ValueError: `use_lstm` / `use_attention` on a policy whose networks are not recurrent.
    """
    initial_state = [np.asarray(s.detach().cpu().numpy() if torch.is_tensor(s) else s, np.float32)
                     for s in policy.model.get_initial_state()]
    max_seq_len = int(model_config.get("max_seq_len", 20))
    for key in ("use_lstm", "use_attention"):
        if model_config.get(key) and not initial_state:
            # An algorithm that builds its own networks (make_model_and_action_dist) and has no
            # recurrent version: say so rather than silently train a feed-forward net.
            raise ValueError(
                f"'model.{key}': True is not supported by {type(policy).__name__} (its networks are not "
                f"recurrent; recurrent Q-learning needs sequence replay); use PPO or PG, or set {key} False"
            )
    # Columns the model reads besides obs (and state): the previous action / reward (a
    # recurrent model says so with `uses_prev_actions` / `uses_prev_rewards`).
    view_columns: List[str] = []
    uses_actions = getattr(policy.model, "uses_prev_actions", model_config.get("lstm_use_prev_action"))
    uses_rewards = getattr(policy.model, "uses_prev_rewards", model_config.get("lstm_use_prev_reward"))
    if initial_state and uses_actions:
        view_columns.append(SampleBatch.PREV_ACTIONS)
    if initial_state and uses_rewards:
        view_columns.append(SampleBatch.PREV_REWARDS)
    return initial_state, max_seq_len, view_columns


def model_inputs(policy, obs: np.ndarray, state_batches, prev_actions, prev_rewards
                 ) -> Tuple[Dict[str, torch.Tensor], List[torch.Tensor]]:
    """`(input_dict, state)` tensors for one acting step of `len(obs)` rows; a recurrent
    model without a given state starts from its initial state, and missing previous
    actions / rewards are zeros (as at an episode start)."""
    n = len(obs)
    input_dict: Dict[str, Any] = {SampleBatch.OBS: torch.as_tensor(obs)}
    if SampleBatch.PREV_ACTIONS in policy.view_columns:
        row_shape = action_layout(policy.action_space)[0]
        prev = np.zeros((n, *row_shape), np.float32) if prev_actions is None else prev_actions
        input_dict[SampleBatch.PREV_ACTIONS] = torch.as_tensor(np.asarray(prev))
    if SampleBatch.PREV_REWARDS in policy.view_columns:
        prev = np.zeros(n, np.float32) if prev_rewards is None else prev_rewards
        input_dict[SampleBatch.PREV_REWARDS] = torch.as_tensor(np.asarray(prev, np.float32))
    if state_batches:
        state = [torch.as_tensor(np.asarray(s, np.float32)) for s in state_batches]
    else:
        state = [torch.as_tensor(np.broadcast_to(s, (n, *s.shape)).copy()) for s in policy.get_initial_state()]
    if policy.device.type != "cpu":
        input_dict = {k: to_device(v, policy.device) for k, v in input_dict.items()}
        state = [to_device(s, policy.device) for s in state]
    return input_dict, state


__all__ = ["model_inputs", "recurrence"]
