"""ParameterNoise (Plappert et al. 2018, "Parameter Space Noise for Exploration"): the policy
acts with Gaussian noise added to its network's weights, re-drawn at each episode start, with
a scale that adapts so that the noisy policy's actions stay near a target distance from the
noise-free policy's.

How it differs from RLlib 1.x's (`rllib/utils/exploration/parameter_noise.py`; same maths,
other plumbing):
- RLlib 1.x adds the noise to the weights for a whole episode and removes it at the
  episode's end. Here the weights hold the noise only while the policy computes actions
  (`forward_for_acting` swaps the noisy tensors in and the clean ones back, exactly): the
  learner (torch or the NumPy learner, which reads the same tensors), weight syncs,
  target-network updates and checkpoints only ever see the clean weights.
- RLlib 1.x adapts the scale in `postprocess_trajectory` on the finished episode's batch
  (hence its `batch_mode: complete_episodes`). Here the observations acted on with the
  current noise are kept (the last `_MAX_ROWS` rows) and the scale adapts when the next
  episode starts, just before the noise is re-drawn: the same distance on the same rows,
  whatever the batch mode.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.exploration.epsilon_greedy import EpsilonGreedy
from rlfleet.exploration.noise import OrnsteinUhlenbeckNoise
from rlfleet.utils.schedules import PiecewiseSchedule

# RLlib 1.x's SMALL_NUMBER in its KL distance (keeps log() finite for zero probabilities).
_SMALL = 1e-6
# Observations kept for the distance (the most recent ones acted on with the current noise).
_MAX_ROWS = 4096


def default_sub_exploration(action_space: gym.Space, random_timesteps: int, policy_config: Optional[dict],
                            generator: Optional[torch.Generator]):
    """RLlib 1.x's sub-exploration: for Discrete actions epsilon-greedy at epsilon 1 for
    `random_timesteps` steps, then 0.01 (a step function); for Box actions
    Ornstein-Uhlenbeck noise after `random_timesteps` uniformly random steps."""
    t = int(random_timesteps)
    if isinstance(action_space, gym.spaces.Discrete):
        return EpsilonGreedy(action_space, epsilon_schedule=PiecewiseSchedule(
            [(0, 1.0), (t + 1, 1.0), (t + 2, 0.01)], outside_value=0.01))
    return OrnsteinUhlenbeckNoise(action_space, random_timesteps=t, policy_config=policy_config)


def acting_parameters(model: torch.nn.Module) -> List[Tuple[str, torch.nn.Parameter]]:
    """`(name, parameter)` of the network the policy acts with, which the model names in
    its `acting_net` attribute (DQN's online Q-network `q_net`, DDPG's / TD3's `actor`),
    LayerNorm weights left out, as in RLlib 1.x: the perturbed layers' outputs are normalised
    by them, which is what keeps one noise scale meaningful for every layer.

    Raises:
        ValueError: the model names no acting network.
    """
    attr = getattr(type(model), "acting_net", None)
    net = getattr(model, attr, None) if isinstance(attr, str) else None
    if not isinstance(net, torch.nn.Module):
        raise ValueError(f"exploration_config.type 'ParameterNoise' perturbs the acting network of DQN, SimpleQ "
                         f"and APEX (Discrete actions) or DDPG, TD3 and APEX_DDPG (Box actions); the policy's model "
                         f"{type(model).__name__} names none (its class attribute `acting_net`)")
    norms = {id(p) for m in net.modules() if isinstance(m, torch.nn.LayerNorm) for p in m.parameters()}
    return [(f"{attr}.{name}", p) for name, p in net.named_parameters() if id(p) not in norms]


class ParameterNoise(Exploration):
    """Gaussian noise N(0, stddev) on the acting network's weights, re-drawn at each episode
    start; actions then come from `sub_exploration` (on the noisy network's outputs).

    The scale adapts once per episode, before the noise is re-drawn: the distance between
    the noisy and the noise-free network's outputs on the observations acted on with the
    noise is compared with a target; stddev is multiplied by 1.01 when the distance is
    within it, else divided by 1.01. Discrete actions (DQN): the distance is
    KL(softmax(Q_clean) || softmax(Q_noisy)), the target -log(1 - eps + eps / n) for the
    sub-exploration's current epsilon. Box actions (DDPG, TD3): the root mean squared
    action difference, the target `ou_sigma` (0.2 if the sub-exploration has none) times its
    current scale. With explore=False the policy acts with its clean weights.

    Args:
        action_space: Discrete (DQN, SimpleQ, APEX) or Box (DDPG, TD3, APEX_DDPG).
        initial_stddev: the noise's initial standard deviation.
        random_timesteps: the default sub-exploration's random phase (see
            `default_sub_exploration`).
        sub_exploration: the exploration that picks the actions from the noisy outputs: its
            config `{"type": ..., **options}` (`make_exploration` builds it), or None:
            `default_sub_exploration`.
        policy_config, model, generator: given by the policy.
    """

    def __init__(self, action_space: gym.Space, *, initial_stddev: float = 1.0, random_timesteps: int = 10000,
                 sub_exploration: Any = None, policy_config: Optional[dict] = None,
                 model: Optional[torch.nn.Module] = None, generator: Optional[torch.Generator] = None):
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box)):
            raise ValueError(f"exploration_config.type 'ParameterNoise' needs a Discrete (DQN) or Box (DDPG, TD3) "
                             f"action space, got {action_space}; use StochasticSampling or Random")
        if model is None:
            raise ValueError("exploration_config.type 'ParameterNoise' needs the policy's model (a TorchPolicy "
                             "passes it as `model`)")
        if not float(initial_stddev) > 0.0:
            raise ValueError(f"exploration_config.initial_stddev must be > 0, got {initial_stddev!r}")
        cfg = policy_config or {}
        if cfg.get("noisy"):
            raise ValueError("exploration_config.type 'ParameterNoise' and `noisy: True` (noisy layers) both "
                             "perturb the Q-network; use one of them")
        self.action_space = action_space
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.stddev = float(initial_stddev)
        self.random_timesteps = int(random_timesteps)
        self.last_timestep = 0
        self._generator = generator
        self._bind(model)
        self._redraw_pending = True  # the first forward pass draws the first noise
        self._rows: List[torch.Tensor] = []
        self._num_rows = 0
        self.last_distance: Optional[float] = None
        if sub_exploration is None:
            sub_exploration = default_sub_exploration(action_space, self.random_timesteps, cfg, generator)
        if isinstance(sub_exploration, ParameterNoise) or not isinstance(sub_exploration, Exploration):
            raise ValueError(f"exploration_config.sub_exploration must be an exploration config other than "
                             f"ParameterNoise ({{'type': ..., **options}}), got {sub_exploration!r}")
        self.sub_exploration = sub_exploration

    def _bind(self, model: torch.nn.Module) -> None:
        self._model = model
        self._params = acting_parameters(model)
        self._noise: List[torch.Tensor] = [torch.zeros_like(p) for _, p in self._params]

    # --- the episode and the forward pass ----------------------------------------------
    def on_episode_start(self) -> None:
        """A sampler started an episode: the next forward pass adapts the scale and re-draws
        the noise (it knows whether it explores; as RLlib 1.x's delayed start)."""
        self._redraw_pending = True

    def forward_for_acting(self, model: torch.nn.Module, input_dict: Dict[str, Any], state: List[Any],
                           explore: bool, timestep: int):
        """`model(input_dict, state, None)`, with the noisy weights when `explore`."""
        if model is not self._model:  # the policy replaced its model: perturb the new one
            self._bind(model)
            self._redraw_pending = True
        if self._redraw_pending:
            self._redraw_pending = False
            self.adapt_stddev(model)
            self._draw_noise()
        if not explore:
            return model(input_dict, state, None)
        obs = input_dict["obs"]
        self._keep_rows(obs if isinstance(obs, torch.Tensor) else torch.as_tensor(obs))
        return self._noisy_forward(model, input_dict, state)

    def _noisy_forward(self, model, input_dict, state):
        clean = [p.data for _, p in self._params]
        try:
            # Swapping the tensors (not adding and subtracting in place) restores the clean
            # weights bit for bit and leaves their version counters alone.
            for (_, p), c, n in zip(self._params, clean, self._noise):
                p.data = c + n
            return model(input_dict, state, None)
        finally:
            for (_, p), c in zip(self._params, clean):
                p.data = c

    def _draw_noise(self) -> None:
        # Drawn on the CPU (the policy's generator lives there), then moved to the weights.
        self._noise = [(torch.randn(p.shape, generator=self._generator, dtype=p.dtype) * self.stddev).to(p.device)
                       for _, p in self._params]

    def _keep_rows(self, obs: torch.Tensor) -> None:
        self._rows.append(obs.detach().clone())
        self._num_rows += obs.shape[0]
        while self._num_rows - self._rows[0].shape[0] >= _MAX_ROWS:
            self._num_rows -= self._rows.pop(0).shape[0]

    # --- the adaptive scale --------------------------------------------------------------
    def adapt_stddev(self, model: torch.nn.Module) -> None:
        """Compares the distance on the rows acted on with the current noise with its target,
        scales stddev by 1.01 or 1 / 1.01, and forgets the rows (nothing without rows)."""
        if not self._rows:
            return
        obs = torch.cat(self._rows)
        self._rows, self._num_rows = [], 0
        with torch.inference_mode():
            clean, _ = model({"obs": obs}, [], None)
            noisy, _ = self._noisy_forward(model, {"obs": obs}, [])
        distance = self.distance(clean, noisy)
        self.last_distance = distance
        self.stddev = self.stddev * 1.01 if distance <= self.target_distance() else self.stddev / 1.01

    def distance(self, clean: torch.Tensor, noisy: torch.Tensor) -> float:
        """RLlib 1.x's distance between the noise-free and the noisy outputs."""
        if self.discrete:
            p, log_p = torch.softmax(clean.double(), -1), torch.log_softmax(clean.double(), -1)
            q = torch.softmax(noisy.double(), -1)
            kl = torch.where(p > 0, p * (log_p - torch.log(q + _SMALL)), torch.zeros_like(p)).sum(-1)
            return float(kl.mean())
        return float(torch.sqrt(torch.mean((clean.double() - noisy.double()) ** 2)))

    def target_distance(self) -> float:
        """The distance the scale steers to, from the sub-exploration's current setting."""
        info = self.sub_exploration.get_info()
        if self.discrete:
            eps = float(info.get("cur_epsilon", 0.0))
            return float(-np.log(1.0 - eps + eps / self.action_space.n))
        sigma = self.sub_exploration.ou_sigma if isinstance(self.sub_exploration, OrnsteinUhlenbeckNoise) else 0.2
        return float(sigma) * float(info.get("cur_scale", 1.0))

    # --- the exploration protocol --------------------------------------------------------
    def get_exploration_action(self, dist, explore: bool, timestep: int,
                               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """The sub-exploration's `(actions, logp)` on the (noisy, when exploring) outputs."""
        self.last_timestep = timestep
        return self.sub_exploration.get_exploration_action(dist, explore, timestep, generator)

    def get_info(self) -> dict:
        info = dict(self.sub_exploration.get_info())
        info["cur_stddev"] = self.stddev
        return info

    def get_state(self) -> dict:
        return {"cur_stddev": self.stddev, "last_timestep": int(self.last_timestep),
                "sub_exploration": self.sub_exploration.get_state()}

    def set_state(self, state: dict) -> None:
        self.stddev = float(state.get("cur_stddev", self.stddev))
        self.last_timestep = int(state.get("last_timestep", 0))
        if "sub_exploration" in state:
            self.sub_exploration.set_state(state["sub_exploration"])
        self._redraw_pending = True  # the noise at the restored scale
