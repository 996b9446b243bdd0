"""`Exploration`: the base class of every exploration, with each hook that a policy, a sampler
or the learning loop calls on one declared here with a default that changes nothing.

| hook                                      | called by, when                                  | default                         |
|-------------------------------------------|--------------------------------------------------|---------------------------------|
| `get_exploration_action(dist, explore, timestep, generator)` | `TorchPolicy.compute_actions`, each torch acting call | a sample of `dist` (its mode when not exploring) |
| `forward_for_acting(model, input_dict, state, explore, timestep)` | the same, for the model's forward pass | `model(input_dict, state, None)` |
| `on_episode_start()`                      | every sampler, at each episode start             | nothing                         |
| `postprocess_trajectory(policy, batch)`   | `postprocess_for_learning`, before the policy's own | the batch as it is          |
| `on_learn_on_batch(policy, batch)`        | the learning loop, before each update on a train batch | nothing                   |
| `get_weights()` / `set_weights(weights)`  | the policy's weights (`exploration.` prefix): networks of its own | none / ignored |
| `get_info()`                              | the learner stats (schedules: epsilon, scale)    | `{}`                            |
| `get_state()` / `set_state(state)`        | checkpoints                                      | `last_timestep`                 |
| `acting_exploration`                      | the fast-path plan: what picks the actions       | the exploration itself          |

A caller on a hot path (a sampler, per episode) binds a hook once when the class overrides it
(`bound_hook`, or the class method `overrides`: asked once per sampler, never per step) and
skips it otherwise; everybody else calls the hook plainly. Nobody asks whether a hook exists.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

# The hooks `overrides` answers for: every method and property the base declares.
HOOKS = ("get_exploration_action", "forward_for_acting", "on_episode_start", "postprocess_trajectory",
         "on_learn_on_batch", "get_weights", "set_weights", "get_info", "get_state", "set_state",
         "acting_exploration")


class Exploration:
    """An exploration: how a policy turns its action distribution into actions, plus the hooks
    above. Subclass it and override only the hooks that do something.

    Args:
        action_space: the action space it draws from (the policy's).
        **_context: what the policy offers every exploration (`generator`, `np_random`,
            `model`, `policy_config`; see `make_exploration`), unused here.
    """

    # Uniformly random actions for this many first timesteps (the NumPy actor defers to
    # the torch path until then).
    random_timesteps: int = 0
    # The timestep of the last action drawn (schedules report their value at it).
    last_timestep: int = 0
    # The `sub_exploration` config `make_exploration` builds when the config names none
    # (None: the class takes none).
    default_sub_exploration: Optional[Dict[str, Any]] = None

    def __init__(self, action_space: Any, **_context: Any):
        self.action_space = action_space

    @classmethod
    def overrides(cls, hook: str) -> bool:
        """Whether `cls` (or a class between it and `Exploration`) replaces the default `hook`.

        Raises:
            ValueError: when `hook` is not one of `HOOKS`.
        """
        if hook not in HOOKS:
            raise ValueError(f"{hook!r} is not an Exploration hook; the hooks are {list(HOOKS)}")
        for klass in cls.__mro__:
            if klass is Exploration:
                return False
            if hook in vars(klass):
                return True
        return False

    def bound_hook(self, hook: str) -> Optional[Callable[..., Any]]:
        """This exploration's `hook`, bound, when its class overrides it; None when it keeps
        the default (a caller on a hot path binds once and skips the call per step)."""
        # `hook` is one of the declared HOOKS (checked by `overrides`): nothing is probed.
        return getattr(self, hook) if type(self).overrides(hook) else None

    # --- acting --------------------------------------------------------------------------
    def get_exploration_action(self, dist: Any, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """`(actions, logp)` for a batch: a sample of `dist` drawn with `generator` when
        `explore`, else its mode with logp 0."""
        self.last_timestep = timestep
        if not explore:
            actions = dist.deterministic_sample()
            return actions, torch.zeros(actions.shape[0])
        actions = dist.sample(generator)
        return actions, dist.logp(actions)

    def forward_for_acting(self, model: torch.nn.Module, input_dict: Dict[str, Any], state: List[Any],
                           explore: bool, timestep: int) -> Tuple[Any, List[Any]]:
        """The acting forward pass, `(model output, state out)`; one that perturbs the weights
        it acts with (ParameterNoise) overrides it."""
        return model(input_dict, state, None)

    def on_episode_start(self) -> None:
        """A sampler started an episode (ParameterNoise re-draws its weight noise)."""

    @property
    def acting_exploration(self) -> "Exploration":
        """The exploration that picks the actions: this one, or the sub-exploration of one that
        only reshapes rewards (Curiosity, RE3)."""
        return self

    # --- learning ------------------------------------------------------------------------
    def postprocess_trajectory(self, policy: Any, batch: Any) -> Any:
        """Runs on collected trajectories before the policy's `postprocess_trajectory` (a reward
        bonus that advantages and n-step returns must include); returns the batch."""
        return batch

    def on_learn_on_batch(self, policy: Any, batch: Any) -> None:
        """Sees each train batch before the policy learns from it (Curiosity's ICM learns)."""

    # --- info, weights and state ---------------------------------------------------------
    def get_info(self) -> Dict[str, Any]:
        """Values reported among the learner stats (`cur_epsilon`, `cur_scale`, ...)."""
        return {}

    def get_weights(self) -> Dict[str, np.ndarray]:
        """Weights of networks of its own, which travel with the policy's (every worker
        postprocesses with them); none by default."""
        return {}

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        """Loads what `get_weights` returned (ignored by default: there are none)."""

    def get_state(self) -> Dict[str, Any]:
        """What a checkpoint keeps: NumPy arrays and JSON-able scalars."""
        return {"last_timestep": int(self.last_timestep)}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.last_timestep = int(state.get("last_timestep", 0))


__all__ = ["Exploration", "HOOKS"]
