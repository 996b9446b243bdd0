"""What every sampler offers (`Sampler`), and the per-run settings it reads once (`SamplerSettings`).

A RolloutWorker holds one sampler, chosen by `sampler_choice.make_sampler`: the vectorised
sampler (`sampler.SingleAgentSampler`: one policy, a single-agent env) or the general path
(`multi_agent_sampler.MultiAgentSampler`: policy mapping, per-agent trajectories). Offline
readers and fake samplers implement the same protocol.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Protocol, Union, runtime_checkable

import numpy as np

from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings

RewardClipper = Callable[[np.ndarray], np.ndarray]


def make_reward_clipper(clip_rewards: Any, is_atari: bool) -> Optional[RewardClipper]:
    """The reward transform `clip_rewards` asks for (None: sign-clip for Atari only)."""
    if clip_rewards is None:
        clip_rewards = is_atari
    if clip_rewards is False:
        return None
    if clip_rewards is True:
        return np.sign
    if isinstance(clip_rewards, (int, float)):
        bound = float(clip_rewards)
        return lambda r: np.clip(r, -bound, bound)
    lo, hi = clip_rewards
    return lambda r: np.clip(r, float(lo), float(hi))


def env_name(env: Any) -> Optional[str]:
    """The `env` config value as a name: a string as is, a class by its name."""
    if env is None or isinstance(env, str):
        return env
    return getattr(env, "__name__", None) or type(env).__name__


@dataclass(frozen=True)
class SamplerSettings:
    """The config keys a sampler reads, read once when it is built.

    Attributes:
        fragment_length: `rollout_fragment_length` (steps per sub-env per batch).
        complete_episodes: `batch_mode == "complete_episodes"`.
        explore: `explore` (None: each policy's own setting).
        normalize_actions, clip_actions: how actions go to the env (`env_actions`).
        reward_clipper: from `clip_rewards` (Atari envs sign-clip by default).
        compress_observations: LZ4-compress `obs` / `new_obs` of every batch.
        render: `render_env`: render sub-env 0 after each step.
        rules: the episode-end rules (`horizon`, `soft_horizon`, `no_done_at_end`).
        count_agent_steps: `multiagent.count_steps_by == "agent_steps"`.
        observation_fn: `multiagent.observation_fn`.
        episode_id_base: added to episode counters so ids are unique across workers.
        env_id: the `env` config value as a name (for errors that say where they happened).
        worker_index: the owning worker's index (0: the trainer's own worker).
        check_env_steps: not `disable_env_checking`: check every step's observations and
            rewards after the first episode too (see `rlfleet.env.checks`).
        record_infos: record each step's info dict in an `infos` column (object dtype),
            for `output` to write; the worker drops the column after writing.
        sample_collector: `sample_collector`: a custom Sampler class (None: the built-in ones).
        offline_input: `input` is not "sampler": batches are read, not collected from the env.
        fake_sampler: `fake_sampler`: the first batch is re-served forever (learner benchmarks).
    """

    fragment_length: int
    complete_episodes: bool
    explore: Optional[bool]
    normalize_actions: bool
    clip_actions: bool
    reward_clipper: Optional[RewardClipper]
    compress_observations: bool
    render: bool
    rules: EpisodeRules
    count_agent_steps: bool
    observation_fn: Optional[Callable]
    episode_id_base: int
    env_id: Optional[str] = None
    worker_index: int = 0
    check_env_steps: bool = True
    record_infos: bool = False
    sample_collector: Any = None
    offline_input: bool = False
    fake_sampler: bool = False

    @classmethod
    def from_config(cls, config: dict, *, is_atari: bool = False, worker_index: int = 0,
                    rules: Optional[EpisodeRules] = None,
                    multi_agent: Optional[MultiAgentSettings] = None) -> "SamplerSettings":
        """The settings of `config`; `rules` and `multi_agent`, when the caller read them
        already (a worker reads each once), are used as they are."""
        ma = multi_agent if multi_agent is not None else MultiAgentSettings.from_config(config)
        return cls(
            fragment_length=int(config["rollout_fragment_length"]),
            complete_episodes=config["batch_mode"] == "complete_episodes",
            explore=config.get("explore", True),
            normalize_actions=bool(config.get("normalize_actions", True)),
            clip_actions=bool(config.get("clip_actions", False)),
            reward_clipper=make_reward_clipper(config.get("clip_rewards"), is_atari),
            compress_observations=bool(config.get("compress_observations", False)),
            render=bool(config.get("render_env")),
            rules=rules if rules is not None else EpisodeRules.from_config(config),
            count_agent_steps=ma.count_agent_steps,
            observation_fn=ma.observation_fn,
            episode_id_base=int(worker_index) << 40,
            env_id=env_name(config.get("env")),
            worker_index=int(worker_index),
            check_env_steps=not config.get("disable_env_checking", False),
            record_infos=config.get("output") is not None,
            sample_collector=config.get("sample_collector"),
            offline_input=config.get("input", "sampler") != "sampler",
            fake_sampler=bool(config.get("fake_sampler")),
        )


@runtime_checkable
class Sampler(Protocol):
    """What a RolloutWorker asks of its sampler.

    Attributes:
        settings: the `SamplerSettings` it runs with.
        steps_since_sync: env steps since the policies' global timestep was last set (the
            exploration schedules act at `global_timestep + steps_since_sync`).
    """

    settings: SamplerSettings
    steps_since_sync: int

    def sample(self) -> Union[SampleBatch, MultiAgentBatch]:
        """One batch: `rollout_fragment_length * num_envs` steps, or complete episodes."""

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs `num_episodes` more episodes to their end; returns their metrics."""

    def pop_metrics(self) -> List[RolloutMetrics]:
        """Metrics of the episodes finished since the last call."""

    def perf_stats(self) -> Dict[str, float]:
        """Mean time per step in env, inference and processing (ms)."""

    def restart(self) -> None:
        """Drops the episodes in flight; the next collection resets every sub-env."""

    def get_state(self) -> Dict[str, Any]:
        """JSON-able state that must survive a checkpoint (e.g. the episode counter)."""

    def set_state(self, state: Dict[str, Any]) -> None:
        """Applies `get_state()` output."""
