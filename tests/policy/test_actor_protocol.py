"""The acting protocol (policy/actor.py): every algorithm's policy acts through
`policy.actor(...)`, the NumPy and torch backends agree, and the samplers act through it alone."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.ddpg import DDPGTrainer
from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.impala import ImpalaTrainer
from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.algorithms.td3 import TD3Trainer
from rlfleet.config import validate_config
from rlfleet.policy.actor import Actor, TorchActor
from rlfleet.policy.numpy_actor import NumpyActor, numpy_actor_unavailable
from rlfleet.policy.policy import Policy
from rlfleet.policy.sample_batch import SampleBatch
from tests.envs import make_worker
from tests.tiny_models import TwoLayerModel

SB = SampleBatch
CARTPOLE = (gym.spaces.Box(-5.0, 5.0, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(np.array([-1.0, -1.0, -8.0], np.float32), np.array([1.0, 1.0, 8.0], np.float32)),
            gym.spaces.Box(-2.0, 2.0, (1,), np.float32))


def make_policy(trainer_cls, spaces, **config):
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, config)
    validate_config(cfg)
    cfg["worker_index"] = 0
    return trainer_cls._policy_class(spaces[0], spaces[1], cfg)


def _obs(space: gym.Space, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(np.float32)


# (case, trainer, spaces, config, the backend its actor uses)
CASES = [
    ("ppo", PPOTrainer, CARTPOLE, {}, "numpy"),
    ("ppo-pendulum", PPOTrainer, PENDULUM, {}, "numpy"),
    ("pg", PGTrainer, CARTPOLE, {}, "numpy"),
    ("impala", ImpalaTrainer, CARTPOLE, {"vtrace": False}, "numpy"),
    ("dqn", DQNTrainer, CARTPOLE, {}, "torch"),
    ("sac", SACTrainer, PENDULUM, {}, "torch"),
    ("ddpg", DDPGTrainer, PENDULUM, {}, "torch"),
    ("td3", TD3Trainer, PENDULUM, {}, "torch"),
    ("lstm-ppo", PPOTrainer, CARTPOLE, {"model": {"use_lstm": True, "lstm_cell_size": 8}}, "torch"),
    ("custom-model", PPOTrainer, CARTPOLE, {"model": {"custom_model": TwoLayerModel}}, "torch"),
]


@pytest.mark.parametrize("name, trainer_cls, spaces, config, backend", CASES, ids=[c[0] for c in CASES])
def test_every_algorithm_acts_through_its_actor(name, trainer_cls, spaces, config, backend):
    """A chunk of 3 steps on 4 rows: actions in the action space, the state carried for a
    recurrent policy, and `finish()` giving exactly the `deferred` columns for all 12 rows."""
    policy = make_policy(trainer_cls, spaces, seed=0, **config)
    actor = policy.actor(True, 1000, steps=3, num_envs=4)
    assert isinstance(actor, Actor) and actor.backend == backend, numpy_actor_unavailable(policy, 1000)
    state = [np.repeat(s[None], 4, axis=0) for s in policy.get_initial_state()]
    prev_actions = np.zeros((4, *spaces[1].shape), np.float32) if isinstance(spaces[1], gym.spaces.Box) \
        else np.zeros(4, np.int64)
    for t in range(3):
        actions, state_out, extra = actor.act(_obs(spaces[0], 4, t), state, prev_actions, np.zeros(4, np.float32),
                                              timestep=1000 + 4 * t)
        if isinstance(spaces[1], gym.spaces.Discrete):
            assert set(np.asarray(actions).tolist()) <= {0, 1} and len(actions) == 4
        else:  # Box: normalized actions (unsquashed into the env's bounds by the sampler)
            assert np.shape(actions) == (4, 1) and np.isfinite(actions).all()
        assert len(state_out) == len(state) == policy.num_state_tensors()
        assert not set(actor.deferred) & set(extra)
        assert all(len(v) == 4 for v in extra.values())
        state, prev_actions = state_out, actions
    columns = actor.finish()
    assert set(columns) == set(actor.deferred)
    for key, column in columns.items():
        assert column.shape == (12,) and column.dtype == np.float32 and np.isfinite(column).all(), key
    assert all(len(c) == 0 for c in actor.finish().values())  # nothing acted on since


def _torch_only(policy):
    """The same policy acting with torch alone (what the `fast_path` plan may ask for)."""
    policy.acting.numpy_reason = "torch asked for by the test"
    return policy


@pytest.mark.parametrize("chunk", [True, False], ids=["chunk", "per-call"])
@pytest.mark.parametrize("trainer_cls, spaces, config", [
    (PPOTrainer, CARTPOLE, {}), (PPOTrainer, PENDULUM, {}), (PGTrainer, CARTPOLE, {}),
    (ImpalaTrainer, PENDULUM, {"vtrace": False})], ids=["ppo-cartpole", "ppo-pendulum", "pg-cartpole",
                                                         "impala-pendulum"])
def test_numpy_and_torch_backends_agree(trainer_cls, spaces, config, chunk):
    """Same seed, explore=False: the same actions, and the NumPy actor's deferred columns
    equal to what the torch actor gives at each step (1e-5)."""
    fast = make_policy(trainer_cls, spaces, seed=4, **config)
    slow = _torch_only(make_policy(trainer_cls, spaces, seed=4, **config))
    hint = {"steps": 5, "num_envs": 6} if chunk else {}
    np_actor, torch_actor = fast.actor(False, 0, **hint), slow.actor(False, 0, **hint)
    assert isinstance(np_actor, NumpyActor) and isinstance(torch_actor, TorchActor)
    expected = []
    for t in range(5):
        obs = _obs(spaces[0], 6, t)
        a_np, _, extra_np = np_actor.act(obs, timestep=6 * t)
        a_torch, _, extra_torch = torch_actor.act(obs, timestep=6 * t)
        np.testing.assert_allclose(a_np, a_torch, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(extra_np[SB.ACTION_DIST_INPUTS], extra_torch[SB.ACTION_DIST_INPUTS],
                                   rtol=1e-5, atol=1e-5)
        expected.append(extra_torch)
    deferred = np_actor.finish()
    assert set(deferred) == set(np_actor.deferred) and (SB.VF_PREDS in deferred) == fast.records_values
    assert torch_actor.finish() == {}
    for key, column in deferred.items():
        np.testing.assert_allclose(column, np.concatenate([e[key] for e in expected]), rtol=1e-5, atol=1e-5,
                                   err_msg=key)


def test_the_numpy_choice_says_why_not():
    assert numpy_actor_unavailable(make_policy(PPOTrainer, CARTPOLE), 0) is None
    lstm = make_policy(PPOTrainer, CARTPOLE, model={"use_lstm": True, "lstm_cell_size": 8})
    assert "recurrent" in numpy_actor_unavailable(lstm, 0)
    assert "overrides compute_actions" in numpy_actor_unavailable(make_policy(DQNTrainer, CARTPOLE), 0)
    assert "not a FullyConnectedNetwork" in numpy_actor_unavailable(make_policy(SACTrainer, PENDULUM), 0)
    off = make_policy(PPOTrainer, CARTPOLE, fast_path="off")
    assert numpy_actor_unavailable(off, 10**6) == "fast_path is 'off'"
    assert off.actor(True, 10**6).backend == "torch"
    warm = make_policy(PPOTrainer, CARTPOLE, exploration_config={"type": "StochasticSampling",
                                                                  "random_timesteps": 50})
    assert "random" in numpy_actor_unavailable(warm, 49) and numpy_actor_unavailable(warm, 50) is None
    # Columns read per step (defer=False): every column from `act`, through compute_actions.
    actor = make_policy(PPOTrainer, CARTPOLE).actor(True, 0, defer=False)
    assert actor.backend == "torch" and actor.deferred == ()
    assert {SB.ACTION_LOGP, SB.VF_PREDS} <= set(actor.act(_obs(CARTPOLE[0], 3, 0))[2])


class ScriptedPolicy(Policy):
    """A policy with compute_actions alone: the default `Policy.actor` acts through it."""

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore=None, timestep=None, **kwargs):
        self.timesteps.append(timestep)
        return (np.asarray(obs_batch)[:, 2] > 0).astype(np.int64), [], {}

    def get_weights(self):
        return {}


def test_a_policy_with_compute_actions_only_acts_through_the_default_actor():
    policy = ScriptedPolicy(*CARTPOLE, {})
    policy.timesteps = []
    actor = policy.actor(None, 7)
    assert actor.backend == "torch" and actor.finish() == {}
    obs = _obs(CARTPOLE[0], 5, 0)
    np.testing.assert_array_equal(actor.act(obs)[0], obs[:, 2] > 0)
    actor.act(obs, timestep=12)
    assert policy.timesteps == [7, 12]


def test_the_single_agent_sampler_acts_through_one_actor_per_chunk():
    w = make_worker("CartPole-v1", {"num_envs_per_worker": 2, "rollout_fragment_length": 10, "seed": 1})
    policy = w.get_policy()
    made, real = [], policy.actor

    def recording_actor(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    policy.actor = recording_actor
    batch = w.sample()
    assert len(made) == 1 and made[0].backend == "numpy" and batch.count == 20
    with torch.no_grad():
        policy.model({SB.OBS: torch.as_tensor(batch[SB.OBS])}, [], None)
        values = policy.model.value_function().numpy()
    np.testing.assert_allclose(batch[SB.VF_PREDS], values, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("spaces", [CARTPOLE, PENDULUM], ids=["cartpole", "pendulum"])
def test_numpy_actor_logp_of_sampled_actions_is_the_torch_distributions(spaces):
    """explore=True: the deferred log-likelihoods and probabilities of the actions drawn are
    those of torch's distribution over the same inputs (1e-5)."""
    policy = make_policy(PPOTrainer, spaces, seed=2)
    actor = policy.actor(True, 0, steps=4, num_envs=5)
    steps = [actor.act(_obs(spaces[0], 5, t)) for t in range(4)]
    deferred = actor.finish()
    inputs = torch.as_tensor(np.concatenate([extra[SB.ACTION_DIST_INPUTS] for _, _, extra in steps]))
    actions = torch.as_tensor(np.concatenate([a for a, _, _ in steps]))
    expected = policy.dist_class(inputs, policy.model).logp(actions).numpy()
    np.testing.assert_allclose(deferred[SB.ACTION_LOGP], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(deferred[SB.ACTION_PROB], np.exp(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spaces", [CARTPOLE, PENDULUM], ids=["cartpole", "pendulum"])
def test_numpy_actor_finish_of_some_rows_is_those_rows_of_all(spaces):
    """`finish(rows)` (what the vectorised multi-agent sampler asks for its live slots) gives
    exactly the asked rows' deferred columns, as `finish()` computes them (the value pass on
    fewer rows may round differently: 1e-6)."""
    actors = [make_policy(PPOTrainer, spaces, seed=3).actor(True, 0, steps=3, num_envs=4) for _ in range(2)]
    for t in range(3):
        a, b = (actor.act(_obs(spaces[0], 4, t))[0] for actor in actors)
        np.testing.assert_array_equal(a, b)
    rows = np.array([0, 2, 3, 7, 11])
    every, some = actors[0].finish(), actors[1].finish(rows)
    assert set(some) == set(every) == {SB.ACTION_LOGP, SB.ACTION_PROB, SB.VF_PREDS}
    for key, column in some.items():
        assert column.shape == (len(rows),), key
        np.testing.assert_allclose(column, every[key][rows], rtol=1e-6, atol=1e-6, err_msg=key)
