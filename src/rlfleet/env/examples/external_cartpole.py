"""CartPole as external envs: a simulator loop that asks for actions instead of being stepped.

    from rlfleet.env.examples.external_cartpole import ExternalCartPole
    PPOTrainer(env=ExternalCartPole, config={"env_config": {"seed": 0}})

`ExternalCartPole` plays episodes of CartPole-v1 one after another with `get_action`;
`env_config["logged_fraction"]` (default 0) of its episodes act by a uniformly random
controller instead and record those actions with `log_action` (off-policy logging).
`TwoExternalCartPoles` runs two poles as agents 0 and 1 of one ExternalMultiAgentEnv
episode (it ends, terminal for both, when either pole falls or reaches the 500-step limit).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np

from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.external_multi_agent_env import ExternalMultiAgentEnv


def _config(env_config: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    return dict(env_config or {})


class ExternalCartPole(ExternalEnv):
    """CartPole-v1 driving itself (see the module docstring).

    Args:
        env_config: `seed` (default 0; +worker index), `logged_fraction` (default 0.0).
    """

    def __init__(self, env_config: Optional[Dict[str, Any]] = None):
        cfg = _config(env_config)
        self.env = gym.make("CartPole-v1")
        super().__init__(self.env.action_space, self.env.observation_space)
        self.seed = int(cfg.get("seed", 0)) + int(getattr(env_config, "worker_index", 0))
        self.logged_fraction = float(cfg.get("logged_fraction", 0.0))

    def run(self) -> None:
        rng = np.random.default_rng(self.seed)
        obs, _ = self.env.reset(seed=self.seed)
        while True:
            eid = self.start_episode()
            logged = rng.random() < self.logged_fraction
            while True:
                if logged:
                    action = int(rng.integers(2))
                    self.log_action(eid, obs, action)
                else:
                    action = self.get_action(eid, obs)
                obs, reward, terminated, truncated, _ = self.env.step(action)
                self.log_returns(eid, reward)
                if terminated or truncated:
                    self.end_episode(eid, obs, truncated=truncated and not terminated)
                    obs, _ = self.env.reset()
                    break


class TwoExternalCartPoles(ExternalMultiAgentEnv):
    """Two CartPole-v1 poles, agents 0 and 1, in one external multi-agent episode.

    Args:
        env_config: `seed` (default 0).
    """

    def __init__(self, env_config: Optional[Dict[str, Any]] = None):
        cfg = _config(env_config)
        self.envs = [gym.make("CartPole-v1") for _ in range(2)]
        super().__init__(self.envs[0].action_space, self.envs[0].observation_space)
        self.seed = int(cfg.get("seed", 0)) + int(getattr(env_config, "worker_index", 0))

    def run(self) -> None:
        episode = 0
        while True:
            eid = self.start_episode()
            obs = {i: env.reset(seed=self.seed + 2 * episode + i)[0] for i, env in enumerate(self.envs)}
            episode += 1
            last = dict(obs)
            while obs:
                actions = self.get_action(eid, obs)
                rewards, nxt = {}, {}
                ended = False
                for i, action in actions.items():
                    o, r, terminated, truncated, _ = self.envs[i].step(action)
                    rewards[i] = r
                    last[i] = o
                    if terminated or truncated:
                        ended = True
                    else:
                        nxt[i] = o
                self.log_returns(eid, rewards)
                if ended:  # one pole is down (or out of time): the episode ends for both
                    self.end_episode(eid, last)
                    break
                obs = nxt


__all__ = ["ExternalCartPole", "TwoExternalCartPoles"]
