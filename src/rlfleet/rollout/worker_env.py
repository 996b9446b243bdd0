"""The env a RolloutWorker samples from: which of the five kinds, built once.

| kind                   | when                                              | sampler                      |
| ---------------------- | ------------------------------------------------- | ---------------------------- |
| `EnvPoolVectorEnv`     | `env: "envpool:<id>"`                             | vectorised single-agent      |
| `RemoteVectorEnv`      | `remote_worker_envs: True`                        | vectorised single-agent      |
| an `ExternalEnv`       | the creator returns one (it runs its own loop)    | `ExternalEnvSampler`         |
| `MultiAgentVectorEnv`  | a multi-agent env, or the config maps policies    | multi-agent (dict or slots)  |
| `GymVectorEnv`         | `gym_env_vectorize_mode`, or the creator returns  | vectorised single-agent      |
|                        | a `gymnasium.vector.VectorEnv`                    |                              |
| `VectorEnv`            | any other Gymnasium env                           | vectorised single-agent      |

`rollout/sampler_choice.py` then picks the sampler for the kind built here.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv

from rlfleet.env.as_multi_agent import as_multi_agent
from rlfleet.env.env_context import EnvContext
from rlfleet.env.envpool_env import check_worker_config as check_envpool_config
from rlfleet.env.envpool_env import envpool_threads, find_envpool_creator
from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.gym_vector_env import GymVectorEnv
from rlfleet.env.gym_vectorize import make_gym_vector_env, wrap_vector_env
from rlfleet.env.multi_agent_env import MultiAgentVectorEnv
from rlfleet.env.vector_env import VectorEnv
from rlfleet.env.wrappers.atari import is_atari, with_atari_preprocessing
from rlfleet.env.wrappers.video import with_video
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.rollout.policy_mapping import wants_multi_agent
from rlfleet.utils.seeding import derive_seed


def sub_env_seeds(seed: Optional[int], worker_index: int, num_envs: int) -> List[Optional[int]]:
    """One seed per sub-env, derived from `seed`, the worker's index and the sub-env's (None: unseeded)."""
    return [None if seed is None else derive_seed(seed, worker_index, i) & 0xFFFFFFFF for i in range(num_envs)]


def make_worker_env(env_creator: Callable[[EnvContext], Any], config: dict, *, env_context: EnvContext,
                    rules: EpisodeRules, multi_agent: MultiAgentSettings, log_dir: Optional[str] = None
                    ) -> Tuple[Any, bool]:
    """The worker's env (see the module docstring) and whether it is an Atari game.

    Args:
        env_creator: `EnvContext -> env`.
        config: the worker's config (`num_envs_per_worker`, `seed`, `remote_worker_envs`,
            the Atari and video wrappers' keys).
        env_context: the worker's context (its `worker_index` and `num_workers`).
        rules: the worker's episode-end rules (applied by the single-agent vector envs).
        multi_agent: the worker's multi-agent settings (policies mapped: the multi-agent path).
        log_dir: the trainer's results folder (where `record_env` writes).
    """
    worker_index = env_context.worker_index
    # Atari image envs get the DeepMind (or generic) preprocessing `preprocessor_pref` asks for.
    env_creator = with_atari_preprocessing(env_creator, config)
    # `record_env` / `render_env`: sub-env 0 of the worker that samples (env/wrappers/video.py).
    env_creator = with_video(env_creator, config, worker_index=worker_index, num_workers=env_context.num_workers,
                             log_dir=log_dir)
    num_envs = int(config["num_envs_per_worker"])
    seeds = sub_env_seeds(config.get("seed"), worker_index, num_envs)
    pool = find_envpool_creator(env_creator)
    if pool is not None:  # "envpool:<id>": one pool of num_envs C++ envs, stepped as a batch
        check_envpool_config(config, multi_agent=multi_agent.configured)
        env = pool.make_vector_env(env_context, num_envs=num_envs, seeds=seeds, rules=rules,
                                   num_threads=envpool_threads(config, worker_index))
        return env, env.is_atari
    mode = config.get("gym_env_vectorize_mode")
    if mode is not None:  # one Gymnasium vector env (env/gym_vectorize.py)
        if multi_agent.configured:
            raise ValueError(f"'gym_env_vectorize_mode': {mode!r} is for single-agent envs with one policy; leave it "
                             "None with 'multiagent' policies")
        env = make_gym_vector_env(mode, env_creator, config, env_context=env_context, num_envs=num_envs, seeds=seeds,
                                  rules=rules)
        return env, _atari_vector(env, env_creator, env_context)
    if config.get("remote_worker_envs"):
        if multi_agent.configured:
            raise ValueError("'remote_worker_envs': True is not available with multi-agent envs or policies "
                             "yet; use False")
        from rlfleet.rollout.remote_vector_env import RemoteVectorEnv

        contexts = [env_context.copy_with_overrides(vector_index=i, remote=True) for i in range(num_envs)]
        env = RemoteVectorEnv(env_creator, contexts, rules=rules, seeds=seeds,
                              batch_wait_ms=config.get("remote_env_batch_wait_ms", 0))
        return env, env.is_atari
    first = env_creator(env_context.copy_with_overrides(vector_index=0))
    if isinstance(first, gym.vector.VectorEnv):  # the creator batches its envs itself
        seeds = sub_env_seeds(config.get("seed"), worker_index, first.num_envs)
        return wrap_vector_env(first, config, seeds=seeds, rules=rules), False
    envs = [first] + [env_creator(env_context.copy_with_overrides(vector_index=i)) for i in range(1, num_envs)]
    if isinstance(envs[0], ExternalEnv):  # it drives itself: served by ExternalEnvSampler
        if num_envs != 1:
            raise ValueError(f"'num_envs_per_worker': {num_envs} with an ExternalEnv ({type(envs[0]).__name__}); "
                             "an external env runs its own episodes (up to max_concurrent at once): use 1")
        return envs[0], False
    atari = isinstance(envs[0], gym.Env) and is_atari(envs[0])
    if wants_multi_agent(envs[0], multi_agent):
        return MultiAgentVectorEnv([as_multi_agent(e) for e in envs], seeds=seeds), atari
    return VectorEnv(envs, rules=rules, seeds=seeds), atari


def _atari_vector(env: GymVectorEnv, env_creator, env_context: EnvContext) -> bool:
    """Whether a Gymnasium vector env's sub-envs are Atari games (rewards then clipped by default)."""
    if env.envs is not None:  # sync: the sub-envs are here
        return is_atari(env.envs[0])
    if not isinstance(env.venv.unwrapped, AsyncVectorEnv):
        return False  # a batched implementation, not ALE envs
    probe = env_creator(env_context.copy_with_overrides(vector_index=0))  # async: the sub-envs are elsewhere
    try:
        return isinstance(probe, gym.Env) and is_atari(probe)
    finally:
        probe.close()


def as_general_env(env: Any, why: str, sampling_async: bool) -> Optional[MultiAgentVectorEnv]:
    """`env` as a MultiAgentVectorEnv of one agent ("agent0") per sub-env, for a worker that
    moves onto the general (multi-agent) sampler; None when it is on one already (or has no
    env). Raises, naming `why`, where the env cannot move."""
    if env is None or isinstance(env, (MultiAgentVectorEnv, ExternalEnv)):
        return None  # already on a sampler with per-agent policies
    if sampling_async:
        raise ValueError(f"{why} is not available with 'sample_async': True yet")
    if not isinstance(env, VectorEnv):
        raise ValueError(f"{why} is not available with 'remote_worker_envs': True or an 'envpool:' env yet")
    return MultiAgentVectorEnv([as_multi_agent(e) for e in env.envs])
