"""The shared shape of the explorations that add a bonus to rewards and leave acting to a
sub-exploration (Curiosity, RE3)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.exploration.base import Exploration


class RewardBonus(Exploration):
    """Acting is the `sub_exploration`'s; the subclass's own networks (`self.networks`)
    travel with the policy's weights (`get_weights`, prefixed by the policy) and its last
    measurements (`self._stats`) are reported through `get_info`.

    Subclasses call `_init_bonus` from their constructor (no `__init__` here: the config
    check reads every `__init__` argument in the class's MRO as an option; `Exploration`'s
    takes only the action space).
    """

    # What `make_exploration` builds as `sub_exploration` when the config names none.
    default_sub_exploration = {"type": "StochasticSampling"}
    kind = "RewardBonus"

    def _init_bonus(self, action_space: gym.Space, sub_exploration: Any, networks: torch.nn.Module,
                    model: torch.nn.Module) -> None:
        if not isinstance(sub_exploration, Exploration) or isinstance(sub_exploration, RewardBonus):
            raise ValueError(f"exploration_config.sub_exploration must be an exploration config other than "
                             f"{self.kind} ({{'type': ..., **options}}), got {sub_exploration!r}")
        self.action_space = action_space
        self.sub_exploration = sub_exploration
        self.device = next(iter(model.parameters()), torch.zeros(())).device
        self.networks = networks.to(self.device)
        self._stats: Dict[str, float] = {}

    # --- acting: the sub-exploration's ----------------------------------------------------
    @property
    def acting_exploration(self):
        """What picks the actions (a bonus only reshapes rewards): the NumPy actor may act for
        it when this is StochasticSampling (policy/fast_plan.py)."""
        return self.sub_exploration

    @property
    def random_timesteps(self) -> int:
        return int(self.sub_exploration.random_timesteps)

    @property
    def last_timestep(self) -> int:
        return int(self.sub_exploration.last_timestep)

    @last_timestep.setter
    def last_timestep(self, value: int) -> None:
        self.sub_exploration.last_timestep = int(value)

    def get_exploration_action(self, dist, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """The sub-exploration's `(actions, logp)`."""
        return self.sub_exploration.get_exploration_action(dist, explore, timestep, generator)

    # --- info, weights and state ----------------------------------------------------------
    def get_info(self) -> dict:
        info = dict(self.sub_exploration.get_info())
        info.update(self._stats)
        return info

    def get_weights(self) -> Dict[str, np.ndarray]:
        """The networks' weights (what every worker computes the bonus with, and a restored
        run must continue with)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.networks.state_dict().items()}

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        own = self.networks.state_dict()
        if set(weights) != set(own):
            raise ValueError(f"{self.kind} weights do not match its networks: missing "
                             f"{sorted(set(own) - set(weights))}, unexpected {sorted(set(weights) - set(own))}")
        self.networks.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in weights.items()})

    def get_state(self) -> dict:
        return {"sub_exploration": self.sub_exploration.get_state()}

    def set_state(self, state: dict) -> None:
        if "sub_exploration" in state:
            self.sub_exploration.set_state(state["sub_exploration"])
