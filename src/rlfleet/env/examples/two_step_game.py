"""The two-step cooperative matrix game of the QMIX paper (Rashid et al. 2018, arXiv:1803.11485),
as RLlib 1.x's `rllib/examples/env/two_step_game.py` has it: two agents, three states, best team return 8.

Step 1 (state 0): agent 1's action picks the second state (0: state 1, 1: state 2); agent 2's
action does not matter. Step 2: in state 1 the team gets 7 whatever both do; in state 2 it gets
the payoff of the joint action, `[[0, 1], [1, 8]]`. Each agent receives half the team's
reward. Independent learners tend to settle on the safe 7; a team that learns jointly (a
group, or value decomposition) finds the 8.

Observations: the state as a one-hot of 3, then the agent's own index as a one-hot of 2.

    env = TwoStepGame()
    grouped = env.with_agent_groups({"team": [0, 1]})  # one agent with Tuple obs and actions
"""
from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv

PAYOFF_STATE_2 = np.array([[0.0, 1.0], [1.0, 8.0]])


class TwoStepGame(MultiAgentEnv):
    """The two-step game (see the module doc). `config` is accepted and unused (no options)."""

    possible_agents = [0, 1]
    observation_space = gym.spaces.Box(0.0, 1.0, (5,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Optional[dict] = None) -> None:
        if config:
            raise ValueError(f"TwoStepGame takes no env_config options; got {sorted(config)}")
        self.state = 0

    def _obs(self):
        out = {}
        for agent in self.possible_agents:
            o = np.zeros(5, np.float32)
            o[self.state] = 1.0
            o[3 + agent] = 1.0
            out[agent] = o
        return out

    def reset(self, *, seed=None, options=None):
        self.state = 0
        return self._obs(), {}

    def step(self, action_dict):
        if self.state == 0:
            self.state = 1 if int(action_dict[0]) == 0 else 2
            reward, done = 0.0, False
        else:
            reward = 7.0 if self.state == 1 else float(PAYOFF_STATE_2[int(action_dict[0]), int(action_dict[1])])
            done = True
        rewards = {agent: reward / 2.0 for agent in self.possible_agents}
        flags = {agent: done for agent in self.possible_agents}
        return self._obs(), rewards, dict(flags, **{ALL: done}), dict({a: False for a in flags}, **{ALL: False}), {}


__all__ = ["TwoStepGame"]
