"""RolloutWorker: envs + policies + filters; samples experience and applies weights.

The same class runs in the trainer's process (the local worker, index 0) and, in the
distributed setting, wrapped as a Ray actor. It always holds a `PolicyMap` (one policy is a
map of one) and one sampler chosen by `sampler_choice.make_sampler`: the vectorised sampler for one
policy on a single-agent env, the general multi-agent path otherwise. Its env is built by
`worker_env.make_worker_env`; the config is read once into typed settings (`EpisodeRules`,
`MultiAgentSettings`, `SamplerSettings`) that the env, the policies' wiring and the sampler
share.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

import gymnasium as gym

from rlfleet.env.env_context import EnvContext
from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.multi_agent_env import MultiAgentEnv, MultiAgentVectorEnv
from rlfleet.models.preprocessors import get_preprocessor
from rlfleet.offline.io_context import IOContext
from rlfleet.offline.writer import make_output_writer
from rlfleet.policy.policy_map import PolicyMap
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from rlfleet.rollout.async_sampler import AsyncSampling
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.multi_agent_sampler import MultiAgentSampler
from rlfleet.rollout.sample_counters import SampleCounter
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.rollout.name_registries import NameRegistries
from rlfleet.rollout.offline_sampler import OfflineSampler
from rlfleet.rollout.policy_mapping import default_policy_mapping_fn, infer_spaces
from rlfleet.rollout.sampler_api import Sampler, SamplerSettings
from rlfleet.rollout.sampler_choice import make_sampler
from rlfleet.rollout.worker_env import as_general_env, make_worker_env, sub_env_seeds
from rlfleet.utils.deep_update import merge_dicts
from rlfleet.utils.filters import get_filter
from rlfleet.utils.safe_files import check_weights_fit

logger = logging.getLogger(__name__)


class RolloutWorker:
    """Collects experience with its own envs and policy copies.

    Args:
        env_creator: `EnvContext -> env` (None: no env; spaces from the config).
        policy_class: the default Policy subclass.
        config: the (validated) trainer config.
        worker_index: 0 for the local worker, 1.. for remote ones.
        num_workers: how many remote workers exist (for the EnvContext).
        log_dir: the trainer's results folder (where `output: "logdir"` writes).
        name_registries: the driver's registered names (envs, custom models, action
            distributions, preprocessors), installed first in a remote worker's process.

    Attributes:
        policy_map: `{policy_id: policy}` (a PolicyMap).
        preprocessors, filters: per policy id.
        policy_mapping_fn: `(agent_id, episode, worker, **kw) -> policy_id` for new episodes.
        policies_to_train: the ids `learn_on_batch` trains.
        multi_agent: the `MultiAgentSettings` read from the config (once, here).
        rules: the `EpisodeRules` read from the config (once, here).
        env: the vector env (`VectorEnv`, `RemoteVectorEnv` or `MultiAgentVectorEnv`), or None.
        sampler: the `Sampler`, or None without an env.
    """

    def __init__(
        self,
        *,
        env_creator: Optional[Callable[[EnvContext], Any]],
        policy_class: type,
        config: dict,
        worker_index: int = 0,
        num_workers: int = 0,
        log_dir: Optional[str] = None,
        name_registries: Optional[NameRegistries] = None,
    ):
        if name_registries is not None:  # the driver's registered names, before anything is built
            name_registries.install()
        if worker_index > 0:  # a process of its own (a Ray actor): set it up as the config asks
            for key, value in (config.get("extra_python_environs_for_worker") or {}).items():
                os.environ[str(key)] = str(value)
            if config.get("log_level"):
                level = config["log_level"]
                logging.getLogger("rlfleet").setLevel("WARNING" if level == "WARN" else level)
        self.config = config
        self.log_dir = log_dir  # the trainer's results folder (`output: "logdir"`), if any
        # Held while a batch is collected in the background (sample_async), and by whatever
        # reads or replaces filters and metrics meanwhile.
        self._lock = threading.Lock()
        self._async: Optional[AsyncSampling] = None
        self.worker_index = worker_index
        self.sample_counter = SampleCounter(worker_index)  # chaos runs: steps handed out, pid
        self.num_workers = num_workers
        # The actor `worker_calls.sample_into` sends this worker's next batch to: each worker takes
        # the actors in turn from its own index, which spreads the load.
        self.sink_turn = worker_index
        self.env_context = EnvContext(config.get("env_config") or {}, worker_index=worker_index,
                                      num_workers=num_workers)
        self.callbacks = config["callbacks"]()
        # The settings this worker and everything it builds read: each read from the config once.
        self.multi_agent = ma = MultiAgentSettings.from_config(config)
        self.rules = EpisodeRules.from_config(config)
        self.policy_map = PolicyMap(capacity=ma.policy_map_capacity, cache_dir=ma.policy_map_cache)
        self.preprocessors: Dict[str, Any] = {}
        self.filters: Dict[str, Any] = {}
        self.policy_mapping_fn: Callable = ma.policy_mapping_fn or default_policy_mapping_fn
        self._default_policy_class = policy_class
        self.env, is_atari = (None, False) if env_creator is None else make_worker_env(
            env_creator, config, env_context=self.env_context, rules=self.rules, multi_agent=ma, log_dir=log_dir)

        policies = ma.policies or {DEFAULT_POLICY_ID: PolicySpec(config={})}
        for pid, spec in policies.items():
            self._build_policy(pid, spec, config)
        to_train = ma.policies_to_train
        self._train_all = to_train is None
        self.policies_to_train = list(self.policy_map) if to_train is None else self._checked_ids(to_train)

        self._settings = SamplerSettings.from_config(config, is_atari=is_atari, worker_index=worker_index,
                                                     rules=self.rules, multi_agent=ma)
        # A policy whose learner reads env infos (the bandits' regret) gets the `infos` column.
        self._policies_need_infos = any(p.needs_infos for p in self.policy_map.values())
        if self._policies_need_infos:
            self._settings = dataclasses.replace(self._settings, record_infos=True)
        acting = None
        if config.get("sample_async") and self.env is not None:
            if isinstance(self.env, MultiAgentVectorEnv):
                raise ValueError("'sample_async': True is not available with multi-agent envs or policies yet; "
                                 "use False")
            # The background thread acts with its own copy of the policy (see async_sampler.py),
            # so learning on the worker's policy never races with acting.
            (pid,) = list(self.policy_map)
            main = self.policy_map[pid]
            acting = type(main)(main.observation_space, main.action_space, main.config)
        self.sampler = make_sampler(self, self._settings, acting)
        # `output`: every batch sample() returns is also written (JSON lines; rlfleet.offline).
        self.output_writer = make_output_writer(config, IOContext(self.log_dir, config, worker_index, self))
        # An evaluation worker with a writer records the episodes it evaluates (worker_calls.episodes_only).
        self.records_evaluation_episodes = bool(config.get("in_evaluation")) and self.output_writer is not None
        if acting is not None:
            self._async = AsyncSampling(self.sampler.sample, self._sync_acting_policy, self._lock)

    @property
    def default_policy_class(self) -> type:
        """The trainer's policy class (policies whose spec names none are built from it)."""
        return self._default_policy_class

    # --- building ----------------------------------------------------------------
    def _probe_env(self):
        """The env policies infer their spaces from: sub-env 0 (multi-agent) or the vector env."""
        if isinstance(self.env, MultiAgentVectorEnv):
            return self.env.envs[0]
        return self.env

    def env_spaces(self) -> Tuple[Optional[gym.Space], Optional[gym.Space]]:
        """The env's observation and action space; None where there is no env or no single
        pair (a multi-agent env: spaces per agent)."""
        if self.env is None or isinstance(self.env, MultiAgentVectorEnv):
            return None, None
        return self.env.observation_space, self.env.action_space

    def _build_policy(self, policy_id: str, spec: PolicySpec, base_config: dict):
        """Creates policy `policy_id` in the PolicyMap, with its preprocessor and filter."""
        if not isinstance(policy_id, str):
            raise ValueError(f"Policy id {policy_id!r} is a {type(policy_id).__name__}; policy ids must be str")
        probe = self._probe_env()
        if isinstance(probe, MultiAgentEnv):
            obs_space, act_space = infer_spaces(policy_id, spec, probe, self, base_config)
        else:  # a single-agent vector env (or none): the config's spaces, else the env's
            env_obs, env_act = self.env_spaces()
            obs_space, act_space = infer_spaces(policy_id, spec, None, self, dict(
                base_config, observation_space=_first(base_config.get("observation_space"), env_obs),
                action_space=_first(base_config.get("action_space"), env_act)))
        config = merge_dicts(base_config, spec.config or {}) if spec.config else dict(base_config)
        config.update(worker_index=self.worker_index, num_workers=self.num_workers)
        preprocessor = get_preprocessor(obs_space, config.get("model"))
        policy = self.policy_map.create_policy(policy_id, spec.policy_class or self._default_policy_class,
                                               preprocessor.observation_space, act_space, config)
        self.preprocessors[policy_id] = preprocessor
        self.filters[policy_id] = get_filter(config["observation_filter"], preprocessor.shape)
        return policy

    def _checked_ids(self, ids) -> List[str]:
        ids = list(ids)
        unknown = [p for p in ids if p not in self.policy_map]
        if unknown:
            raise ValueError(f"'multiagent.policies_to_train': {unknown} are not policies of this trainer; "
                             f"known policy ids: {sorted(self.policy_map)}")
        return ids

    def _use_general_sampler(self, why: str) -> None:
        """Moves a vectorised single-agent worker onto the general (multi-agent) sampler: its
        env becomes one agent, "agent0"; episodes in flight are dropped, their metrics kept."""
        env = as_general_env(self.env, why, self._async is not None)
        if env is None:
            return  # already on a sampler with per-agent policies
        old = self.sampler
        self.env = env
        self.sampler = make_sampler(self, self._settings)
        if old is not None:
            self.sampler.set_state(old.get_state())  # episode ids keep counting
            self.sampler.metrics = old.pop_metrics()

    # --- sampling ----------------------------------------------------------------
    def _require_sampler(self) -> Sampler:
        if self.sampler is None:
            raise ValueError(
                "This RolloutWorker has no env to sample from (no `env` configured, or the "
                "local worker was built without one: set `create_env_on_driver=True`)"
            )
        return self.sampler

    def sample(self):
        """One batch: `rollout_fragment_length * num_envs_per_worker` steps (see batch_mode);
        a SampleBatch from the vectorised single-agent sampler, a MultiAgentBatch otherwise."""
        sampler = self._require_sampler()
        batch = self._async.next() if self._async is not None else sampler.sample()
        if self.callbacks.overrides("on_sample_end"):
            self.callbacks.on_sample_end(worker=self, samples=batch)
        if self.output_writer is not None:
            self.output_writer.write(batch)
        if self.output_writer is not None and not self._policies_need_infos:
            # `infos` (object dtype, recorded for the writer only) never reaches a learner.
            for part in (batch.policy_batches.values() if hasattr(batch, "policy_batches") else [batch]):
                part.pop(SampleBatch.INFOS, None)
        self.sample_counter.record(batch)
        return batch

    def sample_with_count(self):
        batch = self.sample()
        return batch, batch.count

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs `num_episodes` episodes; returns their metrics (used for evaluation)."""
        sampler = self._require_sampler()
        with self._lock:
            if self._async is not None:
                self._sync_acting_policy()
            return sampler.sample_episodes(num_episodes)

    def _sync_acting_policy(self) -> None:
        """sample_async: copies the learner's weights and timestep into the acting copy."""
        (main,) = list(self.policy_map.values())
        acting = self.sampler.policy
        acting.set_weights(main.get_weights())
        acting.on_global_var_update({"timestep": main.global_timestep})

    def get_metrics(self) -> List[RolloutMetrics]:
        """Finished episodes since the last call."""
        if self.sampler is None:
            return []
        with self._lock:
            return self.sampler.pop_metrics()

    def perf_stats(self) -> Dict[str, float]:
        return self.sampler.perf_stats() if self.sampler is not None else {}

    # --- policies ----------------------------------------------------------------
    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID):
        return self.policy_map.get(policy_id)

    def foreach_policy(self, fn: Callable) -> list:
        return [fn(policy, pid) for pid, policy in self.policy_map.items()]

    def foreach_trainable_policy(self, fn: Callable) -> list:
        return [fn(self.policy_map[pid], pid) for pid in self.policies_to_train]

    def for_policy(self, fn: Callable, policy_id: str = DEFAULT_POLICY_ID):
        return fn(self.policy_map[policy_id])

    def get_weights(self, policies: Optional[List[str]] = None) -> Dict[str, dict]:
        policies = list(self.policy_map) if policies is None else policies
        return {pid: self.policy_map[pid].get_weights() for pid in policies if pid in self.policy_map}

    def set_weights(self, weights: Dict[str, dict], global_vars: Optional[dict] = None) -> None:
        unknown = sorted(set(weights) - set(self.policy_map))
        if unknown:
            raise ValueError(f"set_weights: unknown policy id(s) {unknown}; known: {sorted(self.policy_map)}")
        for pid, w in weights.items():
            self.policy_map[pid].set_weights(w)
        if global_vars:
            self.set_global_vars(global_vars)

    def set_global_vars(self, global_vars: dict) -> None:
        for policy in self.policy_map.values():
            policy.on_global_var_update(global_vars)
        if self.sampler is not None:
            with self._lock:
                self.sampler.steps_since_sync = 0

    def learn_on_batch(self, batch: SampleBatch) -> Dict[str, Any]:
        batches = batch.as_multi_agent().policy_batches
        return {pid: self.policy_map[pid].learn_on_batch(batches[pid])
                for pid in self.policies_to_train if pid in batches}

    # --- policies at run time --------------------------------------------------------
    def add_policy(self, policy_id: str, policy_cls: Optional[type] = None, observation_space=None,
                   action_space=None, config: Optional[dict] = None, policy_config: Optional[dict] = None,
                   policy_mapping_fn: Optional[Callable] = None, policies_to_train: Optional[List[str]] = None):
        """Adds policy `policy_id` (built from `policy_cls`, default the trainer's class; None
        spaces inferred from the env; `config` overrides merged over `policy_config`, default
        this worker's config) and returns it.

        Args:
            policy_mapping_fn: the mapping from now on; episodes already running keep theirs.
            policies_to_train: the new list (None: unchanged, plus the new policy when all train).
        """
        if not isinstance(policy_id, str):
            raise ValueError(f"add_policy: policy id {policy_id!r} is a {type(policy_id).__name__}; "
                             "policy ids must be str")
        if policy_id in self.policy_map:
            raise ValueError(f"add_policy: a policy {policy_id!r} exists already; remove it first "
                             f"(known: {sorted(self.policy_map)})")
        self._use_general_sampler("add_policy")
        if policy_mapping_fn is not None:
            self.policy_mapping_fn = policy_mapping_fn
        spec = PolicySpec(policy_cls, observation_space, action_space, dict(config or {}))
        policy = self._build_policy(policy_id, spec, policy_config or self.config)
        if policies_to_train is not None:
            self.set_policies_to_train(policies_to_train)
        elif self._train_all:
            self.policies_to_train.append(policy_id)
        return policy

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, policy_mapping_fn: Optional[Callable] = None,
                      policies_to_train: Optional[List[str]] = None) -> None:
        """Removes policy `policy_id`. Agents of running episodes that used it are re-mapped
        through the (new) mapping function; what they collected so far is dropped."""
        if policy_id not in self.policy_map:
            raise ValueError(f"remove_policy: no policy {policy_id!r}; known: {sorted(self.policy_map)}")
        self._use_general_sampler("remove_policy")
        self._drop_policy(policy_id)
        if policy_mapping_fn is not None:
            self.policy_mapping_fn = policy_mapping_fn
        if policies_to_train is not None:
            self.set_policies_to_train(policies_to_train)
        else:
            self.policies_to_train = [p for p in self.policies_to_train if p != policy_id]
        if isinstance(self.sampler, MultiAgentSampler):
            self.sampler.on_policy_removed(policy_id)

    def _drop_policy(self, policy_id: str) -> None:
        del self.policy_map[policy_id]
        del self.preprocessors[policy_id]
        del self.filters[policy_id]

    def set_policy_mapping_fn(self, policy_mapping_fn: Callable) -> None:
        """The mapping for episodes that start from now on."""
        if policy_mapping_fn is not default_policy_mapping_fn:
            self._use_general_sampler("set_policy_mapping_fn")
        self.policy_mapping_fn = policy_mapping_fn

    def set_policies_to_train(self, policies_to_train: List[str]) -> None:
        self.policies_to_train = self._checked_ids(policies_to_train)
        self._train_all = False

    # --- filters -----------------------------------------------------------------
    def get_filters(self, flush_after: bool = False) -> Dict[str, Any]:
        with self._lock:
            out = {pid: f.copy() for pid, f in self.filters.items()}
            if flush_after:
                for f in self.filters.values():
                    f.clear_buffer()
        return out

    def sync_filters(self, new_filters: Dict[str, Any]) -> None:
        with self._lock:
            for pid, f in new_filters.items():
                self.filters[pid].sync(f)

    # --- state -------------------------------------------------------------------
    def get_state(self) -> Dict[str, Any]:
        return {
            "policies": {pid: p.get_state() for pid, p in self.policy_map.items()},
            "filters": {pid: f.get_state() for pid, f in self.filters.items()},
            "sampler": self.sampler.get_state() if self.sampler is not None else {},
        }

    def check_state_fits(self, state: Dict[str, Any]) -> None:
        """Raises ValueError when `state` (a `get_state()` output) holds a policy this worker
        lacks or weights that do not fit its policies; changes nothing."""
        for pid, pstate in state["policies"].items():
            if pid not in self.policy_map:
                raise ValueError(f"it holds policy {pid!r}, which this trainer does not have (its policies: "
                                 f"{sorted(self.policy_map)})")
            if not isinstance(pstate, dict) or not isinstance(pstate.get("weights"), dict):
                raise ValueError(f"policy {pid!r} has no weights")
            check_weights_fit(pstate["weights"], self.policy_map[pid].get_weights(), f"policy {pid!r}")

    def set_state(self, state: Dict[str, Any]) -> None:
        """Applies `get_state()` output. With `"restart_episodes": seed` (what a checkpoint
        restore sends) the episodes in flight are dropped too (see `restart_episodes`)."""
        for pid, pstate in state["policies"].items():
            self.policy_map[pid].set_state(pstate)
        for pid, fstate in state.get("filters", {}).items():
            self.filters[pid].set_state(fstate)
        if self.sampler is not None and state.get("sampler"):
            self.sampler.set_state(state["sampler"])
        if "restart_episodes" in state:
            self.restart_episodes(state["restart_episodes"])

    def restart_episodes(self, seed: Optional[int]) -> None:
        """Drops the episodes in flight: the next `sample()` resets every sub-env, seeded
        from `seed`, this worker's index and the sub-env's index (None: unseeded)."""
        if self.env is not None:
            self.env.seed_next_reset(sub_env_seeds(seed, self.worker_index, self.env.num_envs))
        if self.sampler is not None:
            self.sampler.restart()

    def apply(self, fn: Callable, *args):
        return fn(self, *args)

    def foreach_env(self, fn: Callable[[Any], Any]) -> list:
        """`fn(sub_env)` for each of this worker's sub-envs (none without an env)."""
        return self.foreach_env_with_context(lambda env, ctx: fn(env))

    def foreach_env_with_context(self, fn: Callable[[Any, EnvContext], Any]) -> list:
        """`fn(sub_env, env_context)` for each sub-env, its context carrying its `vector_index`."""
        if self.env is None:
            return []
        envs = getattr(self.env, "envs", None)
        if envs is None:
            raise ValueError("foreach_env / env_task_fn: the sub-envs run in their own actors "
                             "('remote_worker_envs': True), in an EnvPool ('envpool:' env), in processes "
                             "(gym_env_vectorize_mode 'async') or as one batched env ('vector_entry_point', "
                             "a vector env from the creator) and cannot be reached one by one from the worker; "
                             "use a Gymnasium env with remote_worker_envs False and gym_env_vectorize_mode None "
                             "or 'sync' to use env_task_fn")
        return [fn(env, self.env_context.copy_with_overrides(vector_index=i)) for i, env in enumerate(envs)]

    def stop(self) -> None:
        if getattr(self.output_writer, "close", None) is not None:
            self.output_writer.close()
        if self._async is not None:
            self._async.stop()
        if isinstance(self.sampler, OfflineSampler):
            self.sampler.close()  # e.g. a policy server's socket (rlfleet.serving)
        if self.env is not None:
            self.env.close()
        self.policy_map.close()


def _first(*values):
    # Not `a or b`: some spaces (e.g. an empty Tuple) are falsy.
    return next((v for v in values if v is not None), None)
