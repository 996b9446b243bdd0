"""Exploration: EpsilonGreedy, GaussianNoise, OrnsteinUhlenbeckNoise, schedules, registry."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.exploration.epsilon_greedy import EpsilonGreedy
from rlfleet.exploration.noise import GaussianNoise, OrnsteinUhlenbeckNoise
from rlfleet.exploration.stochastic_sampling import StochasticSampling, make_exploration
from rlfleet.models.distributions import Categorical
from rlfleet.utils.schedules import (
    ConstantSchedule, ExponentialSchedule, LinearSchedule, PiecewiseSchedule, PolynomialSchedule, make_schedule,
    schedule_from_spec,
)


class PointMass:
    """A stand-in for DDPG's deterministic distribution."""

    def __init__(self, actions):
        self.inputs = actions

    def deterministic_sample(self):
        return self.inputs


def gen(seed=0):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


# --- schedules ------------------------------------------------------------------------------------
def test_exponential_and_polynomial_schedules():
    exp = ExponentialSchedule(100, initial_p=2.0, decay_rate=0.5)
    assert exp(0) == 2.0 and exp(100) == pytest.approx(1.0) and exp(250) == pytest.approx(2.0 * 0.5 ** 2.5)
    poly = PolynomialSchedule(100, final_p=0.1, initial_p=1.1, power=2.0)
    assert poly(0) == pytest.approx(1.1)
    assert poly(50) == pytest.approx(0.1 + 1.0 * 0.25)
    assert poly(100) == pytest.approx(0.1) and poly(1000) == pytest.approx(0.1)
    lin = PolynomialSchedule(10, final_p=0.0, initial_p=1.0, power=1.0)
    assert [lin(t) for t in (0, 5, 10)] == pytest.approx([1.0, 0.5, 0.0])


def test_schedule_specs():
    assert isinstance(schedule_from_spec(0.3), ConstantSchedule)
    assert schedule_from_spec([[0, 1.0], [10, 0.0]])(5) == pytest.approx(0.5)
    s = schedule_from_spec({"type": "ExponentialSchedule", "schedule_timesteps": 10, "decay_rate": 0.1})
    assert s(10) == pytest.approx(0.1)
    assert make_schedule(1.0, {"type": "LinearSchedule", "schedule_timesteps": 4, "final_p": 0.0})(2) == 0.5
    assert make_schedule(1e-3, [[0, 1e-3], [100, 1e-4]])(100) == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="unknown.*ExponentialSchedule"):
        schedule_from_spec({"type": "Nope"}, "lr_schedule")
    with pytest.raises(ValueError, match="lr_schedule"):
        schedule_from_spec({"type": "LinearSchedule", "bad": 1}, "lr_schedule")
    with pytest.raises(ValueError, match="sorted"):
        PiecewiseSchedule([(10, 1.0), (0, 0.0)])
    assert LinearSchedule(10, 0.0)(20) == 0.0


# --- EpsilonGreedy ----------------------------------------------------------------------------------
def test_epsilon_schedule_values():
    eg = EpsilonGreedy(gym.spaces.Discrete(3), initial_epsilon=1.0, final_epsilon=0.02, epsilon_timesteps=10000)
    assert [eg.epsilon_schedule(t) for t in (0, 5000, 10000, 50000)] == pytest.approx([1.0, 0.51, 0.02, 0.02])
    warm = EpsilonGreedy(gym.spaces.Discrete(3), initial_epsilon=1.0, final_epsilon=0.0, epsilon_timesteps=100,
                         warmup_timesteps=50)
    assert [warm.epsilon_schedule(t) for t in (0, 50, 100, 150)] == pytest.approx([1.0, 1.0, 0.5, 0.0])
    custom = EpsilonGreedy(gym.spaces.Discrete(3), epsilon_schedule={"type": "ExponentialSchedule",
                                                                    "schedule_timesteps": 10, "decay_rate": 0.5})
    assert custom.epsilon_schedule(10) == pytest.approx(0.5)


def test_epsilon_greedy_random_fraction_and_greedy_without_explore():
    n, batch = 4, 20000
    eg = EpsilonGreedy(gym.spaces.Discrete(n), initial_epsilon=1.0, final_epsilon=0.0, epsilon_timesteps=100)
    q = torch.zeros(batch, n)
    q[:, 2] = 1.0
    dist = Categorical(q)
    actions, logp = eg.get_exploration_action(dist, False, 0, gen())
    assert (actions == 2).all() and (logp == 0).all()
    actions, _ = eg.get_exploration_action(dist, True, 50, gen())  # epsilon 0.5
    off_greedy = (actions != 2).float().mean().item()
    assert off_greedy == pytest.approx(0.5 * (n - 1) / n, abs=0.015)
    # Past the decay, epsilon 0: greedy even when exploring.
    assert (eg.get_exploration_action(dist, True, 500, gen())[0] == 2).all()
    assert eg.get_info()["cur_epsilon"] == 0.0


def test_epsilon_greedy_uses_the_given_generator_and_respects_masks():
    eg = EpsilonGreedy(gym.spaces.Discrete(5), initial_epsilon=1.0, final_epsilon=1.0, epsilon_timesteps=1)
    q = torch.zeros(1000, 5)
    q[:, [1, 3]] = float("-inf")  # masked actions
    a1, _ = eg.get_exploration_action(Categorical(q), True, 0, gen(7))
    a2, _ = eg.get_exploration_action(Categorical(q), True, 0, gen(7))
    assert torch.equal(a1, a2)
    assert set(a1.tolist()) == {0, 2, 4}
    before = torch.random.get_rng_state()
    eg.get_exploration_action(Categorical(q), True, 0, gen(8))
    assert torch.equal(before, torch.random.get_rng_state())  # the global RNG is untouched


def test_epsilon_greedy_needs_discrete():
    with pytest.raises(ValueError, match="Discrete"):
        EpsilonGreedy(gym.spaces.Box(-1, 1, (2,)))


# --- Gaussian and OU noise -------------------------------------------------------------------------
BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32))


def test_gaussian_noise_phases_and_schedule():
    gn = GaussianNoise(BOX, random_timesteps=100, stddev=0.2, initial_scale=1.0, final_scale=0.5, scale_timesteps=100)
    assert [gn.scale_schedule(t) for t in (0, 100, 150, 200, 1000)] == pytest.approx([1.0, 1.0, 0.75, 0.5, 0.5])
    mu = torch.zeros(20000, 2)
    # Random phase: uniform over the normalised range [-1, 1].
    rand, logp = gn.get_exploration_action(PointMass(mu), True, 10, gen())
    assert rand.min() >= -1 and rand.max() <= 1 and rand.std(0).min() > 0.5 and (logp == 0).all()
    # Noise phase: deterministic action + scale * stddev * N(0, 1), clipped.
    noisy, _ = gn.get_exploration_action(PointMass(mu), True, 150, gen())
    assert noisy.std(0).numpy() == pytest.approx([0.75 * 0.2] * 2, rel=0.05)
    expected = (torch.randn((20000, 2), generator=gen()) * 0.75 * 0.2).clamp(-1, 1)
    assert torch.allclose(noisy, expected)
    # explore=False: the deterministic action, untouched.
    det, _ = gn.get_exploration_action(PointMass(mu + 0.3), False, 150, gen())
    assert torch.equal(det, mu + 0.3)


def test_gaussian_noise_clips_to_the_policy_bounds():
    at_edge = torch.ones(1000, 2)
    gn = GaussianNoise(BOX, random_timesteps=0, stddev=1.0, final_scale=1.0)
    out, _ = gn.get_exploration_action(PointMass(at_edge), True, 0, gen())
    assert out.max() <= 1.0 and out.min() < 1.0
    # Without normalize_actions the policy acts in the Box's own bounds.
    raw = GaussianNoise(BOX, random_timesteps=10, policy_config={"normalize_actions": False})
    rand, _ = raw.get_exploration_action(PointMass(torch.zeros(5000, 2)), True, 0, gen())
    assert rand[:, 1].max() > 9 and rand[:, 1].min() >= 0 and rand[:, 0].min() < -1.5


def test_ou_noise_follows_the_recursion():
    ou = OrnsteinUhlenbeckNoise(BOX, random_timesteps=0, ou_theta=0.15, ou_sigma=0.2, ou_base_scale=0.1,
                                initial_scale=1.0, final_scale=1.0, scale_timesteps=1)
    g, ref_g = gen(3), gen(3)
    mu = torch.zeros(2, 2)
    x = np.zeros((2, 2))
    for _ in range(5):
        out, _ = ou.get_exploration_action(PointMass(mu), True, 10, g)
        x = x + (-0.15 * x + 0.2 * torch.randn((2, 2), generator=ref_g).numpy())
        expected = np.clip(0.1 * x * 2.0, -1, 1)  # normalised bounds: high - low = 2
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-7)
    det, _ = ou.get_exploration_action(PointMass(mu), False, 10, g)
    assert torch.equal(det, mu)
    state = ou.get_state()
    other = OrnsteinUhlenbeckNoise(BOX)
    other.set_state(state)
    assert torch.allclose(other.ou_state, ou.ou_state)


# --- registry -----------------------------------------------------------------------------------
def test_make_exploration_by_name_class_and_path_passing_context():
    g = gen()
    box_cfg = {"exploration_config": {"type": "GaussianNoise", "stddev": 0.3}, "normalize_actions": False}
    gn = make_exploration(box_cfg, BOX, generator=g)
    assert isinstance(gn, GaussianNoise) and gn.stddev == 0.3 and gn.high[1] == 10.0
    eg = make_exploration({"exploration_config": {"type": EpsilonGreedy}}, gym.spaces.Discrete(2), generator=g)
    assert isinstance(eg, EpsilonGreedy)
    ou = make_exploration({"exploration_config": {"type": "rlfleet.exploration.noise:OrnsteinUhlenbeckNoise"}}, BOX)
    assert isinstance(ou, OrnsteinUhlenbeckNoise)
    assert isinstance(make_exploration({}, BOX), StochasticSampling)

    class Strict:  # takes no context: none is forced on it
        def __init__(self, action_space, *, x=1):
            self.x = x

    assert make_exploration({"exploration_config": {"type": Strict, "x": 2}}, BOX, generator=g).x == 2
    with pytest.raises(ValueError, match="unknown"):
        make_exploration({"exploration_config": {"type": "Nope"}}, BOX)
    with pytest.raises(ValueError, match="could not be imported"):
        make_exploration({"exploration_config": {"type": "no.such.Module"}}, BOX)
