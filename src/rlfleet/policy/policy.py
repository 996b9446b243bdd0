"""The Policy API: acting (`compute_actions`, and `actor` for samplers) and learning
(`learn_on_batch`) for one policy id."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.exploration.base import Exploration
from rlfleet.policy.actor import Actor, TorchActor
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.utils.spaces import env_action, flatten_action, is_nested


class Policy:
    """Base class of all policies.

    Args:
        observation_space: the preprocessed observation space the policy sees.
        action_space: the action space of the agents it controls.
        config: the trainer config merged with this policy's overrides.
    """

    # True where `postprocess_trajectory` reads `other_agent_batches` (a centralised critic):
    # the vectorised multi-agent sampler does not build them, so the worker samples such a
    # policy on the general multi-agent path, which does.
    needs_other_agent_batches: bool = False
    # True where the learner reads env infos (the bandits' regret): the worker then records
    # the `infos` column, which samplers otherwise skip.
    needs_infos: bool = False
    # The exploration whose hooks samplers and postprocessing call (exploration/base.py).
    # A policy that draws its actions its own way keeps this shared one: its hooks do nothing
    # and hold no state (TorchPolicy builds its own from `exploration_config`).
    exploration: Exploration = Exploration(action_space=None)
    # The policy's torch model; None for a policy without one (scripted players, the bandits'
    # and evolution strategies' own models): checks that read model settings skip it.
    model: Any = None

    @property
    def fast_plan(self) -> Any:
        """Where the policy acts and learns, NumPy or torch (policy/fast_plan.py's
        `FastPathPlan`); None: it acts and learns its own way (TorchPolicy makes a plan)."""
        return None

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict):
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.global_timestep = 0

    # --- acting ------------------------------------------------------------------
    def compute_actions(
        self,
        obs_batch: np.ndarray,
        state_batches: Optional[List[np.ndarray]] = None,
        prev_action_batch=None,
        prev_reward_batch=None,
        info_batch=None,
        episodes=None,
        explore: Optional[bool] = None,
        timestep: Optional[int] = None,
        **kwargs,
    ) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
        """Returns `(actions, state_outs, extra_fetches)` for a batch of observations."""
        raise NotImplementedError  # abstract

    def actor(self, explore: Optional[bool], timestep: int, *, steps: Optional[int] = None,
              num_envs: Optional[int] = None, defer: bool = True) -> Actor:
        """The `Actor` (policy/actor.py) that samplers act through for one stretch of sampling.

        Args:
            explore: sample (True), act greedily (False), or None: `config["explore"]`.
            timestep: the global timestep of the first step.
            steps, num_envs: a hint that the actor will act at most `steps` times on
                `num_envs` rows each (a sampler chunk); a backend may use it to draw its
                noise up front.
            defer: whether the actor may leave columns to `finish()`; False for a caller that
                reads every column per step (or whose weights may change before `finish`).

        The default acts through `compute_actions` (`TorchActor`), deferring nothing;
        TorchPolicy adds a NumPy backend for fully connected policies.
        """
        return TorchActor(self, explore, timestep)

    def compute_single_action(
        self,
        obs,
        state: Optional[List[Any]] = None,
        prev_action=None,
        prev_reward=None,
        info=None,
        episode=None,
        explore: Optional[bool] = None,
        timestep: Optional[int] = None,
        unsquash_actions: Optional[bool] = None,
        clip_actions: Optional[bool] = None,
        **kwargs,
    ):
        """One observation in, `(action, state_out, extra_fetches)` out (no batch dims).

        Box actions are unsquashed into the env's bounds when `unsquash_actions` (default:
        `config["normalize_actions"]`) and clipped when `clip_actions` (default:
        `config["clip_actions"]`). Dict / Tuple actions come back in the space's nested
        structure; `prev_action` may be given in that structure too.
        """
        state = state or []
        if prev_action is not None and is_nested(self.action_space):
            prev_action = flatten_action(prev_action, self.action_space)
        obs_batch = np.asarray(obs)[None]
        state_batches = [np.asarray(s)[None] for s in state]
        actions, state_out, extra = self.compute_actions(
            obs_batch,
            state_batches,
            prev_action_batch=None if prev_action is None else np.asarray(prev_action)[None],
            prev_reward_batch=None if prev_reward is None else np.asarray([prev_reward]),
            info_batch=None if info is None else [info],
            episodes=None if episode is None else [episode],
            explore=explore,
            timestep=timestep,
        )
        action = actions[0]
        if unsquash_actions is None:
            unsquash_actions = self.config.get("normalize_actions", True)
        if clip_actions is None:
            clip_actions = self.config.get("clip_actions", False)
        action = env_action(action, self.action_space, bool(unsquash_actions), bool(clip_actions))
        return action, [s[0] for s in state_out], {k: v[0] for k, v in extra.items()}

    # --- learning ----------------------------------------------------------------
    def postprocess_trajectory(
        self, sample_batch: SampleBatch, other_agent_batches: Optional[dict] = None, episode=None
    ) -> SampleBatch:
        """Adds algorithm columns (advantages, targets, ...) to one or more trajectories."""
        return sample_batch

    def learn_on_batch(self, samples: SampleBatch) -> Dict[str, Any]:
        """One update on `samples`; returns `{"learner_stats": {...}}`."""
        raise NotImplementedError  # abstract

    # --- state -------------------------------------------------------------------
    def get_weights(self) -> Dict[str, np.ndarray]:
        raise NotImplementedError  # abstract

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        raise NotImplementedError  # abstract

    def get_state(self) -> Dict[str, Any]:
        """Everything needed to resume this policy: weights and counters."""
        return {"weights": self.get_weights(), "global_timestep": int(self.global_timestep)}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.set_weights(state["weights"])
        self.global_timestep = int(state.get("global_timestep", 0))

    def get_initial_state(self) -> List[np.ndarray]:
        """Initial recurrent state (empty for feed-forward policies)."""
        return []

    def is_recurrent(self) -> bool:
        return False

    def num_state_tensors(self) -> int:
        return 0

    def on_global_var_update(self, global_vars: Dict[str, Any]) -> None:
        """Called by the trainer after each update with e.g. `{"timestep": N}`."""
        self.global_timestep = int(global_vars.get("timestep", self.global_timestep))
