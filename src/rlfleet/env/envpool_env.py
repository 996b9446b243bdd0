"""EnvPool as a vector-env backend: ``env: "envpool:<task id>"``.

`EnvPool <https://github.com/sail-sg/envpool>`_ (``pip install envpool``, >= 1.2) steps
many copies of an env in C++ threads. ``env: "envpool:CartPole-v1"`` (or ``"envpool:Pong-v5"``,
``"envpool:HalfCheetah-v4"``, any id of ``envpool.list_all_envs()``) makes each rollout worker
build one pool of ``num_envs_per_worker`` envs; the single-agent sampler steps it with one
batched call per vector step (`EnvPoolVectorEnv.step`), with no Python loop over the envs.

How the pool is made:

- ``num_envs`` is ``num_envs_per_worker``; each env gets the seed the Gymnasium path would
  give it (`derive_seed(seed, worker_index, vector_index)`, as int32), so workers differ and
  runs repeat; with ``seed: None`` the seeds are drawn from the OS.
- ``env_config`` keys go to ``envpool.make`` (e.g. ``{"episodic_life": True}`` for Atari,
  ``{"max_episode_steps": 200}``); ``num_envs``, ``seed`` and ``batch_size`` come from the
  config and may not be set there. ``num_threads`` defaults to the CPUs the worker reserved
  (``num_cpus_for_driver`` for the local worker, ``num_cpus_per_worker`` for remote ones), as
  torch's threads do: more threads than cores only add hand-offs.
- Image observations, which EnvPool gives channels first (Atari: ``(4, 84, 84)``), are handed
  on channels last (``(84, 84, 4)``), the layout rlfleet's vision nets take. EnvPool's Atari
  envs already apply the DeepMind preprocessing (frame skip, 84x84 grey, frame stack, no-op
  starts), so rlfleet's own Atari wrappers are not applied; rewards are clipped as for
  any Atari env (``clip_rewards``).

How episode ends map onto rlfleet's (`rlfleet.env.vector_env`): EnvPool resets an env that
ended on the *next* step call, which then ignores the action and returns the first
observation with reward 0 (Gymnasium's "next-step" autoreset). Recorded as is, that step
would be a bogus transition from the final observation to the next episode's first. Instead,
right after a step in which envs ended, `EnvPoolVectorEnv` resets just those envs
(``pool.reset(env_ids)``, one call): the step hands back each ended env's final observation
(to bootstrap from, after ``truncated``) and the reset observation separately in
``reset_obs``, exactly as `VectorEnv` does, and EnvPool's pending autoreset is consumed (the
env's next step is a real one). The env's random stream is the same as with its own
autoreset. ``terminated`` / ``truncated`` come from EnvPool's Gymnasium API; ``horizon``,
``soft_horizon`` and ``no_done_at_end`` are applied by the same `EpisodeRules` (`end_many`:
the whole pool at once, one `|` per step when no horizon is set). (EnvPool
reports ``terminated = done and not truncated``: a step that both fails and hits EnvPool's
time limit counts as truncated, where a Gymnasium env would say both.) The extra reset call
costs one more hand-off to EnvPool's threads on the steps where some env ended.

Not available with EnvPool envs (each a clear error): ``remote_worker_envs`` (EnvPool already
runs its envs in threads), ``record_env`` / ``render_env``, several policies (``multiagent``),
and anything that needs the single sub-envs as Python objects (``env_task_fn``).
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import math
import warnings
from typing import Any, Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np

from rlfleet.env.env_context import EnvContext
from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.info_rows import InfoRows, nested_rows
from rlfleet.env.vector_env import VectorStep

# `env="envpool:<task id>"` names an EnvPool task (resolved by `rlfleet.env.registry`).
ENVPOOL_PREFIX = "envpool:"
MIN_VERSION = (1, 2)
INSTALL_HINT = 'pip install "envpool>=1.2"  (Python >= 3.11)'

# Set by rlfleet from the config, never through env_config.
_RESERVED_KEYS = {
    "num_envs": "it is num_envs_per_worker",
    "seed": "each env's seed derives from the config's `seed`, worker_index and vector_index",
    "env_seed": "each env's seed derives from the config's `seed`, worker_index and vector_index",
    "batch_size": "rlfleet steps all envs of a pool in lockstep (EnvPool's sync mode)",
    "env_type": "rlfleet uses EnvPool's Gymnasium API",
}


def import_envpool():
    """The `envpool` module; ImportError naming the pip command when it is missing or too old."""
    try:
        import envpool
    except ImportError as e:
        raise ImportError(f"env='envpool:...' needs the envpool package: {INSTALL_HINT}") from e
    version = getattr(envpool, "__version__", "0")
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if parts < MIN_VERSION:
        raise ImportError(f"env='envpool:...' needs envpool >= 1.2 (its Gymnasium API with per-env resets); "
                          f"envpool {version} is installed: {INSTALL_HINT}")
    return envpool


def _spec_entry(task_id: str):
    from envpool.registration import registry

    return registry.specs[task_id]


class EnvPoolCreator:
    """The env creator of ``env: "envpool:<task_id>"``: builds a whole pool per worker.

    Holds only the task id, so it pickles to remote workers (each builds its own pool).
    `rlfleet.rollout.rollout_worker.RolloutWorker` finds it behind creator wrappers
    (`find_envpool_creator`) and calls `make_vector_env`.

    Args:
        task_id: an id of ``envpool.list_all_envs()``, e.g. ``"CartPole-v1"``.

    Raises:
        ImportError: envpool is not installed (names the pip command).
        ValueError: an unknown id (with close matches).
    """

    def __init__(self, task_id: str) -> None:
        envpool = import_envpool()
        known = envpool.list_all_envs()
        if task_id not in known:
            close = difflib.get_close_matches(task_id, known, n=5, cutoff=0.6)
            hint = f" Did you mean one of {[ENVPOOL_PREFIX + c for c in close]}?" if close else ""
            raise ValueError(f"env={ENVPOOL_PREFIX + task_id!r}: {task_id!r} is not an EnvPool task id "
                             f"(envpool {envpool.__version__} has {len(known)}; see envpool.list_all_envs())."
                             f"{hint}")
        self.task_id = task_id

    @property
    def is_atari(self) -> bool:
        return _spec_entry(self.task_id)[0] == "envpool.atari"

    def __call__(self, env_context: EnvContext) -> Any:
        raise ValueError(f"env={ENVPOOL_PREFIX + self.task_id!r} makes one EnvPool of num_envs_per_worker envs "
                         "per rollout worker, not single envs; it cannot be used where a single Gymnasium env "
                         "is built (remote_worker_envs, multi-agent wrappers). Use the Gymnasium id "
                         f"{self.task_id!r} there")

    def make_vector_env(self, env_context: EnvContext, *, num_envs: int, seeds: Sequence[Optional[int]],
                        rules: EpisodeRules = EpisodeRules(), num_threads: int = 1) -> "EnvPoolVectorEnv":
        """One pool of `num_envs` envs for a rollout worker.

        Args:
            env_context: the worker's `env_config` (passed to ``envpool.make``) and indices.
            num_envs: ``num_envs_per_worker``.
            seeds: one seed per env (None: drawn from the OS).
            rules: horizon, soft horizon, no_done_at_end.
            num_threads: EnvPool's threads unless ``env_config`` sets ``num_threads``.
        """
        kwargs = dict(env_context) if env_context is not None else {}
        for key, why in _RESERVED_KEYS.items():
            if key in kwargs:
                raise ValueError(f"env_config[{key!r}]={kwargs[key]!r} cannot be set for "
                                 f"env={ENVPOOL_PREFIX + self.task_id!r}: {why}")
        kwargs.setdefault("num_threads", int(num_threads))
        return EnvPoolVectorEnv(self.task_id, num_envs=num_envs, seeds=seeds, rules=rules, make_kwargs=kwargs,
                                is_atari=self.is_atari)

    def __repr__(self) -> str:
        return f"EnvPoolCreator({self.task_id!r})"


def find_envpool_creator(env_creator: Any) -> Optional[EnvPoolCreator]:
    """The `EnvPoolCreator` inside `env_creator` (which may be wrapped, e.g. by the Atari
    preprocessing or video creators, each holding its inner creator as `.env_creator`)."""
    for _ in range(8):  # wrappers nest a few levels at most
        if isinstance(env_creator, EnvPoolCreator):
            return env_creator
        env_creator = getattr(env_creator, "env_creator", None)
        if env_creator is None:
            return None
    return None


def check_worker_config(config: dict, *, multi_agent: bool = False) -> None:
    """Raises ValueError for settings an EnvPool env does not support, naming the key.

    Args:
        config: the worker's config.
        multi_agent: whether the config asks for several policies (the multi-agent path).
    """
    env = config.get("env")
    if multi_agent:
        raise ValueError(f"env={env!r} runs on the single-agent sampler with one policy; 'multiagent' policies "
                         "are not available with EnvPool envs (use the Gymnasium id of the env)")
    for key, why in (("remote_worker_envs", "EnvPool already steps its envs in C++ threads"),
                     ("gym_env_vectorize_mode", "an EnvPool is already one batched env"),
                     ("record_env", "EnvPool's envs are not Gymnasium envs a video wrapper can hold"),
                     ("render_env", "EnvPool's envs are not Gymnasium envs a video wrapper can hold")):
        if config.get(key):
            unset = "None" if key == "gym_env_vectorize_mode" else "False"
            raise ValueError(f"{key}={config[key]!r} is not available with env={env!r} ({why}); set it to {unset}, "
                             f"or use the Gymnasium id of the env")


def envpool_threads(config: dict, worker_index: int) -> int:
    """EnvPool's default thread count: the CPUs the worker reserved (at least 1)."""
    key = "num_cpus_for_driver" if worker_index == 0 else "num_cpus_per_worker"
    return max(1, int(math.ceil(float(config.get(key) or 1))))


def _int32_seeds(seeds: Sequence[Optional[int]]) -> List[int]:
    """EnvPool's seeds are int32: the low 31 bits of each; None drawn from the OS."""
    fresh = np.random.SeedSequence().generate_state(len(seeds), dtype=np.uint32)
    return [int((s if s is not None else int(f)) & 0x7FFFFFFF) for s, f in zip(seeds, fresh)]


def _is_channels_first_image(space: gym.Space) -> bool:
    s = getattr(space, "shape", None)
    return (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and s is not None and len(s) == 3
            and s[0] < s[1] and s[0] < s[2])


class EnvPoolVectorEnv:
    """An EnvPool presented as rlfleet's `VectorEnv` (same `reset_all` / `step` / `VectorStep`).

    Args:
        task_id: the EnvPool id.
        num_envs: envs in the pool.
        seeds: one seed per env (None: drawn from the OS).
        rules: horizon, soft horizon, no_done_at_end.
        make_kwargs: further ``envpool.make`` keywords (the worker's ``env_config``).
        is_atari: whether the task is an Atari game (rewards are then clipped by default).
    """

    def __init__(self, task_id: str, *, num_envs: int, seeds: Optional[Sequence[Optional[int]]] = None,
                 rules: EpisodeRules = EpisodeRules(), make_kwargs: Optional[Dict[str, Any]] = None,
                 is_atari: bool = False) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs_per_worker={num_envs}: an EnvPool needs at least one env")
        self.task_id = task_id
        self.num_envs = int(num_envs)
        self.rules = rules
        self.is_atari = is_atari
        self._make_kwargs = dict(make_kwargs or {})
        self._seeds = _int32_seeds(list(seeds) if seeds is not None else [None] * self.num_envs)
        self._reseed = False
        self._pool = self._make_pool()
        space = self._pool.observation_space
        self._hwc = _is_channels_first_image(space)
        if self._hwc:
            space = gym.spaces.Box(np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1), dtype=space.dtype)
        self._nested_obs = isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))
        self.observation_space = space
        self.action_space = self._pool.action_space
        if not isinstance(self.action_space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            raise ValueError(f"env={ENVPOOL_PREFIX + task_id!r}: its action space {self.action_space} is not "
                             "supported by rlfleet's EnvPool backend (Box, Discrete and MultiDiscrete are)")
        self._lengths = np.zeros(self.num_envs, np.int64)  # env steps of each env's running episode

    def _make_pool(self):
        envpool = import_envpool()
        kwargs = dict(self._make_kwargs, num_envs=self.num_envs, seed=list(self._seeds))
        try:
            with warnings.catch_warnings():
                # EnvPool builds float32 Boxes from float64 bounds: Gymnasium warns on every make.
                warnings.filterwarnings("ignore", message=".*precision lowered.*")
                pool = envpool.make(self.task_id, env_type="gymnasium", **kwargs)
                pool.observation_space, pool.action_space  # built (and cached) on first access
                return pool
        except TypeError as e:
            if "unexpected keyword" not in str(e):
                raise
            ip, spec_cls, _ = _spec_entry(self.task_id)
            valid = sorted(set(inspect.signature(getattr(importlib.import_module(ip), spec_cls).gen_config).parameters)
                           - set(_RESERVED_KEYS) - {"base_path", "gym_reset_return_info"})
            given = sorted(set(self._make_kwargs) - set(valid) - {"render_mode", "from_pixels"})
            raise ValueError(f"env={ENVPOOL_PREFIX + self.task_id!r}: env_config keys {given} are not options of "
                             f"envpool.make({self.task_id!r}) ({e}); its options: {valid}") from e

    # --- the VectorEnv interface -------------------------------------------------------
    def seed_next_reset(self, seeds: Sequence[Optional[int]]) -> None:
        """Seeds for the next `reset_all` (EnvPool seeds only at creation: the pool is rebuilt)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed_next_reset: got {len(seeds)} seeds for {self.num_envs} sub-envs")
        if all(s is None for s in seeds):
            return  # every env goes on with its own random stream
        self._seeds = _int32_seeds(seeds)
        self._reseed = True

    def reset_all(self):
        """Resets every env and returns their first observations (an array, one row per env)."""
        if self._reseed:
            self._pool.close()
            self._pool = self._make_pool()
            self._reseed = False
        obs, _ = self._pool.reset()
        self._lengths[:] = 0
        return self._obs(obs)

    def step(self, actions) -> VectorStep:
        """One batched step of every env; the envs whose episode ended are reset (one call)."""
        obs, rewards, terminated, truncated, info = self._pool.step(np.asarray(actions))
        lengths = self._lengths
        lengths += 1
        ends, terminateds, to_reset = self.rules.end_many(terminated, truncated, lengths)
        obs = self._obs(obs)
        reset_obs: Dict[int, Any] = {}
        if ends.any():
            ids = np.flatnonzero(to_reset)
            if len(ids):
                first, _ = self._pool.reset(ids.astype(np.int32))
                first = self._obs(first)
                for k, i in enumerate(ids.tolist()):
                    reset_obs[i] = first[k]
            for i in np.flatnonzero(ends & ~to_reset).tolist():  # soft horizon: the env goes on
                reset_obs[i] = obs[i]
            lengths[ends] = 0
        return VectorStep(obs, rewards.astype(np.float64), terminateds, ends, reset_obs,
                          InfoRows(info, self.num_envs))  # type: ignore[arg-type]

    def _obs(self, obs):
        if self._hwc:
            return np.ascontiguousarray(np.moveaxis(obs, 1, -1))
        if self._nested_obs:  # one nested observation per env (the sampler's preprocessor reads them)
            return nested_rows(obs, self.num_envs)
        return obs

    def render(self, index: int = 0):
        """A frame of env `index` (needs ``env_config: {"render_mode": "rgb_array"}``)."""
        frames = self._pool.render(env_ids=[index])
        return None if frames is None else frames[0]

    def close(self) -> None:
        self._pool.close()

    def __repr__(self) -> str:
        return f"EnvPoolVectorEnv({self.task_id!r}, num_envs={self.num_envs})"
