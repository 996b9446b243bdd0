"""Rolls the policy, under given parameters, through an `ImaginedVectorEnv` and returns one
batch of what MAML's inner step and meta loss read: preallocated `[T, N]` buffers, one
forward pass per step, then one vectorised GAE pass (Schulman et al. 2016, arXiv 1506.02438)
over the whole `[T, N]` block, bootstrapped from the value of the last observation (imagined
episodes are cut at the horizon, not ended)."""
from __future__ import annotations

from typing import Mapping, Optional, Tuple

import numpy as np
import torch

from rlfleet.algorithms.maml import forward_with
from rlfleet.algorithms.mbmpo.imagined_env import ImaginedVectorEnv
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.postprocessing import standardized
from rlfleet.utils.spaces import env_actions

SB = SampleBatch


def imagine(policy, params: Mapping[str, torch.Tensor], env: ImaginedVectorEnv, *, gamma: float, lambda_: float,
            normalize_actions: bool, clip_actions: bool, generator: Optional[torch.Generator] = None
            ) -> Tuple[SampleBatch, np.ndarray]:
    """One imagined episode of every copy of `env` with the policy's model under `params`
    (actions drawn with `generator`; None: torch's global one).

    Returns:
        `(batch, returns)`: `batch` holds `T * N` rows (time-major) with obs, actions (the
        policy's), action_logp, action_dist_inputs, rewards, vf_preds, advantages
        (standardised) and value_targets; `returns` the `[N]` undiscounted episode returns.
    """
    model, dist_class = policy.model, policy.dist_class
    T, N = env.horizon, env.num_envs
    obs = env.reset()
    obs_buf = np.zeros((T, N, obs.shape[1]), np.float32)
    rew_buf = np.zeros((T, N), np.float32)
    val_buf = np.zeros((T + 1, N), np.float32)
    logp_buf = np.zeros((T, N), np.float32)
    act_buf = dist_buf = None
    with torch.no_grad():
        for t in range(T):
            inputs, values = forward_with(model, params, {SB.OBS: torch.as_tensor(obs)})
            dist = dist_class(inputs, model)
            actions = dist.sample(generator)
            if act_buf is None:
                act_buf = np.zeros((T, *actions.shape), np.float32)
                dist_buf = np.zeros((T, *inputs.shape), np.float32)
            act_buf[t], dist_buf[t] = actions.numpy(), inputs.numpy()
            logp_buf[t], val_buf[t], obs_buf[t] = dist.logp(actions).numpy(), values.numpy(), obs
            obs, rew_buf[t], _ = env.step(env_actions(actions.numpy(), policy.action_space, normalize_actions,
                                                      clip_actions))
        val_buf[T] = forward_with(model, params, {SB.OBS: torch.as_tensor(obs)})[1].numpy()
    deltas = rew_buf + gamma * val_buf[1:] - val_buf[:-1]
    adv = np.zeros((T, N), np.float32)
    running = np.zeros(N, np.float32)
    for t in range(T - 1, -1, -1):
        running = deltas[t] + gamma * lambda_ * running
        adv[t] = running
    flat = lambda x: x.reshape(T * N, *x.shape[2:])  # noqa: E731
    batch = SampleBatch({
        SB.OBS: flat(obs_buf), SB.ACTIONS: flat(act_buf), SB.ACTION_LOGP: flat(logp_buf),
        SB.ACTION_DIST_INPUTS: flat(dist_buf), SB.REWARDS: flat(rew_buf), SB.VF_PREDS: flat(val_buf[:-1]),
        SB.VALUE_TARGETS: flat(adv + val_buf[:-1]), SB.ADVANTAGES: standardized(flat(adv)),
    })
    return batch, rew_buf.sum(axis=0)


__all__ = ["imagine"]
