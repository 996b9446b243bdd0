"""A Gymnasium `VectorEnv` as a rollout worker's env: one batched call per vector step.

Made from `gym_env_vectorize_mode` (`rlfleet.env.gym_vectorize`) or handed over by an env
creator that returns a `gymnasium.vector.VectorEnv` (a JAX/GPU simulator's, a user's own).
`GymVectorEnv` presents it to the single-agent sampler as `rlfleet.env.vector_env.VectorEnv`
does (`reset_all` / `step` -> `VectorStep`), with whole arrays and no Python loop over the envs.

How each of Gymnasium's autoreset modes (https://farama.org/Vector-Autoreset-Mode) maps onto
rlfleet's episodes, so that no transition crosses an episode boundary and a truncated episode
bootstraps from its real final observation:

| mode        | the step an episode ends            | what rlfleet does                          |
| ----------- | ----------------------------------- | ------------------------------------------ |
| `SAME_STEP` | obs is the next episode's first;    | hands on `final_obs` in place (bootstrap), |
|             | `info["final_obs"]` the final one   | the returned obs as the reset observation  |
| `DISABLED`  | obs is the final one; the env waits | resets just the ended envs at once         |
|             | for `reset(options={"reset_mask"})` | (`reset_mask`), one call for all of them   |
| `NEXT_STEP` | obs is the final one; the env's     | the next step's row of those envs is no    |
|             | *next* step resets it, ignoring its | transition (`VectorStep.starts`): the      |
|             | action (reward 0)                   | sampler drops it and starts the episode    |

The mode is read from `metadata["autoreset_mode"]` (Gymnasium >= 1.1 declares it; `NEXT_STEP`,
Gymnasium's default, when absent). `horizon`, `soft_horizon` and `no_done_at_end` are applied by
`EpisodeRules.end_many`; a hard `horizon` resets the envs it ends with `reset_mask`, which
`SyncVectorEnv`, `AsyncVectorEnv` and any env in `DISABLED` mode take; for others (a
`vector_entry_point` env such as CartPole's) it is refused by name.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.info_rows import InfoRows, nested_rows
from rlfleet.env.vector_env import VectorStep

_FLAT_ACTIONS = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def autoreset_mode_of(venv: gym.vector.VectorEnv) -> AutoresetMode:
    """The vector env's declared autoreset mode (Gymnasium's default, `NEXT_STEP`, if none)."""
    mode = (venv.metadata or {}).get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)


class GymVectorEnv:
    """A `gymnasium.vector.VectorEnv` with rlfleet's vector-env interface (see the module
    docstring).

    Args:
        venv: the vector env (already built).
        rules: horizon, soft horizon, no_done_at_end.
        seeds: one seed per sub-env for the first reset (None: unseeded). `SyncVectorEnv` and
            `AsyncVectorEnv` take them all; any other vector env (one random stream for all its
            envs) is seeded with the first.

    Raises:
        ValueError: a nested (Dict / Tuple) action space, or a hard `horizon` the env cannot
            reset for.
    """

    def __init__(self, venv: gym.vector.VectorEnv, *, rules: EpisodeRules = EpisodeRules(),
                 seeds: Optional[Sequence[Optional[int]]] = None) -> None:
        self.venv = venv
        self.num_envs = int(venv.num_envs)
        self.observation_space = venv.single_observation_space
        self.action_space = venv.single_action_space
        self.rules = rules
        self.mode = autoreset_mode_of(venv)
        inner = venv.unwrapped
        self._per_env_seeds = isinstance(inner, (SyncVectorEnv, AsyncVectorEnv))
        # Only a SyncVectorEnv's sub-envs are Python objects of this process (env_task_fn, foreach_env).
        self.envs = list(inner.envs) if isinstance(inner, SyncVectorEnv) else None
        self._can_reset_some = self._per_env_seeds or self.mode is AutoresetMode.DISABLED
        if not isinstance(self.action_space, _FLAT_ACTIONS):
            raise ValueError(f"the vector env {venv} has the action space {self.action_space}; rlfleet's vector-env "
                             "path takes Box, Discrete, MultiDiscrete and MultiBinary actions. Leave "
                             "gym_env_vectorize_mode unset (None) to step the sub-envs one by one")
        if rules.horizon is not None and not rules.soft_horizon and not self._can_reset_some:
            raise ValueError(f"'horizon': {rules.horizon} needs the vector env to reset single sub-envs, and "
                             f"{type(inner).__name__} (autoreset mode {self.mode.name}) resets only all at once. "
                             "Use the env's own time limit (e.g. env_config max_episode_steps), 'soft_horizon': "
                             "True, or gym_env_vectorize_mode 'sync' / 'async'")
        self._nested_obs = isinstance(self.observation_space, (gym.spaces.Dict, gym.spaces.Tuple))
        self._seeds = list(seeds) if seeds is not None else [None] * self.num_envs
        self._lengths = np.zeros(self.num_envs, np.int64)  # env steps of each running episode
        self._starting = np.zeros(self.num_envs, bool)  # NEXT_STEP: envs whose next step is their reset

    def seed_next_reset(self, seeds: Sequence[Optional[int]]) -> None:
        """Seeds for the next `reset_all` (one per sub-env; all None: the envs' own streams go on)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed_next_reset: got {len(seeds)} seeds for {self.num_envs} sub-envs")
        self._seeds = list(seeds)

    def reset_all(self):
        """Resets every sub-env (seeded once, see `seed_next_reset`); their first observations."""
        seeds, self._seeds = self._seeds, [None] * self.num_envs
        if all(s is None for s in seeds):
            seed = None
        else:
            seed = seeds if self._per_env_seeds else seeds[0]
            self.action_space.seed(seeds[0])
        obs, _ = self.venv.reset(seed=seed)
        self._lengths[:] = 0
        self._starting[:] = False
        return self._obs(obs)

    def step(self, actions) -> VectorStep:
        """One batched step; the ended envs' final observations in place, their next
        episodes' first in `reset_obs` (or, in `NEXT_STEP` mode, on the next step)."""
        obs, rewards, terminated, truncated, info = self.venv.step(actions)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        lengths = self._lengths
        lengths += 1
        starts = None
        if self.mode is AutoresetMode.NEXT_STEP and self._starting.any():
            starts = self._starting.copy()  # these rows were resets: obs is a first observation
            lengths[starts] = 0
            self._starting[:] = False
        ends, terminateds, to_reset = self.rules.end_many(terminated, truncated, lengths)
        reset_obs: Dict[int, Any] = {}
        final = None
        if ends.any():
            env_ended = terminated | truncated
            obs, reset_obs = self._turn_over(obs, info, env_ended, ends, to_reset)
            lengths[ends] = 0
            if self.mode is AutoresetMode.SAME_STEP and env_ended.any():
                final = env_ended  # their infos are the ending step's, in info["final_info"]
        else:
            obs = self._obs(obs)
        return VectorStep(obs, np.asarray(rewards, np.float64), terminateds, ends, reset_obs,
                          InfoRows(info, self.num_envs, final), starts)

    def _turn_over(self, obs, info: dict, env_ended: np.ndarray, ends: np.ndarray, to_reset: np.ndarray):
        """(the step's observations with each ended env's final one, {env: its next first one})."""
        first = None
        by_rule = to_reset & ~env_ended  # a hard horizon: rlfleet's rule ends it, not the env
        if self.mode is AutoresetMode.DISABLED:
            by_rule = to_reset
        elif self.mode is AutoresetMode.NEXT_STEP:  # the env resets the ones it ended on their next step
            self._starting |= env_ended
        elif env_ended.any():  # SAME_STEP
            # The env reset the ones it ended: obs holds their first observations, info their final ones.
            first = self._obs(obs)
            obs = self._obs(obs) if self._nested_obs else np.array(obs, copy=True)
            final = info["final_obs"]
            for i in np.flatnonzero(env_ended).tolist():
                obs[i] = final[i]
        if first is None:
            obs = self._obs(obs)
        if by_rule.any():
            reset_first, _ = self.venv.reset(options={"reset_mask": by_rule})
            reset_first = self._obs(reset_first)
        reset_obs: Dict[int, Any] = {}
        for i in np.flatnonzero(ends).tolist():
            if by_rule[i]:
                reset_obs[i] = reset_first[i]
            elif not to_reset[i]:  # soft horizon: the env goes on from here
                reset_obs[i] = obs[i]
            elif first is not None:
                reset_obs[i] = first[i]
        return obs, reset_obs

    def _obs(self, obs):
        # Nested observations: one structure per env, which the preprocessor reads.
        return nested_rows(obs, self.num_envs) if self._nested_obs else obs

    def render(self, index: int = 0):
        """A frame of sub-env `index` (a SyncVectorEnv's own sub-env; others render all at once)."""
        if self.envs is not None:
            return self.envs[index].render()
        frames = self.venv.render()
        return None if frames is None else frames[index]

    def close(self) -> None:
        self.venv.close()

    def __repr__(self) -> str:
        return f"GymVectorEnv({type(self.venv.unwrapped).__name__}, num_envs={self.num_envs}, mode={self.mode.name})"

