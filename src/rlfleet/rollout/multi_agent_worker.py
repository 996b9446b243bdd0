"""The multi-agent side of RolloutWorker: building policies from `multiagent.policies`,
the policy mapping, and adding / removing policies at run time.

Kept apart from rollout_worker.py, whose single-agent path stays as it is; the worker's
methods (`add_policy`, `remove_policy`, ...) call in here.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import gymnasium as gym

from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.env.multi_agent_env import (
    MultiAgentEnv,
    MultiAgentVectorEnv,
    SingleAgentAsMultiAgent,
    as_multi_agent,
    is_pettingzoo_env,
)
from rlfleet.models.preprocessors import get_preprocessor
from rlfleet.policy.policy_map import PolicyMap
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.utils.deep_update import merge_dicts
from rlfleet.utils.filters import get_filter

logger = logging.getLogger(__name__)


# --- when the multi-agent path is used ---------------------------------------------------
def multi_agent_configured(config: dict) -> bool:
    """True when the config asks for more than the single default policy."""
    ma = config.get("multiagent") or {}
    policies = ma.get("policies") or {}
    if set(policies) - {DEFAULT_POLICY_ID}:
        return True
    spec = policies.get(DEFAULT_POLICY_ID)
    if isinstance(spec, PolicySpec) and (spec.policy_class is not None or spec.observation_space is not None
                                         or spec.action_space is not None or bool(spec.config)):
        return True
    return ma.get("policy_mapping_fn") is not None or ma.get("observation_fn") is not None


def wants_multi_agent(env: Any, config: dict) -> bool:
    """Whether a worker with `env` (one sub-env, or None) takes the multi-agent path."""
    return isinstance(env, MultiAgentEnv) or (env is not None and is_pettingzoo_env(env)) \
        or multi_agent_configured(config)


# --- the policy mapping ------------------------------------------------------------------
def _takes_episode(fn: Callable) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def call_mapping_fn(fn: Callable, agent_id, episode, worker) -> str:
    """`fn(agent_id, episode, worker=worker)`; old one-argument functions get `agent_id` only."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    if not _takes_episode(fn):
        pid = fn(agent_id)
    elif not params or "worker" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        pid = fn(agent_id, episode, worker=worker)
    else:
        pid = fn(agent_id, episode)
    if not isinstance(pid, str):
        raise ValueError(f"'multiagent.policy_mapping_fn' returned {pid!r} for agent {agent_id!r}; "
                         "it must return a policy id (str)")
    return pid


def default_policy_mapping_fn(agent_id, episode, worker=None, **kwargs) -> str:
    """Every agent to 'default_policy' (the reference's default), or to the only policy."""
    ids = list(worker.policy_map) if worker is not None else [DEFAULT_POLICY_ID]
    if DEFAULT_POLICY_ID in ids or not ids:
        return DEFAULT_POLICY_ID
    if len(ids) == 1:
        return ids[0]
    raise ValueError(f"'multiagent.policy_mapping_fn' is not set, and the policies {sorted(ids)} include no "
                     f"{DEFAULT_POLICY_ID!r}: give a policy_mapping_fn(agent_id, episode, worker, **kwargs) "
                     "returning one of them")


# --- building policies --------------------------------------------------------------------
def infer_spaces(policy_id: str, spec: PolicySpec, env: Optional[MultiAgentEnv], worker, config: dict
                 ) -> Tuple[gym.Space, gym.Space]:
    """The spec's spaces; None ones come from an env agent mapped to this policy, else the
    env's shared spaces, else `observation_space` / `action_space` in the config."""
    obs_space, act_space = spec.observation_space, spec.action_space
    if (obs_space is None or act_space is None) and env is not None:
        for aid in _sorted(env.get_agent_ids()):
            try:
                mapped = call_mapping_fn(worker.policy_mapping_fn, aid, None, worker)
            except Exception:  # a mapping that needs a real episode: fall back to shared spaces
                continue
            if mapped == policy_id:
                obs_space = _first(obs_space, env.observation_space_for(aid))
                act_space = _first(act_space, env.action_space_for(aid))
                break
        obs_space = _first(obs_space, env.observation_space)
        act_space = _first(act_space, env.action_space)
    obs_space = _first(obs_space, config.get("observation_space"))
    act_space = _first(act_space, config.get("action_space"))
    for name, space in (("observation_space", obs_space), ("action_space", act_space)):
        if space is None:
            raise ValueError(
                f"Cannot infer the {name} of policy {policy_id!r}: no env agent maps to it and the env "
                f"has no shared {name}; give it in 'multiagent.policies' as "
                f"PolicySpec({name}=...) or (cls, obs_space, act_space, config)")
        if not isinstance(space, gym.Space):
            raise ValueError(f"The {name} of policy {policy_id!r} must be a gymnasium.spaces.Space, got {space!r}")
    return obs_space, act_space


def _first(*values):
    # Not `a or b`: some spaces (e.g. an empty Tuple) are falsy.
    return next((v for v in values if v is not None), None)


def _sorted(ids: Iterable) -> List:
    try:
        return sorted(ids)
    except TypeError:
        return sorted(ids, key=str)


def build_worker_policy(worker, policy_id: str, spec: PolicySpec, default_class: type, base_config: dict,
                        env: Optional[MultiAgentEnv]):
    """Creates policy `policy_id` in the worker's PolicyMap, with its preprocessor and filter."""
    obs_space, act_space = infer_spaces(policy_id, spec, env, worker, base_config)
    config = merge_dicts(base_config, spec.config or {})
    config.update(worker_index=worker.worker_index, num_workers=worker.num_workers)
    preprocessor = get_preprocessor(obs_space, config.get("model"))
    policy = worker.policy_map.create_policy(policy_id, spec.policy_class or default_class,
                                             preprocessor.observation_space, act_space, config)
    if policy.get_initial_state():
        raise ValueError(f"Policy {policy_id!r} is recurrent; the multi-agent sampler does not run "
                         "recurrent policies yet")
    worker.preprocessors[policy_id] = preprocessor
    worker.filters[policy_id] = get_filter(config["observation_filter"], preprocessor.shape)
    return policy


def _check_to_train(worker, ids) -> List[str]:
    ids = list(ids)
    unknown = [p for p in ids if p not in worker.policy_map]
    if unknown:
        raise ValueError(f"'multiagent.policies_to_train': {unknown} are not policies of this trainer; "
                         f"known policy ids: {sorted(worker.policy_map)}")
    return ids


# --- worker setup ---------------------------------------------------------------------------
def setup_multi_agent(worker, policy_class: type, config: dict) -> None:
    """Builds the multi-agent worker state: `policy_map` (a PolicyMap), `preprocessors`,
    `filters`, `policy_mapping_fn`, `policies_to_train` and the MultiAgentSampler.

    `worker.env` is None (no env) or a MultiAgentVectorEnv.
    """
    from rlfleet.rollout.multi_agent_sampler import MultiAgentSampler

    if config.get("sample_async"):
        raise ValueError("'sample_async': True is not available with multi-agent envs or policies yet; use False")
    ma = config["multiagent"]
    worker.policy_map = PolicyMap(capacity=int(ma.get("policy_map_capacity") or 100),
                                  cache_dir=ma.get("policy_map_cache"))
    worker.preprocessors, worker.filters = {}, {}
    worker.policy_mapping_fn = ma.get("policy_mapping_fn") or default_policy_mapping_fn
    worker._default_policy_class = policy_class
    env = worker.env.envs[0] if worker.env is not None else None
    policies = ma.get("policies") or {DEFAULT_POLICY_ID: PolicySpec(config={})}
    for pid, spec in policies.items():
        build_worker_policy(worker, pid, spec, policy_class, config, env)
    to_train = ma.get("policies_to_train")
    worker._train_all = to_train is None
    worker.policies_to_train = list(worker.policy_map) if to_train is None else _check_to_train(worker, to_train)
    worker.sampler = None
    if worker.env is not None:
        worker.sampler = MultiAgentSampler(worker=worker, vector_env=worker.env, callbacks=worker.callbacks,
                                           config=config, episode_id_base=worker.worker_index << 40)


def make_vector_env(envs: List[Any], seeds: Optional[List[Optional[int]]]) -> MultiAgentVectorEnv:
    return MultiAgentVectorEnv([as_multi_agent(e) for e in envs], seeds=seeds)


def ensure_multi_agent(worker) -> None:
    """Moves a single-agent worker onto the multi-agent path (first `add_policy`): its env
    becomes one agent, "agent0"; episodes in flight are dropped, their metrics kept."""
    from rlfleet.rollout.multi_agent_sampler import MultiAgentSampler

    if isinstance(worker.policy_map, PolicyMap):
        return
    if worker.config.get("sample_async") or getattr(worker, "_async", None) is not None:
        raise ValueError("add_policy is not available with 'sample_async': True yet")
    ma = worker.config.get("multiagent") or {}
    old = worker.policy_map
    worker.policy_map = PolicyMap(capacity=int(ma.get("policy_map_capacity") or 100),
                                  cache_dir=ma.get("policy_map_cache"))
    for pid, policy in old.items():
        worker.policy_map[pid] = policy
        if not hasattr(worker, "_default_policy_class"):
            worker._default_policy_class = type(policy)
    worker.policy_mapping_fn = ma.get("policy_mapping_fn") or default_policy_mapping_fn
    worker._train_all = ma.get("policies_to_train") is None
    old_sampler = worker.sampler
    if worker.env is not None:
        envs = getattr(worker.env, "envs", None)
        if envs is None:
            raise ValueError("add_policy is not available with 'remote_worker_envs': True yet")
        worker.env = MultiAgentVectorEnv([SingleAgentAsMultiAgent(e) for e in envs])
        worker.sampler = MultiAgentSampler(worker=worker, vector_env=worker.env, callbacks=worker.callbacks,
                                           config=worker.config, episode_id_base=(worker.worker_index << 40) + (1 << 39))
        if old_sampler is not None:
            worker.sampler.metrics = old_sampler.pop_metrics()


# --- run-time changes ----------------------------------------------------------------------
def add_policy(worker, policy_id: str, policy_cls: Optional[type] = None, *, observation_space=None,
               action_space=None, config: Optional[dict] = None, policy_config: Optional[dict] = None,
               policy_mapping_fn: Optional[Callable] = None, policies_to_train: Optional[List[str]] = None):
    """See `RolloutWorker.add_policy`."""
    if not isinstance(policy_id, str):
        raise ValueError(f"add_policy: policy id {policy_id!r} is a {type(policy_id).__name__}; policy ids must be str")
    ensure_multi_agent(worker)
    if policy_id in worker.policy_map:
        raise ValueError(f"add_policy: a policy {policy_id!r} exists already; remove it first "
                         f"(known: {sorted(worker.policy_map)})")
    if policy_mapping_fn is not None:
        worker.policy_mapping_fn = policy_mapping_fn
    spec = PolicySpec(policy_cls, observation_space, action_space, dict(config or {}))
    env = worker.env.envs[0] if worker.env is not None else None
    policy = build_worker_policy(worker, policy_id, spec, worker._default_policy_class, policy_config or worker.config,
                                 env)
    if policies_to_train is not None:
        worker.policies_to_train = _check_to_train(worker, policies_to_train)
        worker._train_all = False
    elif worker._train_all:
        worker.policies_to_train.append(policy_id)
    return policy


def remove_policy(worker, policy_id: str, *, policy_mapping_fn: Optional[Callable] = None,
                  policies_to_train: Optional[List[str]] = None) -> None:
    """See `RolloutWorker.remove_policy`."""
    ensure_multi_agent(worker)
    if policy_id not in worker.policy_map:
        raise ValueError(f"remove_policy: no policy {policy_id!r}; known: {sorted(worker.policy_map)}")
    policy = worker.policy_map[policy_id]
    if worker.sampler is not None:
        worker.sampler.retire(policy_id, policy, worker.preprocessors[policy_id], worker.filters[policy_id])
    del worker.policy_map[policy_id]
    del worker.preprocessors[policy_id]
    del worker.filters[policy_id]
    if policy_mapping_fn is not None:
        worker.policy_mapping_fn = policy_mapping_fn
    if policies_to_train is not None:
        worker.policies_to_train = _check_to_train(worker, policies_to_train)
        worker._train_all = False
    else:
        worker.policies_to_train = [p for p in worker.policies_to_train if p != policy_id]


class _FirstEnvCached:
    """An env creator that hands out an env built already (the probe) for vector index 0."""

    def __init__(self, creator: Callable, env: Any):
        self.creator, self.env = creator, env

    def __call__(self, ctx):
        if self.env is not None and getattr(ctx, "vector_index", 0) == 0:
            env, self.env = self.env, None
            return env
        return self.creator(ctx)


def init_multi_agent(worker, env_creator: Optional[Callable], policy_class: type, config: dict,
                     seeds: List[Optional[int]]) -> Tuple[bool, Optional[Callable]]:
    """Called first thing by `RolloutWorker.__init__`: sets the worker up on the multi-agent
    path when its env is a MultiAgentEnv (or PettingZoo env) or multi-agent policies are
    configured.

    Returns:
        `(True, None)` when done (the worker's own setup is skipped), else `(False, creator)`:
        the creator to use, which hands out the env built here to find out (no env is built
        twice).
    """
    import threading

    env0 = None
    if env_creator is not None and not config.get("remote_worker_envs"):
        env0 = env_creator(worker.env_context.copy_with_overrides(vector_index=0))
    if not wants_multi_agent(env0, config):
        return False, (_FirstEnvCached(env_creator, env0) if env0 is not None else env_creator)
    if config.get("remote_worker_envs"):
        raise ValueError("'remote_worker_envs': True is not available with multi-agent envs or policies yet; "
                         "use False")
    worker.env = None
    if env0 is not None:
        envs = [env0] + [env_creator(worker.env_context.copy_with_overrides(vector_index=i))
                         for i in range(1, len(seeds))]
        worker.env = make_vector_env(envs, seeds)
    worker._lock = threading.Lock()
    worker._async = None
    setup_multi_agent(worker, policy_class, config)
    return True, None
