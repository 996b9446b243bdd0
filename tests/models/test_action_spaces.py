"""Action distributions for every space: shapes and dtypes over random nested spaces
(Hypothesis), composite log-probs as sums of parts, Bernoulli / squashed Gaussian math, and
PPO on MultiDiscrete, MultiBinary, Dict and Tuple action spaces with in-space env actions."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces as S

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # dev extra; the property test below is then skipped
    given = settings = st = None

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import MODEL_DEFAULTS
from rlfleet.models.catalog import ModelCatalog
from rlfleet.models.distributions import (
    Bernoulli,
    Categorical,
    DiagGaussian,
    MultiActionDistribution,
    SquashedGaussian,
)
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.utils.spaces import action_layout, env_actions, flat_action_size, flatten_action

# --- random nested action spaces ------------------------------------------------------------------
def _check_space(space, batch, normalize, seed):
    dist_class, num_outputs = ModelCatalog.get_action_dist(space, dict(MODEL_DEFAULTS))
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randn(batch, num_outputs, generator=gen)
    dist = dist_class(inputs)
    shape, dtype = action_layout(space)
    for actions in (dist.sample(gen), dist.deterministic_sample()):
        arr = actions.numpy()
        assert arr.shape == (batch, *shape), (arr.shape, shape)
        logp = dist.logp(actions)
        assert logp.shape == (batch,) and torch.isfinite(logp).all()
        # What the sampler stores (the flat layout's dtype) turned into env actions.
        for env_action in env_actions(arr.astype(dtype), space, normalize, not normalize):
            assert space.contains(env_action), (space, env_action)
            assert flatten_action(env_action, space).size == flat_action_size(space)
    assert dist.entropy().shape == (batch,)
    assert dist.kl(dist_class(torch.randn(batch, num_outputs, generator=gen))).shape == (batch,)


if st is not None:
    leaf = st.one_of(
        st.integers(1, 5).map(S.Discrete),
        st.lists(st.integers(1, 4), min_size=1, max_size=3).map(S.MultiDiscrete),
        st.integers(1, 4).map(S.MultiBinary),
        st.tuples(st.integers(1, 3), st.booleans()).map(
            lambda a: S.Box(-2.0, 3.0, (a[0],) if a[1] else (a[0], 2), np.float32)),
    )
    nested = st.recursive(
        leaf,
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3).map(lambda xs: S.Tuple(xs)),
            st.lists(children, min_size=1, max_size=3).map(
                lambda xs: S.Dict({f"k{i}": x for i, x in enumerate(xs)})),
        ),
        max_leaves=5,
    )

    @settings(max_examples=40, deadline=None)
    @given(space=nested, batch=st.integers(1, 4), normalize=st.booleans(), seed=st.integers(0, 2**16))
    def test_every_space_samples_in_space_with_finite_logp(space, batch, normalize, seed):
        _check_space(space, batch, normalize, seed)
else:
    @pytest.mark.skip(reason="hypothesis is not installed (pip install -e '.[dev]')")
    def test_every_space_samples_in_space_with_finite_logp():
        pass


@pytest.mark.parametrize("space", [
    S.Discrete(3), S.MultiDiscrete([2, 3]), S.MultiBinary(2), S.Box(-1, 1, (2, 2), np.float32),
    S.Dict({"a": S.Tuple([S.Discrete(2), S.Box(0, 1, (1,), np.float32)]), "b": S.MultiBinary(3)}),
])
def test_fixed_spaces_sample_in_space(space):
    _check_space(space, 3, True, 0)
    _check_space(space, 3, False, 1)


def test_flatten_action_round_trip():
    space = S.Dict({"a": S.Discrete(3, start=1), "b": S.Tuple([S.MultiDiscrete([2, 5]), S.Box(-1, 1, (2,))]),
                    "c": S.MultiBinary(3)})
    action = space.sample()
    flat = flatten_action(action, space)
    assert flat.shape == (flat_action_size(space),) == (1 + 2 + 2 + 3,)
    back = env_actions(flat[None], space, False, False)[0]
    assert back["a"] == action["a"] and np.array_equal(back["b"][0], action["b"][0])
    np.testing.assert_allclose(back["b"][1], action["b"][1], rtol=1e-6)
    assert np.array_equal(back["c"], action["c"]) and space.contains(back)


# --- distributions --------------------------------------------------------------------------------
def test_composite_logp_entropy_kl_are_sums_of_parts():
    space = S.Tuple([S.Discrete(3), S.Box(-1, 1, (2,)), S.MultiBinary(2)])
    dist_class, n = ModelCatalog.get_action_dist(space, dict(MODEL_DEFAULTS))
    assert n == 3 + 4 + 2
    inputs, other = torch.randn(5, n), torch.randn(5, n)
    dist = dist_class(inputs)
    assert isinstance(dist, MultiActionDistribution)
    actions = dist.sample()
    parts = [Categorical(inputs[:, :3]), DiagGaussian(inputs[:, 3:7]), Bernoulli(inputs[:, 7:])]
    others = [Categorical(other[:, :3]), DiagGaussian(other[:, 3:7]), Bernoulli(other[:, 7:])]
    expected = (parts[0].logp(actions[:, 0].long()) + parts[1].logp(actions[:, 1:3])
                + parts[2].logp(actions[:, 3:].long()))
    torch.testing.assert_close(dist.logp(actions), expected)
    torch.testing.assert_close(dist.entropy(), sum(p.entropy() for p in parts))
    torch.testing.assert_close(dist.kl(dist_class(other)), sum(p.kl(q) for p, q in zip(parts, others)))


def test_bernoulli_matches_torch():
    logits, other = torch.randn(6, 4), torch.randn(6, 4)
    ours, ref = Bernoulli(logits), torch.distributions.Bernoulli(logits=logits)
    actions = ours.sample(torch.Generator().manual_seed(0))
    assert actions.dtype == torch.int64 and set(actions.unique().tolist()) <= {0, 1}
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions.float()).sum(-1))
    torch.testing.assert_close(ours.entropy(), ref.entropy().sum(-1))
    kl = torch.distributions.kl_divergence(ref, torch.distributions.Bernoulli(logits=other)).sum(-1)
    torch.testing.assert_close(ours.kl(Bernoulli(other)), kl)
    assert torch.equal(ours.deterministic_sample(), (logits > 0).long())


def test_squashed_gaussian_logp_is_the_change_of_variables():
    # Moderate means and spreads keep the draws away from the bounds, where atanh (in the
    # reference's log_prob) loses precision.
    inputs = torch.randn(5, 4, generator=torch.Generator().manual_seed(0)) * 0.5 - torch.tensor([0.0, 0.0, 0.5, 0.5])
    low, high = torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0])
    dist = SquashedGaussian(inputs, low=low, high=high)
    actions, logp = dist.sample_logp(torch.Generator().manual_seed(1))
    assert bool(((actions >= low) & (actions <= high)).all())
    mean, log_std = inputs.chunk(2, -1)
    ref = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()),
        [torch.distributions.TanhTransform(), torch.distributions.AffineTransform((low + high) / 2, (high - low) / 2)])
    torch.testing.assert_close(logp, ref.log_prob(actions).sum(-1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dist.logp(actions), logp, rtol=1e-3, atol=1e-3)
    box = S.Box(-1, 1, (2,), np.float32)
    assert ModelCatalog.get_action_dist(box, dict(MODEL_DEFAULTS), dist_type="squashed_gaussian") == (
        SquashedGaussian, 4)
    with pytest.raises(ValueError, match="bounded"):
        ModelCatalog.get_action_dist(S.Box(-np.inf, np.inf, (2,)), dict(MODEL_DEFAULTS), dist_type="squashed_gaussian")


def test_unsupported_action_space_is_a_clear_error():
    with pytest.raises(ValueError, match="Unsupported action space.*custom_action_dist"):
        ModelCatalog.get_action_dist(S.Text(5), dict(MODEL_DEFAULTS))


# --- PPO on every space ---------------------------------------------------------------------------
class ActionCheckEnv(gym.Env):
    """Fails loudly on an action outside its space; rewards the first leaf's flat value."""

    def __init__(self, config):
        self.action_space = config["space"]
        self.observation_space = S.Box(-1.0, 1.0, (3,), np.float32)
        self.received = []
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise AssertionError(f"action {action!r} is outside {self.action_space}")
        self.received.append(action)
        self._t += 1
        reward = float(np.asarray(flatten_action(action, self.action_space)).reshape(-1)[0])
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), reward, self._t >= 10, False, {}


SPACES = {
    "multi_discrete": S.MultiDiscrete([3, 4]),
    "multi_binary": S.MultiBinary(4),
    "dict": S.Dict({"move": S.Discrete(3), "force": S.Box(-2.0, 2.0, (2,), np.float32),
                    "buttons": S.Tuple([S.MultiBinary(2), S.Discrete(2, start=1)])}),
    "tuple": S.Tuple([S.Discrete(2), S.MultiDiscrete([2, 3]), S.Dict({"x": S.Box(0.0, 1.0, (2, 2), np.float32)})]),
}


@pytest.mark.parametrize("name", sorted(SPACES))
def test_ppo_runs_on_the_space_and_the_env_gets_structured_actions(name):
    space = SPACES[name]
    trainer = PPOTrainer(env=ActionCheckEnv, config={
        "env_config": {"space": space}, "seed": 0, "rollout_fragment_length": 40, "train_batch_size": 40,
        "sgd_minibatch_size": 20, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]},
    })
    try:
        for _ in range(2):
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"]) and stats["total_loss"] != 0.0
        env = trainer.workers.local_worker().env.envs[0]
        assert len(env.received) >= 80
        sample = env.received[-1]
        assert type(sample) is type(space.sample())
        action = trainer.compute_single_action(np.zeros(3, np.float32))
        assert space.contains(action)
        batch = trainer.workers.local_worker().sample()
        assert batch[SampleBatch.ACTIONS].shape == (40, *action_layout(space)[0])
    finally:
        trainer.stop()
