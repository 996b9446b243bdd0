"""A scripted CartPole-v1 controller (Discrete actions), for offline learners' datasets
(rlfleet/offline/cartpole_dataset.py writes them with it).

The controller pushes the cart towards the side the pole falls to: right when
`angle + 0.5 * angular velocity > 0`. It balances for hundreds of steps; uniformly random
pushes last about 22 steps.
"""
from __future__ import annotations

import numpy as np


def expert_push(obs: np.ndarray) -> int:
    """The controller's action (0: left, 1: right) for one CartPole-v1 observation."""
    return int(obs[2] + 0.5 * obs[3] > 0)
