"""Policy mapping: which policy acts for which agent, and the spaces each policy gets.

Pure functions over a config, an env and a worker's mapping; the RolloutWorker calls them
when it builds or changes its policies.
"""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

import gymnasium as gym

from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.env.multi_agent_env import MultiAgentEnv, is_pettingzoo_env
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings


# --- when the multi-agent path is used ---------------------------------------------------
def multi_agent_configured(config: dict) -> bool:
    """True when the config asks for more than the single default policy (see
    `MultiAgentSettings.configured`)."""
    return MultiAgentSettings.from_config(config).configured


def wants_multi_agent(env: Any, settings: Union[MultiAgentSettings, dict]) -> bool:
    """Whether a worker with `env` (one sub-env, or None) takes the multi-agent path, under
    `settings` (a `MultiAgentSettings`, or a config to read them from)."""
    if isinstance(env, MultiAgentEnv) or (env is not None and is_pettingzoo_env(env)):
        return True
    if not isinstance(settings, MultiAgentSettings):
        settings = MultiAgentSettings.from_config(settings)
    return settings.configured


# --- the policy mapping ------------------------------------------------------------------
def _takes_episode(fn: Callable) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _calling_convention(fn: Callable) -> str:
    """How `call_mapping_fn` calls `fn`: "agent", "episode" or "worker" (read once per
    function: `inspect.signature` costs more than a sampler step)."""
    try:
        cached = _CONVENTIONS.get(fn)
    except TypeError:  # not weak-referenceable / hashable: look it up every time
        cached = None
    if cached is not None:
        return cached
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    if not _takes_episode(fn):
        convention = "agent"
    elif not params or "worker" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        convention = "worker"
    else:
        convention = "episode"
    try:
        _CONVENTIONS[fn] = convention
    except TypeError:
        pass
    return convention


_CONVENTIONS: "weakref.WeakKeyDictionary[Callable, str]" = weakref.WeakKeyDictionary()


def call_mapping_fn(fn: Callable, agent_id, episode, worker) -> str:
    """`fn(agent_id, episode, worker=worker)`; old one-argument functions get `agent_id` only."""
    convention = _calling_convention(fn)
    if convention == "agent":
        pid = fn(agent_id)
    elif convention == "worker":
        pid = fn(agent_id, episode, worker=worker)
    else:
        pid = fn(agent_id, episode)
    if not isinstance(pid, str):
        raise ValueError(f"'multiagent.policy_mapping_fn' returned {pid!r} for agent {agent_id!r}; "
                         "it must return a policy id (str)")
    return pid


def default_policy_mapping_fn(agent_id, episode, worker=None, **kwargs) -> str:
    """Every agent to 'default_policy' (RLlib 1.x's default, so its single-agent configs and
    checkpoints keep their policy id), or to the only policy."""
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
