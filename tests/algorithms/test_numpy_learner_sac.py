"""The fused NumPy SAC update (rlfleet/algorithms/sac/fused_update.py) against the torch
path: the same weights, optimizer states, stats and TD errors after many updates on real
Pendulum / MountainCarContinuous transitions, and the cases it leaves to torch."""
import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.sac import SACTrainer
from rlfleet.algorithms.sac.fused_update import unsupported_reason
from rlfleet.config import validate_config
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS

from tests.helpers import assert_same_learner_state, needs_mujoco

SB = SampleBatch


def _policy(obs_space, act_space, **config):
    cfg = SACTrainer.merge_trainer_configs(SACTrainer._default_config, {"seed": 5, **config})
    validate_config(cfg)
    cfg["worker_index"] = 0
    return SACTrainer._policy_class(obs_space, act_space, cfg)


def _transitions(env_id: str, n: int, seed: int = 0) -> SampleBatch:
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


def train_side_by_side(fused, plain, data: SampleBatch, updates: int, seed: int, after=None):
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


CASES = {
    "pendulum-twin": ("Pendulum-v1", {}),
    "pendulum-single-q-clip-tanh": ("Pendulum-v1", {
        "twin_q": False, "grad_clip": 1.0, "policy_model": {"fcnet_hiddens": [32, 16], "fcnet_activation": "tanh"},
        "Q_model": {"fcnet_hiddens": [24], "fcnet_activation": "tanh"}}),
    "mountaincar-unnormalized": ("MountainCarContinuous-v0", {"normalize_actions": False, "initial_alpha": 0.2,
                                                              "target_entropy": -0.5}),
    # Several action dimensions: the log-likelihood and its tanh correction sum over them.
    "hopper-3d-actions": ("Hopper-v5", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_sac_matches_torch(case):
    env_id, overrides = CASES[case]
    needs_mujoco(env_id)
    env = gym.make(env_id)
    config = {"Q_model": {"fcnet_hiddens": [32, 32]}, "policy_model": {"fcnet_hiddens": [32, 32]}, **overrides}
    fused = _policy(env.observation_space, env.action_space, **config)
    plain = _policy(env.observation_space, env.action_space, fast_path="off", **config)
    assert unsupported_reason(fused) is None
    plain.set_weights(fused.get_weights())
    out_f, out_p = train_side_by_side(fused, plain, _transitions(env_id, 512), updates=30, seed=1,
                                      after=lambda: (fused.update_target(), plain.update_target()))
    assert_fused_matches(fused, plain, out_f, out_p, updates=30)


def assert_fused_matches(fused, plain, out_f, out_p, updates: int) -> None:
    """Each took its own path, and both hold the same weights and optimizer states and
    reported the same stats and TD errors after `updates` updates."""
    assert fused._fused is not None and plain._fused is None
    np.testing.assert_allclose(out_f["td_error"], out_p["td_error"], rtol=1e-3, atol=1e-4)
    assert_same_learner_state(fused, plain, out_f["learner_stats"], out_p["learner_stats"],
                              weight_tol=(1e-4, 1e-5), moment_rtol=2e-3, stats_rel=1e-3)
    assert fused.num_grad_updates == plain.num_grad_updates == updates


def test_fused_sac_skips_nonfinite_updates():
    env = gym.make("Pendulum-v1")
    policy = _policy(env.observation_space, env.action_space, max_nonfinite_updates=10)
    assert_skips_nonfinite_update(policy, np.nan)


def assert_skips_nonfinite_update(policy, bad_reward: float, env_id: str = "Pendulum-v1") -> None:
    """One update on `env_id` transitions with a `bad_reward` among them is skipped (the
    weights stay, the skip is counted) and reports finite TD errors (replay priorities)."""
    batch = _transitions(env_id, 64)
    batch[SB.REWARDS][3] = bad_reward
    before = policy.get_weights()
    out = policy.learn_on_batch(batch)
    assert policy._fused is not None
    assert out["num_nonfinite_updates"] == 1 and np.isfinite(out["td_error"]).all()
    for k, v in policy.get_weights().items():
        np.testing.assert_array_equal(v, before[k])


def test_other_sac_settings_keep_the_torch_path():
    env = gym.make("CartPole-v1")
    assert "discrete" in unsupported_reason(_policy(env.observation_space, env.action_space))
    env = gym.make("Pendulum-v1")
    policy = _policy(env.observation_space, env.action_space, _deterministic_loss=True)
    assert "_deterministic_loss" in unsupported_reason(policy)
    policy = _policy(env.observation_space, env.action_space, Q_model={"fcnet_activation": "swish"})
    assert "Linear" in unsupported_reason(policy)
    policy.learn_on_batch(_transitions("Pendulum-v1", 32))
    assert policy._fused is None


def test_more_torch_threads_keep_the_torch_path():
    env = gym.make("Pendulum-v1")
    policy = _policy(env.observation_space, env.action_space)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        policy.learn_on_batch(_transitions("Pendulum-v1", 32))
    finally:
        torch.set_num_threads(before)
    assert policy._fused is None


def test_fused_sac_trains_the_state_restored_between_updates():
    """The fused update keeps its views of weights and optimizer states between calls; a state
    restored in between must be the one trained next, whether through `set_state` or straight
    into the modules and optimizers (which keeps the fused learner: it must bind again)."""
    data = _transitions("Pendulum-v1", 256)
    env = gym.make("Pendulum-v1")
    policy, direct, fresh = (_policy(env.observation_space, env.action_space) for _ in range(3))
    batch = SampleBatch({k: v[:64] for k, v in data.items()})
    for p in (policy, direct):
        p.learn_on_batch(batch.copy())
    saved = policy.get_state()
    model_state = {k: v.clone() for k, v in direct.model.state_dict().items()}
    optimizer_states = {name: copy.deepcopy(opt.state_dict()) for name, opt in direct.optimizers.items()}
    generator = policy.generator.get_state()
    for p in (policy, direct):
        p.learn_on_batch(batch.copy())  # moves weights and moments away from the saved ones
    policy.set_state(saved)
    fresh.set_state(saved)
    learner = direct._fused
    direct.model.load_state_dict(model_state)
    for name, opt in direct.optimizers.items():
        opt.load_state_dict(optimizer_states[name])
    for p in (policy, direct, fresh):
        p.generator.set_state(generator)
        p.learn_on_batch(batch.copy())
    assert direct._fused is learner  # the same learner, bound anew
    for k, v in fresh.get_weights().items():
        np.testing.assert_array_equal(policy.get_weights()[k], v, err_msg=k)
        np.testing.assert_array_equal(direct.get_weights()[k], v, err_msg=k)
