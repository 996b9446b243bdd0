"""SoftQ (Boltzmann over Q-values) and Random (uniform over any action space): unit draws
against their distributions, real policies acting, config checks and clear errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.dqn import DQNTrainer, SimpleQTrainer
from rlfleet.algorithms.ddpg import DDPGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import validate_config
from rlfleet.exploration.soft_q import SoftQ
from rlfleet.exploration.stochastic_sampling import StochasticSampling, make_exploration
from rlfleet.exploration.uniform_random import Random
from rlfleet.models.distributions import Categorical

CARTPOLE = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-8.0, 8.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32))


def gen(seed=0):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def make_policy(trainer_cls, spaces, **config):
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, config)
    validate_config(cfg)
    cfg["worker_index"] = 0
    return trainer_cls._policy_class(spaces[0], spaces[1], cfg)


def frequencies(actions, n):
    return np.bincount(np.asarray(actions).ravel(), minlength=n) / np.asarray(actions).size


# --- SoftQ ---------------------------------------------------------------------------------------
def test_soft_q_samples_the_tempered_softmax_and_is_greedy_without_explore():
    q = torch.tensor([[1.0, 2.0, 0.0]]).repeat(20000, 1)
    for temperature in (0.5, 2.0):
        soft_q = SoftQ(gym.spaces.Discrete(3), temperature=temperature)
        actions, logp = soft_q.get_exploration_action(Categorical(q), True, 0, gen())
        expected = torch.softmax(q[0] / temperature, -1).numpy()
        assert np.allclose(frequencies(actions, 3), expected, atol=0.015)
        assert torch.allclose(logp, torch.log(torch.as_tensor(expected))[actions], atol=1e-5)
    greedy, logp = soft_q.get_exploration_action(Categorical(q[:5]), False, 0, gen())
    assert greedy.tolist() == [1] * 5 and logp.abs().sum() == 0


def test_soft_q_keeps_masked_actions_masked():
    lowest = torch.finfo(torch.float32).min
    q = torch.tensor([[lowest, 0.0, lowest]]).repeat(500, 1)
    actions, _ = SoftQ(gym.spaces.Discrete(3), temperature=2.0).get_exploration_action(Categorical(q), True, 0, gen())
    assert set(actions.tolist()) == {1}


def test_soft_q_errors_name_the_type_space_and_key():
    with pytest.raises(ValueError, match="'SoftQ' needs a Discrete action space, got Box"):
        SoftQ(PENDULUM[1])
    with pytest.raises(ValueError, match="exploration_config.temperature must be > 0"):
        SoftQ(gym.spaces.Discrete(2), temperature=0.0)
    with pytest.raises(ValueError, match="'SoftQ' needs a Discrete action space"):
        make_policy(DDPGTrainer, PENDULUM, exploration_config={"type": "SoftQ"})


@pytest.mark.parametrize("trainer_cls", [DQNTrainer, SimpleQTrainer])
def test_soft_q_acts_for_a_real_q_policy(trainer_cls):
    policy = make_policy(trainer_cls, CARTPOLE, seed=0, exploration_config={"type": "SoftQ", "temperature": 0.5})
    assert isinstance(policy.exploration, SoftQ)
    obs = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    actions, _, extra = policy.compute_actions(obs, explore=True)
    q = torch.as_tensor(extra["action_dist_inputs"])
    expected = torch.log_softmax(q / 0.5, -1)[torch.arange(256), torch.as_tensor(actions)]
    assert np.allclose(extra["action_logp"], expected.numpy(), atol=1e-5)
    greedy, _, extra = policy.compute_actions(obs, explore=False)
    assert (greedy == extra["action_dist_inputs"].argmax(-1)).all()


def test_soft_q_options_are_checked_with_did_you_mean():
    with pytest.raises(ValueError, match="did you mean 'exploration_config.temperature'"):
        DQNTrainer(env="CartPole-v1", config={"exploration_config": {"type": "SoftQ", "temprature": 0.5}})


# --- Random --------------------------------------------------------------------------------------
SPACES = {
    "discrete": gym.spaces.Discrete(4),
    "multi-discrete": gym.spaces.MultiDiscrete([2, 3]),
    "multi-binary": gym.spaces.MultiBinary(3),
    "box": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
    "tuple": gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)]),
}


@pytest.mark.parametrize("name", sorted(SPACES))
def test_random_is_uniform_over_every_supported_space(name):
    space = SPACES[name]
    random = Random(space)
    n = 6000
    inputs = torch.zeros((n, 8))
    dist = type("Dist", (), {"inputs": inputs, "deterministic_sample": lambda self: torch.zeros(n)})()
    actions, logp = random.get_exploration_action(dist, True, 0, gen())
    actions = actions.numpy()
    assert len(actions) == n and logp.shape == (n,)
    if name == "discrete":
        assert np.allclose(frequencies(actions, 4), 0.25, atol=0.03) and np.allclose(logp, -np.log(4))
    elif name == "multi-discrete":
        assert np.allclose(frequencies(actions[:, 1], 3), 1 / 3, atol=0.03)
    elif name == "multi-binary":
        assert set(np.unique(actions)) == {0, 1} and abs(actions.mean() - 0.5) < 0.03
    elif name == "box":  # normalize_actions (the default): the policy acts in [-1, 1]
        assert actions.min() >= -1.0 and actions.max() <= 1.0 and abs(actions.mean()) < 0.05
    else:
        assert actions.shape == (n, 3) and set(np.unique(actions[:, 0])) == {0.0, 1.0, 2.0}
        assert np.abs(actions[:, 1:]).max() <= 1.0
    greedy, zeros = random.get_exploration_action(dist, False, 0, gen())
    assert greedy.abs().sum() == 0 and zeros.abs().sum() == 0


def test_random_box_uses_the_policy_bounds():
    space = gym.spaces.Box(np.array([0.0, -np.inf], np.float32), np.array([4.0, np.inf], np.float32), dtype=np.float32)
    random = Random(space, policy_config={"normalize_actions": False})
    dist = type("Dist", (), {"inputs": torch.zeros((4000, 2))})()
    actions, logp = random.get_exploration_action(dist, True, 0, gen())
    assert 0.0 <= actions[:, 0].min() and actions[:, 0].max() <= 4.0 and actions[:, 0].mean() > 1.8
    assert actions[:, 1].abs().max() <= 1.0  # unbounded: [-1, 1]
    assert np.allclose(logp, -np.log(4.0 * 2.0))


def test_random_respects_action_masks():
    lowest = torch.finfo(torch.float32).min
    dist = Categorical(torch.tensor([[lowest, 0.0, 0.0]]).repeat(300, 1))
    actions, logp = Random(gym.spaces.Discrete(3)).get_exploration_action(dist, True, 0, gen())
    assert set(actions.tolist()) == {1, 2} and np.allclose(logp, -np.log(2))


@pytest.mark.parametrize("trainer_cls,spaces", [(DQNTrainer, CARTPOLE), (PPOTrainer, PENDULUM), (DDPGTrainer, PENDULUM)])
def test_random_acts_for_any_algorithm(trainer_cls, spaces):
    policy = make_policy(trainer_cls, spaces, seed=0, exploration_config={"type": "Random"})
    obs = np.zeros((2000, spaces[0].shape[0]), np.float32)
    actions, _, _ = policy.compute_actions(obs, explore=True)
    if isinstance(spaces[1], gym.spaces.Discrete):
        assert np.allclose(frequencies(actions, 2), 0.5, atol=0.05)
    else:  # all rows see the same observation, yet the actions spread over [-1, 1]
        assert actions.min() < -0.9 and actions.max() > 0.9
    greedy, _, _ = policy.compute_actions(obs[:3], explore=False)
    assert len(np.unique(greedy)) == 1


def test_random_rejects_an_unsupported_space():
    with pytest.raises(ValueError, match="'Random' cannot serve the action space: Unsupported action space"):
        Random(gym.spaces.Text(5))


def test_random_and_soft_q_by_name():
    assert isinstance(make_exploration({"exploration_config": {"type": "Random"}}, CARTPOLE[1]), Random)
    soft = make_exploration({"exploration_config": {"type": "SoftQ", "temperature": 3.0}}, CARTPOLE[1])
    assert soft.temperature == 3.0


def test_stochastic_sampling_random_phase_covers_multi_binary_and_tuple():
    for name in ("multi-binary", "tuple"):
        ss = StochasticSampling(SPACES[name], random_timesteps=10)
        dist = type("Dist", (), {"inputs": torch.zeros((50, 8))})()
        actions, logp = ss.get_exploration_action(dist, True, 0, gen())
        assert actions.shape == (50, 3) and logp.shape == (50,)
