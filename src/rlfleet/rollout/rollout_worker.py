"""RolloutWorker: envs + policies + filters; samples experience and applies weights.

The same class runs in the trainer's process (the local worker, index 0) and, in the
distributed setting, wrapped as a Ray actor.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Dict, List, Optional

import gymnasium as gym

from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.env.env_context import EnvContext
from rlfleet.env.vector_env import VectorEnv
from rlfleet.env.wrappers.atari import with_atari_preprocessing
from rlfleet.models.preprocessors import get_preprocessor
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import derive_seed
from rlfleet.rollout.async_sampler import AsyncSampling
from rlfleet.rollout import multi_agent_worker as _multi_agent
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.sampler import SingleAgentSampler
from rlfleet.utils.filters import get_filter

logger = logging.getLogger(__name__)


def _is_atari(env) -> bool:
    spec = getattr(env, "spec", None)
    env_id = getattr(spec, "id", "") or ""
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id or type(env.unwrapped).__name__ == "AtariEnv"


class RolloutWorker:
    """Collects experience with its own envs and policy copy.

    Args:
        env_creator: `EnvContext -> env`.
        policy_class: the Policy subclass to build.
        config: the (validated) trainer config.
        worker_index: 0 for the local worker, 1.. for remote ones.
        num_workers: how many remote workers exist (for the EnvContext).
    """

    def __init__(
        self,
        *,
        env_creator: Optional[Callable[[EnvContext], Any]],
        policy_class: type,
        config: dict,
        worker_index: int = 0,
        num_workers: int = 0,
    ):
        for key, value in (config.get("extra_python_environs_for_worker") or {}).items():
            if worker_index > 0:
                os.environ[str(key)] = str(value)
        self.config = config
        # Held while a batch is collected in the background (sample_async), and by whatever
        # reads or replaces filters and metrics meanwhile.
        self._lock = threading.Lock()
        self._async: Optional[AsyncSampling] = None
        self.worker_index = worker_index
        self.num_workers = num_workers
        self.env_context = EnvContext(config.get("env_config") or {}, worker_index=worker_index,
                                      num_workers=num_workers)
        self.callbacks = config["callbacks"]()
        seed = config.get("seed")
        num_envs = int(config["num_envs_per_worker"])
        # MultiAgentEnvs (and multi-agent policies) take the general path: multi_agent_worker.py.
        done, env_creator = _multi_agent.init_multi_agent(
            self, env_creator, policy_class, config,
            [None if seed is None else derive_seed(seed, worker_index, i) & 0xFFFFFFFF for i in range(num_envs)])
        if done:
            return

        self.env: Optional[VectorEnv] = None
        obs_space, act_space = config.get("observation_space"), config.get("action_space")
        if env_creator is not None:
            # Atari image envs get the DeepMind (or generic) preprocessing `preprocessor_pref` asks for.
            env_creator = with_atari_preprocessing(env_creator, config)
            seeds = [None if seed is None else derive_seed(seed, worker_index, i) & 0xFFFFFFFF for i in range(num_envs)]
            episode_rules = dict(
                horizon=config.get("horizon"),
                soft_horizon=bool(config.get("soft_horizon")),
                no_done_at_end=bool(config.get("no_done_at_end")),
                seeds=seeds,
            )
            if config.get("remote_worker_envs"):
                from rlfleet.env.remote_vector_env import RemoteVectorEnv

                contexts = [self.env_context.copy_with_overrides(vector_index=i, remote=True) for i in range(num_envs)]
                self.env = RemoteVectorEnv(env_creator, contexts, batch_wait_ms=config.get("remote_env_batch_wait_ms", 0),
                                           **episode_rules)
            else:
                envs = [env_creator(self.env_context.copy_with_overrides(vector_index=i)) for i in range(num_envs)]
                self.env = VectorEnv(envs, **episode_rules)
            obs_space = obs_space or self.env.observation_space
            act_space = act_space or self.env.action_space
        if obs_space is None or act_space is None:
            raise ValueError(
                "The worker has no env to infer spaces from: set `env`, or give both "
                "`observation_space` and `action_space` in the config"
            )
        for name, space in (("observation_space", obs_space), ("action_space", act_space)):
            if not isinstance(space, gym.Space):
                raise ValueError(f"`{name}` must be a gymnasium.spaces.Space, got {space!r}")

        preprocessor = get_preprocessor(obs_space, config.get("model"))
        policy_config = dict(config, worker_index=worker_index, num_workers=num_workers)
        policy = policy_class(preprocessor.observation_space, act_space, policy_config)
        self.policy_map: Dict[str, Any] = {DEFAULT_POLICY_ID: policy}
        self.preprocessors = {DEFAULT_POLICY_ID: preprocessor}
        self.filters = {DEFAULT_POLICY_ID: get_filter(config["observation_filter"], preprocessor.shape)}
        self.policies_to_train = [DEFAULT_POLICY_ID]
        self.sampler: Optional[SingleAgentSampler] = None
        if self.env is not None:
            # sample_async: the background thread acts with its own copy of the policy (see
            # async_sampler.py), so learning on `policy` never races with acting.
            acting = policy_class(preprocessor.observation_space, act_space, policy_config) \
                if config.get("sample_async") else policy
            self.sampler = SingleAgentSampler(
                worker=self,
                vector_env=self.env,
                policy=acting,
                preprocessor=preprocessor,
                obs_filter=self.filters[DEFAULT_POLICY_ID],
                callbacks=self.callbacks,
                config=config,
                episode_id_base=worker_index << 40,
                is_atari=self.env.is_atari if hasattr(self.env, "is_atari") else _is_atari(self.env.envs[0]),
            )
            if acting is not policy:
                self._async = AsyncSampling(self.sampler.sample, self._sync_acting_policy, self._lock)

    # --- sampling ----------------------------------------------------------------
    def sample(self) -> SampleBatch:
        """One batch: `rollout_fragment_length * num_envs_per_worker` steps (see batch_mode)."""
        if self.sampler is None:
            raise ValueError(
                "This RolloutWorker has no env to sample from (no `env` configured, or the "
                "local worker was built without one: set `create_env_on_driver=True`)"
            )
        batch = self._async.next() if self._async is not None else self.sampler.sample()
        if self.callbacks.overrides("on_sample_end"):
            self.callbacks.on_sample_end(worker=self, samples=batch)
        return batch

    def sample_with_count(self):
        batch = self.sample()
        return batch, batch.count

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        """Runs `num_episodes` episodes; returns their metrics (used for evaluation)."""
        if self.sampler is None:
            self.sample()  # raises the no-env error
        with self._lock:
            if self._async is not None:
                self._sync_acting_policy()
            return self.sampler.sample_episodes(num_episodes)

    def _sync_acting_policy(self) -> None:
        """sample_async: copies the learner's weights and timestep into the acting copy."""
        main, acting = self.policy_map[DEFAULT_POLICY_ID], self.sampler.policy
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

    # --- multi-agent: policies at run time (see multi_agent_worker.py) ---------------
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
        return _multi_agent.add_policy(
            self, policy_id, policy_cls, observation_space=observation_space, action_space=action_space,
            config=config, policy_config=policy_config, policy_mapping_fn=policy_mapping_fn,
            policies_to_train=policies_to_train)

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, policy_mapping_fn: Optional[Callable] = None,
                      policies_to_train: Optional[List[str]] = None) -> None:
        """Removes policy `policy_id`; running episodes that use it finish with it (their
        samples for it are dropped)."""
        _multi_agent.remove_policy(self, policy_id, policy_mapping_fn=policy_mapping_fn,
                                   policies_to_train=policies_to_train)

    def set_policy_mapping_fn(self, policy_mapping_fn: Callable) -> None:
        """The mapping for episodes that start from now on."""
        _multi_agent.ensure_multi_agent(self)
        self.policy_mapping_fn = policy_mapping_fn

    def set_policies_to_train(self, policies_to_train: List[str]) -> None:
        _multi_agent.ensure_multi_agent(self)
        self.policies_to_train = _multi_agent._check_to_train(self, policies_to_train)
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
            **({"sampler": self.sampler.get_state()} if hasattr(self.sampler, "get_state") else {}),
        }

    def set_state(self, state: Dict[str, Any]) -> None:
        """Applies `get_state()` output. With `"restart_episodes": seed` (what a checkpoint
        restore sends) the episodes in flight are dropped too (see `restart_episodes`)."""
        for pid, pstate in state["policies"].items():
            self.policy_map[pid].set_state(pstate)
        for pid, fstate in state.get("filters", {}).items():
            self.filters[pid].set_state(fstate)
        if hasattr(self.sampler, "set_state") and "sampler" in state:
            self.sampler.set_state(state["sampler"])
        if "restart_episodes" in state:
            self.restart_episodes(state["restart_episodes"])

    def restart_episodes(self, seed: Optional[int]) -> None:
        """Drops the episodes in flight: the next `sample()` resets every sub-env, seeded
        from `seed`, this worker's index and the sub-env's index (None: unseeded)."""
        if self.env is not None:
            self.env.seed_next_reset([
                None if seed is None else derive_seed(seed, self.worker_index, i) & 0xFFFFFFFF
                for i in range(self.env.num_envs)
            ])
        if self.sampler is not None:
            self.sampler.restart()

    def apply(self, fn: Callable, *args):
        return fn(self, *args)

    def stop(self) -> None:
        if self._async is not None:
            self._async.stop()
        if self.env is not None:
            self.env.close()
        if hasattr(self.policy_map, "close"):  # a PolicyMap: drop its spill folder
            self.policy_map.close()
