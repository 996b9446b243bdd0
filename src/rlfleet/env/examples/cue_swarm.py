"""CueSwarm: a synthetic env with many agent slots, for the vectorised multi-agent path.

`num_agents` agents sit on a ring. At every step each one sees two cues, one-hot: its own
and its right-hand neighbour's (`num_cues` values each, drawn afresh every step); it earns 1
when its action equals (own cue + neighbour's cue) mod `num_cues`, else 0. A random policy
earns 1 / num_cues per agent step; a policy that reads both cues earns 1. Episodes last
`episode_len` steps (truncated, not terminal). All of it is a few NumPy calls per step, so
that a benchmark measures the sampler, not the env.

    from rlfleet.env.examples.cue_swarm import CueSwarm
    PPOTrainer(env=CueSwarm, config={"env_config": {"num_agents": 64}, "multiagent": {
        "policies": {"shared"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: "shared"}})
"""
from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.vector_multi_agent_env import SlotGroup, SlotMultiAgentEnv, SlotReset, SlotStep


class CueSwarm(SlotMultiAgentEnv):
    """See the module docstring.

    Args:
        config: `num_agents` (default 64), `num_cues` (4), `episode_len` (20).
    """

    def __init__(self, config: Optional[dict] = None):
        config = dict(config or {})
        self.num_agents = int(config.get("num_agents", 64))
        self.num_cues = int(config.get("num_cues", 4))
        self.episode_len = int(config.get("episode_len", 20))
        if self.num_agents < 2 or self.num_cues < 2 or self.episode_len < 1:
            raise ValueError(f"CueSwarm needs num_agents >= 2, num_cues >= 2 and episode_len >= 1; got {config}")
        k = self.num_cues
        obs_space = gym.spaces.Box(0.0, 1.0, (2 * k,), np.float32)
        self.slot_groups = {"agents": SlotGroup(tuple(range(self.num_agents)), obs_space, gym.spaces.Discrete(k))}
        self._init_spaces()
        self._rng = np.random.default_rng()
        self._eye = np.eye(k, dtype=np.float32)
        self._alive = np.ones(self.num_agents, bool)

    def _observe(self) -> np.ndarray:
        self._cues = self._rng.integers(0, self.num_cues, self.num_agents)
        return np.concatenate([self._eye[self._cues], self._eye[np.roll(self._cues, -1)]], axis=1)

    def reset_slots(self, *, seed=None, options=None) -> SlotReset:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        return SlotReset({"agents": self._observe()}, {"agents": self._alive.copy()})

    def step_slots(self, actions) -> SlotStep:
        target = (self._cues + np.roll(self._cues, -1)) % self.num_cues
        rewards = (np.asarray(actions["agents"]) == target).astype(np.float32)
        self._t += 1
        over = self._t >= self.episode_len
        n = self.num_agents
        return SlotStep({"agents": self._observe()}, {"agents": rewards}, {"agents": np.zeros(n, bool)},
                        {"agents": np.full(n, over)}, {"agents": np.full(n, not over)}, False, over)


__all__ = ["CueSwarm"]
