"""A scripted Pendulum-v1 expert: the controller behind the mixed-quality offline dataset
(`rlfleet.offline.pendulum_dataset`). It needs no training, so the data is the same on every
machine and costs seconds to write.

Pendulum-v1's dynamics (Gymnasium's source): theta'' = 3 g / (2 l) sin(theta) + 3 / (m l^2) u
with g = 10, m = l = 1, so theta'' = 15 sin(theta) + 3 u, theta = 0 upright. Far from the top
the controller pumps energy (torque along the swing while the energy
E = theta'^2 / 2 + 15 (cos(theta) - 1) is below the upright's 0); near the top a PD law holds
it. Returns over 20 seeded episodes: mean about -137 (worst about -330); random torques
average about -1200.
"""
from __future__ import annotations

import numpy as np

MAX_TORQUE = 2.0


def expert_torque(obs: np.ndarray) -> float:
    """The scripted controller's torque for one Pendulum-v1 observation (cos, sin, velocity)."""
    cos, sin, velocity = (float(x) for x in obs)
    if cos > 0.8:  # near the top: a PD law on the angle
        return float(np.clip(-(12.0 * np.arctan2(sin, cos) + 2.5 * velocity), -MAX_TORQUE, MAX_TORQUE))
    energy = 0.5 * velocity * velocity + 15.0 * (cos - 1.0)
    if abs(velocity) < 1e-3:  # at rest below the top: any push starts the swing
        return MAX_TORQUE
    return MAX_TORQUE * float(np.sign(-velocity * energy))
