"""`gym_env_vectorize_mode`: a worker's envs built as one Gymnasium vector env.

| mode                   | built with                                         | sub-envs run            |
| ---------------------- | -------------------------------------------------- | ----------------------- |
| `"vector_entry_point"` | `gymnasium.make_vec(id, vectorization_mode=...)`   | as one batched env      |
| `"sync"`               | `SyncVectorEnv` over the env creator               | in this process, a loop |
| `"async"`              | `AsyncVectorEnv` over the env creator (shared mem) | one process each        |

`vector_entry_point` needs `env` to be a Gymnasium id that registers a batched implementation
(CartPole-v1 does; `gymnasium.make_vec` names the ids that do not). `sync` and `async` take any
env the worker could build one by one (a registered creator, a class path, an id, with the Atari
and video wrappers the config asks for) and reset in the same step (Gymnasium's `SAME_STEP`
autoreset: no step is spent on resets). `async` is the local way to use every core for Python
envs whose step is slow, without Ray.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rlfleet.env.env_context import EnvContext
from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.gym_vector_env import GymVectorEnv


def make_gym_vector_env(mode: str, env_creator: Callable[[EnvContext], Any], config: dict, *,
                        env_context: EnvContext, num_envs: int, seeds: Sequence[Optional[int]],
                        rules: EpisodeRules) -> GymVectorEnv:
    """The worker's `num_envs` envs as one Gymnasium vector env (see the module docstring).

    Raises:
        ValueError: a setting the mode cannot honour, named (an env that is not a Gymnasium id
            for `vector_entry_point`, `remote_worker_envs`, `record_env` / `render_env` there).
    """
    if config.get("remote_worker_envs"):
        raise ValueError(f"'gym_env_vectorize_mode': {mode!r} and 'remote_worker_envs': True both say how to run "
                         "the sub-envs; use one ('async' runs each sub-env in its own process without Ray)")
    if mode == "vector_entry_point":
        venv = _entry_point_vector_env(config, env_context, num_envs)
    else:
        creators = [functools.partial(env_creator, env_context.copy_with_overrides(vector_index=i))
                    for i in range(num_envs)]
        if mode == "sync":
            venv = SyncVectorEnv(creators, autoreset_mode=AutoresetMode.SAME_STEP)
        else:
            venv = AsyncVectorEnv(creators, shared_memory=True, autoreset_mode=AutoresetMode.SAME_STEP)
    return GymVectorEnv(venv, rules=rules, seeds=seeds)


def _entry_point_vector_env(config: dict, env_context: EnvContext, num_envs: int) -> gym.vector.VectorEnv:
    env_id = config.get("env")
    for key in ("record_env", "render_env"):
        if config.get(key):
            raise ValueError(f"{key}={config[key]!r} is not available with 'gym_env_vectorize_mode': "
                             "'vector_entry_point' (a batched env has no single sub-env to film); use 'sync'")
    if not isinstance(env_id, str) or env_id not in gym.registry:
        raise ValueError(f"'gym_env_vectorize_mode': 'vector_entry_point' needs 'env' to be a registered Gymnasium "
                         f"id with a batched implementation, got env={env_id!r}; use 'sync' or 'async' for other envs")
    if gym.registry[env_id].vector_entry_point is None:
        raise ValueError(f"'gym_env_vectorize_mode': 'vector_entry_point': the Gymnasium id {env_id!r} has no "
                         "vector_entry_point (no batched implementation); use 'sync' or 'async'")
    kwargs = dict(env_context) if env_context is not None else {}
    try:
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
    except TypeError as e:
        raise ValueError(f"gymnasium.make_vec({env_id!r}, vectorization_mode='vector_entry_point', **env_config) "
                         f"failed with env_config keys {sorted(kwargs)}: {e}; remove the keys the env does not "
                         "take") from e


def wrap_vector_env(venv: gym.vector.VectorEnv, config: dict, *, seeds: Sequence[Optional[int]],
                    rules: EpisodeRules) -> GymVectorEnv:
    """A vector env an env creator returned, for the worker; its `num_envs` is the worker's.

    Raises:
        ValueError: `num_envs_per_worker` set to another count than the vector env's.
    """
    configured = int(config.get("num_envs_per_worker", 1))
    if configured not in (1, venv.num_envs):
        raise ValueError(f"the env creator returned a Gymnasium vector env of {venv.num_envs} envs, but "
                         f"'num_envs_per_worker' is {configured}; set num_envs_per_worker to {venv.num_envs} (or "
                         "1: the vector env's count is taken), or build the vector env with that many envs")
    if config.get("remote_worker_envs"):
        raise ValueError("'remote_worker_envs': True cannot run the sub-envs of a Gymnasium vector env that the env "
                         "creator returned in actors; set it to False (AsyncVectorEnv runs sub-envs in processes)")
    return GymVectorEnv(venv, rules=rules, seeds=seeds)
