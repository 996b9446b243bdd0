"""Helpers for the tests of the NumPy learners (algorithms/test_numpy_learner_*.py, fast/,
policy/test_fast_plan.py): a policy built as a trainer would build it, real transitions of a
Gymnasium env, and training a NumPy-learner policy beside a torch-path twin."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.config import validate_config
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from tests.helpers import assert_same_learner_state

SB = SampleBatch


def learner_policy(trainer_cls: type, obs_space: gym.Space, act_space: gym.Space, *, seed: int, **config: Any) -> Any:
    """The policy `trainer_cls` builds for the local worker, from its defaults plus `config`."""
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, {"seed": seed, **config})
    validate_config(cfg)
    cfg["worker_index"] = 0
    return trainer_cls._policy_class(obs_space, act_space, cfg)


def sac_policy(obs_space: gym.Space, act_space: gym.Space, **config: Any) -> Any:
    """A SAC policy (seed 5) for these spaces."""
    return learner_policy(SACTrainer, obs_space, act_space, seed=5, **config)


def dqn_policy(env: gym.Env, **config: Any) -> Any:
    """A DQN policy (seed 4) for `env`'s spaces."""
    return learner_policy(DQNTrainer, env.observation_space, env.action_space, seed=4, **config)


def ddpg_policy(trainer_cls: type, env: gym.Env, **config: Any) -> Any:
    """A DDPG or TD3 policy (seed 7) for `env`'s spaces."""
    return learner_policy(trainer_cls, env.observation_space, env.action_space, seed=7, **config)


# Small DDPG / TD3 nets: the NumPy and torch paths compared in seconds.
DDPG_SMALL_NETS = {"actor_hiddens": [32, 24], "critic_hiddens": [32, 24]}


def transitions(env_id: str, n: int, seed: int = 0) -> SampleBatch:
    """`n` real transitions of `env_id` under uniformly random actions."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    cols = {k: [] for k in (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS)}
    for _ in range(n):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        for k, v in zip(cols, (obs, action, reward, next_obs, terminated)):
            cols[k].append(v)
        obs = env.reset()[0] if terminated or truncated else next_obs
    batch = SampleBatch({k: np.asarray(v) for k, v in cols.items()})
    batch[SB.REWARDS] = batch[SB.REWARDS].astype(np.float32)
    batch[N_STEPS] = np.ones(n, np.int64)
    batch[PRIO_WEIGHTS] = np.random.default_rng(seed).uniform(0.5, 1.0, n).astype(np.float32)
    return batch


def train_side_by_side(fused: Any, plain: Any, data: SampleBatch, updates: int, seed: int,
                       after: Optional[Callable[[], Any]] = None) -> Tuple[dict, dict]:
    """`updates` calls of `learn_on_batch` on both policies with the same 64-row batches of
    `data` and the same torch generator state; returns the last two results."""
    rng = np.random.default_rng(seed)
    for _ in range(updates):
        rows = rng.choice(len(data), 64, replace=False)
        batch = SampleBatch({k: v[rows] for k, v in data.items()})
        plain.generator.set_state(fused.generator.get_state())
        out_f = fused.learn_on_batch(batch.copy())
        out_p = plain.learn_on_batch(batch.copy())
        if after is not None:
            after()
    return out_f, out_p


def assert_numpy_learner_matches(fused: Any, plain: Any, out_f: dict, out_p: dict, updates: int) -> None:
    """Each took its own path, and both hold the same weights and optimizer states and
    reported the same stats and TD errors after `updates` updates."""
    assert fused._numpy_learner is not None and plain._numpy_learner is None
    np.testing.assert_allclose(out_f["td_error"], out_p["td_error"], rtol=1e-3, atol=1e-4)
    assert_same_learner_state(fused, plain, out_f["learner_stats"], out_p["learner_stats"],
                              weight_tol=(1e-4, 1e-5), moment_rtol=2e-3, stats_rel=1e-3)
    assert fused.num_grad_updates == plain.num_grad_updates == updates


def assert_skips_nonfinite_update(policy: Any, bad_reward: float, env_id: str = "Pendulum-v1") -> None:
    """One update on `env_id` transitions with a `bad_reward` among them is skipped (the
    weights stay, the skip is counted) and reports finite TD errors (replay priorities)."""
    batch = transitions(env_id, 64)
    batch[SB.REWARDS][3] = bad_reward
    before = policy.get_weights()
    out = policy.learn_on_batch(batch)
    assert policy._numpy_learner is not None
    assert out["num_nonfinite_updates"] == 1 and np.isfinite(out["td_error"]).all()
    for k, v in policy.get_weights().items():
        np.testing.assert_array_equal(v, before[k])
