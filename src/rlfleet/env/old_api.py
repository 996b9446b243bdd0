"""Envs written for the old `gym` API (0.21-0.26) and RLlib 1.x's multi-agent `dones` API, run
unchanged.

| env kind     | old API (adapted)                                | new API (Gymnasium / rlfleet)               |
| ------------ | ------------------------------------------------ | ------------------------------------------- |
| single agent | `reset() -> obs`, `seed(s)`                      | `reset(seed=, options=) -> (obs, info)`     |
|              | `step(a) -> (obs, reward, done, info)`           | `step(a) -> (obs, r, terminated, truncated, |
|              | (`info["TimeLimit.truncated"]`: a time limit)    | info)`                                      |
| multi-agent  | `reset() -> obs_dict`                            | `reset(...) -> (obs_dict, info_dict)`       |
|              | `step(actions) -> (obs, rewards, dones, infos)`, | `step(actions) -> (obs, rewards,            |
|              | `dones["__all__"]` ends the episode              | terminateds, truncateds, infos)`            |

Why not Shimmy: its GymV21/GymV26 compatibility wrappers need the `gym` package installed, and an
env written against gym often runs without it (it only subclasses a base class); the shapes of
what `reset` and `step` return tell the two APIs apart without it.

How: `with_old_api_adapters(creator)` patches each created env's own `reset` and `step` (on the
instance, so the env stays the user's object for callbacks and `isinstance`); an object that is
not even a `gym.Env` (no `unwrapped`) is wrapped in `OldGymEnv` instead. The first call of
each looks at what the env returns: a new-API env gets its methods back and pays nothing after;
an old-API env keeps a converting method and one warning is logged per process. Gymnasium's own
classes (`gym.make` results) and PettingZoo envs are left alone.

An old `done` maps to `terminated`, except a done the old `TimeLimit` marked
(`info["TimeLimit.truncated"]`), which maps to `truncated` (bootstrapped, as Gymnasium does).
Old multi-agent `dones` become `terminateds`; `truncateds` are all False.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, Dict, Optional

import gymnasium as gym

from rlfleet.env.env_context import EnvContext
from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv, is_pettingzoo_env

logger = logging.getLogger(__name__)

_warned: Dict[str, bool] = {"single": False, "multi": False}

OLD_SINGLE_AGENT = ("this env uses the old gym API (reset() -> obs, step() -> (obs, reward, done, info)); rlfleet "
                    "adapts it to Gymnasium's (done -> terminated, or truncated where info['TimeLimit.truncated'])."
                    " Port it to gymnasium.Env to silence this warning.")
OLD_MULTI_AGENT = ("this MultiAgentEnv uses RLlib 1.x's API (reset() -> obs, step() -> (obs, rewards, dones, "
                   "infos) with dones['__all__']); rlfleet adapts it (dones -> terminateds, truncateds all False). "
                   "Return (obs, infos) from reset and (obs, rewards, terminateds, truncateds, infos) from step to "
                   "silence this warning.")


def _warn_once(kind: str, env: Any) -> None:
    if not _warned[kind]:
        _warned[kind] = True
        logger.warning("%s: %s", type(env).__name__, OLD_MULTI_AGENT if kind == "multi" else OLD_SINGLE_AGENT)


class OldAPICreator:
    """`env_creator` whose envs get the old-API adapters; picklable (a class, not a closure),
    and holding the inner creator as `.env_creator` like the other creator wrappers."""

    def __init__(self, env_creator: Callable[[EnvContext], Any]):
        self.env_creator = env_creator

    def __call__(self, env_context: EnvContext) -> Any:
        return adapt_old_api(self.env_creator(env_context))

    def __repr__(self) -> str:
        return f"OldAPICreator({self.env_creator!r})"


def with_old_api_adapters(env_creator: Optional[Callable[[EnvContext], Any]]) -> Optional[Callable]:
    """`env_creator` with its envs adapted from the old APIs when they use them (see module doc)."""
    if env_creator is None or isinstance(env_creator, OldAPICreator):
        return env_creator
    return OldAPICreator(env_creator)


def _is_gymnasium_class(env: Any) -> bool:
    return type(env).__module__.split(".")[0] == "gymnasium" or isinstance(env, gym.Wrapper)


def adapt_old_api(env: Any) -> Any:
    """Patches `env`'s `reset` and `step` to adapt the old APIs on first use; returns `env`.

    Envs that cannot be patched (no `reset`/`step`, read-only attributes), Gymnasium's own
    classes and PettingZoo envs are returned untouched.
    """
    if _is_gymnasium_class(env) or is_pettingzoo_env(env) or isinstance(env, OldGymEnv):
        return env
    own = getattr(env, "__dict__", {})
    if "reset" in own or "step" in own:  # adapted already (or set on the instance by the user): keep it
        return env
    if not (callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))):
        return env
    kind = "multi" if isinstance(env, MultiAgentEnv) else "single"
    if kind == "single" and not hasattr(env, "unwrapped"):
        return OldGymEnv(env)  # not even gym's Env interface: the wrappers need one
    reset, step = env.reset, env.step
    try:
        env.reset = _adapting_reset(env, reset, kind)
        env.step = _adapting_step(env, step, kind)
    except (AttributeError, TypeError):  # __slots__ or a read-only attribute: leave it as it is
        return env
    return env


class OldGymEnv(gym.Env):
    """A Gymnasium env around an env object that has only `reset`, `step` and its spaces
    (no `gym.Env` base class); other attributes are read from it.

    Args:
        env: the user's env (`.env`).
    """

    def __init__(self, env: Any):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.metadata = dict(getattr(env, "metadata", None) or {"render_modes": []})
        self.render_mode = getattr(env, "render_mode", None)
        self._reset = _adapting_reset(env, env.reset, "single")
        self._step = _adapting_step(env, env.step, "single")

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        return self._reset(seed=seed, options=options)

    def step(self, action):
        return self._step(action)

    def render(self):
        return self.env.render() if callable(getattr(self.env, "render", None)) else None

    def close(self) -> None:
        if callable(getattr(self.env, "close", None)):
            self.env.close()

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (during __init__ or unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)


def _restore(env: Any, name: str) -> None:
    """Drops the patched method: the class's own is used again (no cost per call)."""
    getattr(env, "__dict__", {}).pop(name, None)


def _accepts_seed(method: Callable) -> bool:
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _adapting_reset(env: Any, reset: Callable, kind: str) -> Callable:
    takes_seed = _accepts_seed(reset)
    state = {"old": None}

    def adapted_reset(*, seed: Optional[int] = None, options: Optional[dict] = None):
        if takes_seed:
            out = reset(seed=seed, options=options)
        else:  # gym 0.21: reset() takes nothing, seeding is `env.seed(s)`
            if seed is not None and callable(getattr(env, "seed", None)):
                env.seed(seed)
            out = reset()
        if state["old"] is None:
            state["old"] = not _is_new_reset(env, out, kind)
            if not state["old"] and takes_seed:
                _restore(env, "reset")
            elif state["old"]:
                _warn_once(kind, env)
        return (out, {}) if state["old"] else out

    return adapted_reset


def _is_new_reset(env: Any, out: Any, kind: str) -> bool:
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        return False
    if kind == "multi":
        return True  # an old multi-agent reset returns one dict, never a tuple
    space = getattr(env, "observation_space", None)
    # A Tuple observation of two parts, the second a dict, is the only ambiguous case.
    return not (isinstance(space, gym.spaces.Tuple) and space.contains(out) and not space.contains(out[0]))


def _adapting_step(env: Any, step: Callable, kind: str) -> Callable:
    state = {"old": None}

    def adapted_step(action):
        out = step(action)
        if state["old"] is None:
            state["old"] = len(out) == 4
            if not state["old"]:
                _restore(env, "step")
                return out
            _warn_once(kind, env)
        if not state["old"]:
            return out
        return _multi_agent_step(out) if kind == "multi" else _single_agent_step(out)

    return adapted_step


def _single_agent_step(out: tuple) -> tuple:
    obs, reward, done, info = out
    truncated = bool(done) and bool((info or {}).get("TimeLimit.truncated", False))
    return obs, reward, bool(done) and not truncated, truncated, info


def _multi_agent_step(out: tuple) -> tuple:
    obs, rewards, dones, infos = out
    terminateds = dict(dones)
    terminateds.setdefault(ALL, False)
    truncateds = {aid: False for aid in terminateds}
    return obs, rewards, terminateds, truncateds, infos
