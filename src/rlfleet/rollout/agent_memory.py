"""Recurrent policies on the multi-agent sampler: each agent's memory, carried from step to step.

Every agent of an episode has its own memory (`MultiAgentEpisode.memory`): the state going
into its next step and its last step, whose action and collected (clipped) reward are the
"previous" ones its next step reads. An agent's first step starts from its policy's initial
state with a zero previous action and reward, as a single-agent episode's first step does;
a new episode starts with no memory (so an agent's state resets when its episode ends).

The agents a policy acts for in one env step are stacked into one batch (`recurrent_inputs`)
for one forward pass, and each row records what the single-agent sampler records
(`recurrent_columns`): `prev_actions`, `prev_rewards`, `state_in_<k>`, and `state_out_<k>`,
which serves bootstrapping in postprocessing and is removed after it
(`postprocessing.drop_state_outs`).
Learning then cuts the rows into sequences per agent trajectory (policy/rnn_sequencing.py).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.multi_agent_episode import STEP_ACTION, STEP_REWARD, MultiAgentEpisode
from rlfleet.utils.spaces import action_layout

SB = SampleBatch


def recurrent_inputs(policy, episodes: Sequence[MultiAgentEpisode], agents: Sequence[Any]
                     ) -> Tuple[List[np.ndarray], np.ndarray, np.ndarray]:
    """`(states [[B, ...], ...], prev_actions [B, ...], prev_rewards [B])` of the agents
    `agents[j]` of `episodes[j]`, all mapped to `policy`, from their memories."""
    initial = policy.get_initial_state()
    shape, dtype = action_layout(policy.action_space)
    b = len(agents)
    states = [np.empty((b, *s.shape), np.float32) for s in initial]
    prev_actions = np.zeros((b, *shape), dtype)
    prev_rewards = np.zeros(b, np.float32)
    for j, (ep, aid) in enumerate(zip(episodes, agents)):
        remembered = ep.memory.get(aid)
        if remembered is None:
            for column, s0 in zip(states, initial):
                column[j] = s0
            continue
        state, last_step = remembered
        for column, s in zip(states, state):
            column[j] = s
        prev_actions[j] = last_step[STEP_ACTION]
        prev_rewards[j] = last_step[STEP_REWARD]
    return states, prev_actions, prev_rewards


def recurrent_columns(extra: Dict[str, Any], states: List[np.ndarray], state_out: Sequence[np.ndarray],
                      prev_actions: np.ndarray, prev_rewards: np.ndarray) -> List[np.ndarray]:
    """Adds the recurrent columns to a group's extra outputs `extra` (in the single-agent
    sampler's order); returns the states coming out, as float32 arrays `[B, ...]`."""
    extra[SB.PREV_ACTIONS] = prev_actions
    extra[SB.PREV_REWARDS] = prev_rewards
    out = [np.asarray(s, np.float32) for s in state_out]
    for k, (s_in, s_out) in enumerate(zip(states, out)):
        extra[f"state_in_{k}"] = s_in
        extra[f"state_out_{k}"] = s_out
    return out


__all__ = ["recurrent_columns", "recurrent_inputs"]
