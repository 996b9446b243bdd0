"""ExternalEnv: an env that drives itself and asks for actions (a game engine, a robot, a web service).

Subclass it and implement `run()`: it runs in the env's own thread, started by the worker's
sampler (`rlfleet.rollout.external_sampler`), and calls

| call                                   | meaning                                                    |
| -------------------------------------- | ---------------------------------------------------------- |
| `start_episode(episode_id=None, training_enabled=True)` | a new episode; returns its id            |
| `get_action(episode_id, observation)`  | the policy's action for this observation (blocks)          |
| `log_action(episode_id, observation, action)` | an action taken by someone else (off-policy logging) |
| `log_returns(episode_id, reward, info=None)` | reward since the last action (adds up)               |
| `end_episode(episode_id, observation, truncated=False)` | the episode's end (terminal unless truncated) |

Up to `max_concurrent` episodes may run at once (e.g. one per connected client). An episode
started with `training_enabled=False` is acted on and counted in the metrics, but its
samples are not learned from.

Every call is checked where it is made, so the caller gets the error: an unknown or
finished episode, an observation outside `observation_space`, an action outside
`action_space`, a reward that is not a finite number: `ValueError` naming the episode and
the problem (the policy server turns it into a 4xx answer). The sampler reads what the calls
record from one ordered queue (`next_event`); `get_action` then waits for its reply.

`ExternalMultiAgentEnv` (env/external_multi_agent_env.py) is the same with per-agent dicts.
"""
from __future__ import annotations

import collections
import queue
import threading
import uuid
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.env.checks import observation_problem, reward_problem

# The agent id a single-agent ExternalEnv's steps carry inside the sampler (which treats
# every external env as a multi-agent one: one code path).
SINGLE_AGENT = "agent0"

# How many finished episode ids are remembered (to refuse a late call naming one) without
# growing forever on a long-running server.
_FINISHED_MEMORY = 10_000

# Events the sampler reads (`next_event`), in the order the calls were made:
#   ("start", episode_id, training_enabled)
#   ("act", episode_id, {agent: obs}, reply queue or None, {agent: logged action} or None)
#   ("rewards", episode_id, {agent: reward}, info)
#   ("end", episode_id, {agent: obs}, truncated)
Event = Tuple[Any, ...]


class ExternalEnv:
    """An env whose own thread runs the episodes (see the module docstring).

    Args:
        action_space: the space of the actions `get_action` returns (and `log_action` takes).
        observation_space: the space of the observations it is given.
        max_concurrent: how many episodes may run at once.
    """

    multi_agent = False
    num_envs = 1  # one simulator per worker (RolloutWorker.restart_episodes reads it)

    def __init__(self, action_space: Optional[gym.Space], observation_space: Optional[gym.Space],
                 max_concurrent: int = 100):
        if not isinstance(max_concurrent, int) or isinstance(max_concurrent, bool) or max_concurrent < 1:
            raise ValueError(f"{type(self).__name__}(max_concurrent={max_concurrent!r}): give an int >= 1")
        self.action_space = action_space
        self.observation_space = observation_space
        self.max_concurrent = max_concurrent
        self._events: "queue.Queue[Event]" = queue.Queue()
        self._lock = threading.Lock()
        self._running: Dict[str, bool] = {}  # episode id -> training_enabled
        self._finished: "collections.OrderedDict[str, None]" = collections.OrderedDict()
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[BaseException] = None  # what run() raised, if it did

    # --- what a subclass implements ---------------------------------------------------------
    def run(self) -> None:
        """The simulator's loop: start episodes, ask for actions, log returns, end episodes."""
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    # --- the thread ---------------------------------------------------------------------------
    def start(self) -> None:
        """Starts `run()` in a daemon thread (once; the sampler calls it)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run_guarded, name=f"{type(self).__name__}.run", daemon=True)
            self._thread.start()

    def _run_guarded(self) -> None:
        try:
            self.run()
        except BaseException as e:  # the sampler re-raises it in the worker's thread
            self.error = e

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def next_event(self, timeout: Optional[float]) -> Optional[Event]:
        """The next recorded call (None when none came within `timeout` seconds)."""
        try:
            return self._events.get(timeout=timeout) if timeout else self._events.get_nowait()
        except queue.Empty:
            return None

    # --- the calls run() makes -----------------------------------------------------------------
    def start_episode(self, episode_id: Optional[str] = None, training_enabled: bool = True) -> str:
        """Starts an episode and returns its id (a fresh one when `episode_id` is None)."""
        eid = uuid.uuid4().hex if episode_id is None else str(episode_id)
        with self._lock:
            if eid in self._running:
                raise ValueError(f"episode {eid!r} is already running; end it first or use a new id")
            if eid in self._finished:
                raise ValueError(f"episode {eid!r} has already ended; use a new id")
            if len(self._running) >= self.max_concurrent:
                raise ValueError(f"{len(self._running)} episodes are running, the most max_concurrent="
                                 f"{self.max_concurrent} allows; end one first (or raise max_concurrent)")
            self._running[eid] = bool(training_enabled)
            self._events.put(("start", eid, bool(training_enabled)))
        return eid

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The policy's action for `observation` (waits until the sampler has computed it)."""
        reply: "queue.Queue[Any]" = queue.Queue(maxsize=1)
        self._record_step(episode_id, self._per_agent(observation, "observation"), reply, None)
        return self._from_agents(reply.get())

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records that `action` was taken on `observation` (by another controller: off-policy)."""
        actions = self._per_agent(action, "action")
        self._record_step(episode_id, self._per_agent(observation, "observation"), None, actions)

    def log_returns(self, episode_id: str, reward: Any, info: Optional[dict] = None) -> None:
        """Adds `reward` to the episode's current step (several calls add up)."""
        rewards = self._per_agent(reward, "reward")
        for aid, r in rewards.items():
            problem = reward_problem(r)
            if problem is not None:
                raise ValueError(f"episode {episode_id!r}{self._agent_label(aid)}: {problem}")
        with self._lock:
            self._check_running(episode_id)
            self._events.put(("rewards", str(episode_id), {a: float(r) for a, r in rewards.items()}, info))

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """Ends the episode with its last observation: a terminal end, or (`truncated`) a time
        limit after which learning bootstraps from the value of `observation`."""
        obs = self._per_agent(observation, "observation")
        self._check_observations(episode_id, obs)
        with self._lock:
            self._check_running(episode_id)
            eid = str(episode_id)
            del self._running[eid]
            self._finished[eid] = None
            if len(self._finished) > _FINISHED_MEMORY:
                self._finished.popitem(last=False)
            self._events.put(("end", eid, obs, bool(truncated)))

    def running_episodes(self) -> int:
        with self._lock:
            return len(self._running)

    # --- helpers ------------------------------------------------------------------------------
    def _record_step(self, episode_id: str, obs: Dict[Any, Any], reply, actions: Optional[Dict[Any, Any]]) -> None:
        self._check_observations(episode_id, obs)
        if actions is not None:
            for aid, action in actions.items():
                space = self.action_space_for(aid)
                if space is not None and not space.contains(_as_space_value(action, space)):
                    raise ValueError(f"episode {episode_id!r}{self._agent_label(aid)}: action {action!r} is not in "
                                     f"the action space {space}")
        with self._lock:
            self._check_running(episode_id)
            self._events.put(("act", str(episode_id), obs, reply, actions))

    def _check_running(self, episode_id: str) -> None:
        eid = str(episode_id)
        if eid not in self._running:
            state = "has already ended" if eid in self._finished else "is unknown"
            raise ValueError(f"episode {eid!r} {state}; start one with start_episode()")

    def _check_observations(self, episode_id: str, obs: Dict[Any, Any]) -> None:
        for aid, o in obs.items():
            space = self.observation_space_for(aid)
            problem = observation_problem(o, space) if space is not None else None
            if problem is not None:
                raise ValueError(f"episode {episode_id!r}{self._agent_label(aid)}: {problem}")

    # Single agent: values travel as {SINGLE_AGENT: value}; ExternalMultiAgentEnv overrides these.
    def _per_agent(self, value: Any, what: str) -> Dict[Any, Any]:
        return {SINGLE_AGENT: value}

    def _from_agents(self, actions: Dict[Any, Any]) -> Any:
        return actions[SINGLE_AGENT]

    def _agent_label(self, aid: Any) -> str:
        return ""

    def observation_space_for(self, agent_id: Any) -> Optional[gym.Space]:
        return self.observation_space

    def action_space_for(self, agent_id: Any) -> Optional[gym.Space]:
        return self.action_space

    # --- what a worker calls on any env -------------------------------------------------------
    @property
    def unwrapped(self) -> "ExternalEnv":
        """Itself, as Gymnasium's `env.unwrapped` (what the Atari detection reads)."""
        return self

    def seed_next_reset(self, seeds) -> None:
        """Nothing: the simulator starts its episodes itself (RolloutWorker.restart_episodes)."""

    def close(self) -> None:
        """Nothing to release: `run()` is a daemon thread, ended with the process."""


def _as_space_value(value: Any, space: gym.Space) -> Any:
    """`value` as `space.contains` expects it (lists from JSON become arrays; ints stay ints)."""
    if isinstance(space, gym.spaces.Discrete):
        # An int (or NumPy integer) only: a float or bool action is not an index.
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return np.int64(value)
        return value
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        try:
            return np.asarray(value, dtype=space.dtype)
        except (TypeError, ValueError):
            return value
    return value


__all__ = ["ExternalEnv", "SINGLE_AGENT"]
