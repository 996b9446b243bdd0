"""Uniformly random actions in the policy's flat action layout, for every action space the
samplers support (see rlfleet/utils/spaces.py): StochasticSampling's `random_timesteps` and
the Random exploration draw them here."""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

from rlfleet.utils.spaces import flat_action_size, is_nested, leaf_spaces


def uniform_actions(space: gym.Space, dist_inputs: torch.Tensor, generator: Optional[torch.Generator],
                    box_bounds: Optional[Tuple[np.ndarray, np.ndarray]] = None
                    ) -> Tuple[torch.Tensor, torch.Tensor]:
    """`(actions, logp)` for a batch of `dist_inputs.shape[0]` rows, uniform over `space`.

    Discrete and MultiDiscrete actions are uniform among the legal ones when action masking
    set some inputs to the lowest float. Box actions are uniform over `box_bounds` (the range
    the policy acts in; infinite bounds read as [-1, 1]), by default [-1, 1]. Dict / Tuple
    spaces draw each leaf (unmasked, Box leaves in [-1, 1]) into one float32 row.

    Raises:
        ValueError: for a space the samplers do not support.
    """
    batch = dist_inputs.shape[0]
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        masked = _uniform_among_legal(dist_inputs, space, generator)
        if masked is not None:
            return masked
    if is_nested(space):
        parts = [_leaf(leaf, batch, generator, None) for leaf in leaf_spaces(space)]
        actions = torch.cat([a.reshape(batch, -1).to(torch.float32) for a, _ in parts], dim=-1)
        return actions, sum(logp for _, logp in parts)
    flat_action_size(space)  # raises, naming the supported spaces, for any other space
    return _leaf(space, batch, generator, box_bounds)


def _leaf(space: gym.Space, batch: int, generator, box_bounds) -> Tuple[torch.Tensor, torch.Tensor]:
    if isinstance(space, gym.spaces.Discrete):
        actions = torch.randint(int(space.n), (batch,), generator=generator)
        return actions, torch.full((batch,), -float(np.log(space.n)))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(np.asarray(space.nvec).ravel())
        actions = (torch.rand((batch, len(nvec)), generator=generator) * nvec).long()
        return actions, torch.full((batch,), -float(np.log(np.asarray(space.nvec, np.float64)).sum()))
    if isinstance(space, gym.spaces.MultiBinary):
        dim = flat_action_size(space)
        actions = (torch.rand((batch, dim), generator=generator) < 0.5).long()
        return actions, torch.full((batch,), -dim * float(np.log(2.0)))
    dim = flat_action_size(space)
    if box_bounds is None:
        # Uniform over the normalised range [-1, 1] a policy acts in by default.
        actions = torch.rand((batch, dim), generator=generator) * 2.0 - 1.0
        return actions, torch.full((batch,), -dim * float(np.log(2.0)))
    low, high = (np.asarray(b, np.float64).reshape(-1) for b in box_bounds)
    finite = np.isfinite(low) & np.isfinite(high)
    low, high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)
    u = torch.rand((batch, dim), generator=generator)
    actions = torch.as_tensor(low, dtype=torch.float32) + u * torch.as_tensor(high - low, dtype=torch.float32)
    return actions, torch.full((batch,), -float(np.log(high - low).sum()))


def _uniform_among_legal(logits: torch.Tensor, space: gym.Space, generator):
    """Uniform actions among the legal ones when action masking set some logits to the lowest
    float (`(actions, logp)`), else None."""
    lowest = torch.finfo(logits.dtype).min
    if not bool((logits <= lowest).any()):
        return None
    groups = [int(space.n)] if isinstance(space, gym.spaces.Discrete) else [int(n) for n in np.ravel(space.nvec)]
    actions, logp = [], torch.zeros(logits.shape[0])
    for part in torch.split(logits, groups, dim=-1):
        legal = part > lowest
        legal = legal | ~legal.any(-1, keepdim=True)
        noise = torch.rand(part.shape, generator=generator, dtype=torch.float32)
        actions.append(torch.where(legal, noise, torch.full_like(noise, -1.0)).argmax(-1))
        logp = logp - torch.log(legal.sum(-1).float())
    return (actions[0] if len(actions) == 1 and isinstance(space, gym.spaces.Discrete)
            else torch.stack(actions, -1)), logp
