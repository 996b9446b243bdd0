"""Env checks at the boundary (rlfleet.env.checks): observations outside their space, NaN
observations and rewards, env exceptions: each an error saying where (env id, worker,
sub-env, episode, step), on both samplers, locally and from a remote worker on a real Ray."""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.env import EnvCheckError, EnvError
from rlfleet.env.checks import BOX_TOLERANCE, ObsBatchCheck, observation_problem, reward_problem
from rlfleet.env.multi_agent_env import make_multi_agent
from rlfleet.trainer import WorkerFailureError
from tests.envs import BOX3, FaultyEnv, make_worker

def faulty_worker(fault, num_envs=3, bad_index=1, **config):
    env_config = {"fault": fault, "bad_index": bad_index}
    env_config.update(config.pop("env_config", {}))
    return make_worker(FaultyEnv, dict({"num_envs_per_worker": num_envs, "rollout_fragment_length": 20,
                                        "env_config": env_config, "model": {"fcnet_hiddens": [8]}}, **config))


# --- the detailed check of one observation ----------------------------------------------
@pytest.mark.parametrize("space,obs,expected", [
    (BOX3, np.zeros(5), "observation of shape (5,) for Box(-1.0, 1.0, (3,), float32)"),
    (BOX3, np.array([0.0, np.nan, 0.0]), "observation[1] is nan"),
    (BOX3, np.array([0.0, 0.0, 1.5]), "observation[2] = 1.5 is above the bound 1"),
    (BOX3, np.array([-2.0, 0.0, 0.0]), "observation[0] = -2 is below the bound -1"),
    (BOX3, np.zeros(3, np.complex64), "dtype complex64"),
    (BOX3, "abc", "numbers expected"),
    (spaces.Box(0, 5, (2,), np.int64), np.array([0.5, 1.0]), "cannot be cast safely to int64"),
    (spaces.Box(-np.inf, np.inf, (2,)), np.array([np.inf, 0.0]), "observation[0] is inf"),
    (spaces.Discrete(3), 3, "observation 3 outside Discrete(3)"),
    (spaces.Discrete(3), -1, "observation -1 outside Discrete(3)"),
    (spaces.Discrete(3), 1.0, "dtype float64 for Discrete(3)"),
    (spaces.MultiDiscrete([2, 3]), [1, 3], "observation[1] = 3 outside MultiDiscrete"),
    (spaces.MultiBinary(3), [0, 2, 1], "values other than 0 and 1"),
    (spaces.Tuple((spaces.Discrete(2), BOX3)), (1,), "with 1 components"),
    (spaces.Tuple((spaces.Discrete(2), BOX3)), (1, np.zeros(4)), "observation[1] of shape (4,)"),
    (spaces.Dict({"a": spaces.Discrete(2), "b": BOX3}), {"a": 0}, "keys ['a'] for a Dict space with keys"),
    (spaces.Dict({"a": spaces.Discrete(2), "b": BOX3}), {"a": 0, "b": np.full(3, np.nan)},
     "observation['b'][0] is nan"),
], ids=lambda v: str(v)[:30])
def test_observation_problem_names_what_is_wrong(space, obs, expected):
    problem = observation_problem(obs, space)
    assert problem is not None and expected in problem, problem


def test_out_of_bounds_error_names_the_ways_out():
    """Some envs declare approximate bounds (LunarLander-v3's lander climbs past y = 2.5):
    the error says how to keep training on them."""
    problem = observation_problem(np.array([0.0, 0.0, 1.5]), BOX3)
    assert "TransformObservation" in problem and "disable_env_checking: True" in problem, problem


@pytest.mark.parametrize("space", [
    BOX3, spaces.Box(0, 255, (4, 4, 3), np.uint8), spaces.Box(-np.inf, np.inf, (2, 2)), spaces.Discrete(4, start=-2),
    spaces.MultiDiscrete([[2, 3], [4, 5]]), spaces.MultiBinary(4),
    spaces.Dict({"x": spaces.Tuple((spaces.Discrete(2), BOX3)), "y": spaces.Box(0, 1, (2,))}),
], ids=str)
def test_valid_observations_pass(space):
    space.seed(0)
    for _ in range(20):
        assert observation_problem(space.sample(), space) is None
    if isinstance(space, spaces.Box) and space.dtype == np.float32:
        # float64 for a float32 Box, and round-off beyond the bounds, are fine.
        assert observation_problem(space.sample().astype(np.float64), space) is None
        edge = np.where(np.isfinite(space.high), space.high, 0.0) + BOX_TOLERANCE / 10
        assert observation_problem(edge.astype(np.float32), space) is None


def test_reward_problem():
    assert reward_problem(1) is None and reward_problem(np.float32(-2.5)) is None
    assert "nan" in reward_problem(float("nan"))
    assert "inf" in reward_problem(np.inf)
    assert "a number expected" in reward_problem("1")


INF = np.inf


@pytest.mark.parametrize("low,high", [
    ([-1.0] * 3, [1.0] * 3),                  # the same bounds everywhere: min / max
    ([-4.8, -INF, -0.42], [4.8, INF, 0.42]),  # CartPole-like: scaled, symmetric
    ([-1.2, -0.07, -INF], [0.6, 0.07, INF]),  # MountainCar-like: scaled, shifted
    ([0.0, -1.0, -INF], [INF, 1.0, INF]),     # one-sided: two comparisons
], ids=["uniform", "symmetric", "shifted", "one-sided"])
def test_obs_batch_check_modes(low, high):
    space = spaces.Box(np.array(low, np.float32), np.array(high, np.float32), dtype=np.float32)
    check = ObsBatchCheck(space)
    space.seed(0)
    inside = np.stack([np.clip(space.sample(), -1e6, 1e6) for _ in range(8)]).astype(np.float32)
    assert check.ok(inside)
    for j in range(3):  # each element's bounds, within the tolerance, outside it; NaN; inf
        for bound, sign in ((space.low[j], -1), (space.high[j], 1)):
            if not np.isfinite(bound):
                continue
            batch = inside.copy()
            batch[5, j] = bound + sign * 0.5 * BOX_TOLERANCE * max(1.0, abs(bound))
            assert check.ok(batch), (j, bound)
            batch[5, j] = bound + sign * 3 * BOX_TOLERANCE * max(1.0, abs(bound))
            assert not check.ok(batch), (j, bound)
        for bad in (np.nan, np.inf, -np.inf):
            batch = inside.copy()
            batch[2, j] = bad
            assert not check.ok(batch), (j, bad)


def test_obs_batch_check_integer_and_custom_spaces():
    assert ObsBatchCheck(spaces.Box(0, 255, (2, 2, 1), np.uint8)).trivial
    small = ObsBatchCheck(spaces.Box(0, 10, (2,), np.uint8))
    assert small.ok(np.array([[0, 10]], np.uint8)) and not small.ok(np.array([[0, 11]], np.uint8))
    assert ObsBatchCheck(spaces.Discrete(3)).trivial  # not a Box: nothing to compare with


def test_env_error_pickles_with_its_location():
    err = EnvCheckError("reward is nan", env_id="X-v0", worker_index=2, sub_env_index=1, episode_id=7, step=3)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is EnvCheckError and isinstance(back, ValueError) and isinstance(back, RuntimeError)
    assert str(back) == str(err) == "Env 'X-v0', worker 2, sub-env 1, episode 7, step 3: reward is nan"
    assert back.context() == err.context()


# --- the fast path ------------------------------------------------------------------------
# Sub-env 1 of 3 misbehaves at step 3 of its first episode; episode ids count from 1 in
# sub-env order on worker 0, so its first episode is episode 2.
WHERE = "Env 'FaultyEnv', worker 0, sub-env 1, episode 2, step 3: "


@pytest.mark.parametrize("fault,what", [
    ("shape", "observation of shape (5,) for Box(-1.0, 1.0, (3,), float32)"),
    ("nan_obs", "observation[1] is nan"),
    ("inf_obs", "observation[1] is -inf"),
    ("bounds", "observation[2] = 1.5 is above the bound 1"),
    ("dtype", "observation of dtype complex64"),
    ("nan_reward", "reward is nan"),
    ("inf_reward", "reward is inf"),
])
def test_fast_path_names_where_and_what(fault, what):
    worker = faulty_worker(fault)
    with pytest.raises(EnvCheckError) as info:
        worker.sample()
    assert str(info.value).startswith(WHERE + what), str(info.value)
    assert (info.value.sub_env_index, info.value.episode_id, info.value.step) == (1, 2, 3)


@pytest.mark.parametrize("fault,what", [
    ("nan_reward", "reward is nan"),
    ("inf_reward", "reward is inf"),
    ("nan_obs", r"observation\[1\] is nan"),
    ("inf_obs", r"observation\[1\] is -inf"),
    ("bounds", r"observation\[2\] = 1.5 is above the bound 1 of Box\(-1.0, 1.0, \(3,\), float32\)"),
])
@pytest.mark.parametrize("observation_filter", ["NoFilter", "MeanStdFilter"])
def test_fast_path_checks_after_the_first_episode(fault, what, observation_filter):
    # The vectorised checks, in sub-env 1's 3rd episode (without a filter the bounds are
    # checked once per chunk, with one at every step: the error names the step either way).
    worker = faulty_worker(fault, env_config={"episode": 3}, observation_filter=observation_filter)
    with pytest.raises(EnvCheckError, match=r"^Env 'FaultyEnv', worker 0, sub-env 1, episode 8, step 3: " + what):
        worker.sample()
    if observation_filter == "MeanStdFilter":  # the filter never saw the bad observation
        assert np.isfinite(worker.filters["default_policy"].rs.mean).all()


def test_fast_path_checks_at_resets():
    # A bad first observation, from reset (step 0), at the start and after an episode end.
    worker = faulty_worker("shape", env_config={"at": 0})
    with pytest.raises(EnvCheckError, match=r"sub-env 1, episode 2, step 0: observation of shape \(5,\)"):
        worker.sample()
    worker = faulty_worker("nan_obs", env_config={"at": 0, "episode": 2})
    with pytest.raises(EnvCheckError, match=r"sub-env 1, episode 5, step 0: observation\[1\] is nan"):
        worker.sample()
    for observation_filter in ("NoFilter", "MeanStdFilter"):  # bounds: per chunk, or per step
        worker = faulty_worker("bounds", env_config={"at": 0, "episode": 3}, observation_filter=observation_filter)
        with pytest.raises(EnvCheckError, match=r"sub-env 1, episode 8, step 0: observation\[2\] = 1.5 is above"):
            worker.sample()


def test_near_bounds_is_no_error():
    worker = faulty_worker("near_bounds")
    assert worker.sample().count == 60


def test_env_exception_is_reraised_with_where_and_the_original_chained():
    worker = faulty_worker("raise")
    with pytest.raises(EnvError) as info:
        worker.sample()
    err = info.value
    assert not isinstance(err, EnvCheckError)
    assert str(err) == WHERE + "the env's step() raised ZeroDivisionError: boom"
    assert isinstance(err.__cause__, ZeroDivisionError)
    # The envs are mid-step: the sampler refuses to go on (a remote worker then counts as
    # failed), until restart() resets every sub-env.
    with pytest.raises(EnvError, match="ZeroDivisionError: boom"):
        worker.sample()
    worker.sampler.restart()
    assert worker.sample().count == 60
    # From reset(): step 0.
    worker = faulty_worker("raise", env_config={"at": 0})
    with pytest.raises(EnvError, match=r"sub-env 1, episode 2, step 0: the env's reset\(\) raised ZeroDivisionError"):
        worker.sample()


def test_old_api_step_is_named():
    worker = faulty_worker("old_api")
    with pytest.raises(EnvCheckError, match=r"step 3: the env's step\(\) returned a tuple of 4; Gymnasium envs"):
        worker.sample()


def test_disable_env_checking_skips_the_per_step_checks_after_the_first_episode():
    # Episode 2 of sub-env 0 (of 1) returns a NaN reward: caught by default ...
    with pytest.raises(EnvCheckError, match="episode 2, step 3: reward is nan"):
        faulty_worker("nan_reward", num_envs=1, bad_index=0, env_config={"episode": 2}).sample()
    # ... and passed through with disable_env_checking (the learner's NaN guard is the
    # next line of defence; see tests/policy/test_nan_guard.py).
    worker = faulty_worker("nan_reward", num_envs=1, bad_index=0, env_config={"episode": 2},
                           disable_env_checking=True)
    batch = worker.sample()
    assert np.isnan(batch["rewards"]).sum() == 1
    # The first episode is always checked.
    with pytest.raises(EnvCheckError, match="episode 1, step 3: reward is nan"):
        faulty_worker("nan_reward", num_envs=1, bad_index=0, disable_env_checking=True).sample()


def test_trainer_error_names_the_env_id():
    trainer = PPOTrainer(env=FaultyEnv, config={
        "env_config": {"fault": "nan_reward", "bad_index": 0}, "num_envs_per_worker": 2,
        "rollout_fragment_length": 10, "train_batch_size": 20, "sgd_minibatch_size": 10, "num_sgd_iter": 1,
        "model": {"fcnet_hiddens": [8]}})
    try:
        with pytest.raises(EnvCheckError, match=r"^Env 'FaultyEnv', worker 0, sub-env 0, episode 1, step 3: reward"):
            trainer.train()
    finally:
        trainer.stop()


def test_gymnasium_env_with_a_bad_observation_names_its_id():
    # A real Gymnasium env whose observations leave its declared space (here: a wrapper
    # that shrinks CartPole's space to 3 values).
    class Shrunk(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = spaces.Box(-5.0, 5.0, (3,), np.float32)

        def observation(self, obs):
            return obs

    worker = make_worker(lambda ctx: Shrunk(gym.make("CartPole-v1")), {"model": {"fcnet_hiddens": [8]}})
    with pytest.raises(EnvCheckError, match=r"^Env 'CartPole-v1', worker 0, sub-env 0, episode 1, step 0: "
                                            r"observation of shape \(4,\) for Box\(-5.0, 5.0, \(3,\), float32\)"):
        worker.sample()


# --- the multi-agent path ------------------------------------------------------------------
MultiFaulty = make_multi_agent(FaultyEnv)


@pytest.mark.parametrize("fault,what", [
    ("nan_reward", "reward is nan"),
    ("bounds", "observation[2] = 1.5 is above the bound 1"),
    ("shape", "observation of shape (5,)"),
    ("raise", "the env's step() raised ZeroDivisionError: boom"),
])
def test_multi_agent_path_names_the_agent(fault, what):
    worker = make_worker(MultiFaulty, {"env_config": {"fault": fault, "num_agents": 2}, "num_envs_per_worker": 2,
                                       "rollout_fragment_length": 20, "model": {"fcnet_hiddens": [8]},
                                       "multiagent": {"policies": {"p0", "p1"},
                                                      "policy_mapping_fn": lambda aid, *a, **k: f"p{aid}"}})
    with pytest.raises(EnvError) as info:
        worker.sample()
    message = str(info.value)
    assert message.startswith("Env 'MultiAgent_FaultyEnv', worker 0, sub-env 0, episode 1, step 3"), message
    assert what in message
    if fault == "raise":  # the env as a whole raised, not one agent
        assert "agent" not in message
    else:
        assert "step 3, agent 0: " in message
    if fault in ("bounds", "shape"):
        assert message.endswith("(policy 'p0')")
    with pytest.raises(EnvError):  # stopped until restart()
        worker.sample()


def test_multi_agent_disable_env_checking():
    config = {"env_config": {"fault": "nan_reward", "episode": 2, "num_agents": 2}, "rollout_fragment_length": 20,
              "model": {"fcnet_hiddens": [8]}, "multiagent": {"policies": {"p0", "p1"},
                                                             "policy_mapping_fn": lambda aid, *a, **k: f"p{aid}"}}
    with pytest.raises(EnvCheckError, match="episode 2, step 3, agent 0: reward is nan"):
        make_worker(MultiFaulty, config).sample()
    batch = make_worker(MultiFaulty, dict(config, disable_env_checking=True)).sample()
    assert np.isnan(batch.policy_batches["p0"]["rewards"]).any()


# --- a remote worker whose env raises: a failed worker -------------------------------------------
@pytest.mark.timeout(300)
def test_remote_env_error_is_a_worker_failure(ray_session, tmp_path: Path):
    marker = tmp_path / "fail"
    trainer = PPOTrainer(env=FaultyEnv, logdir=str(tmp_path), config={
        "num_workers": 1, "num_cpus_per_worker": 0.25, "num_envs_per_worker": 2, "rollout_fragment_length": 10,
        "train_batch_size": 40, "sgd_minibatch_size": 20, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]},
        "env_config": {"fault": "raise", "bad_index": 1, "min_worker": 1, "marker": str(marker)}})
    try:
        assert trainer.train()["num_healthy_workers"] == 1
        local_pid, pid = trainer.workers.foreach_worker(lambda w: os.getpid())  # local worker first
        # Neither option: the failure surfaces, with the env's location.
        marker.touch()
        with pytest.raises(WorkerFailureError) as info:
            trainer.train()
        message = str(info.value)
        assert "Env 'FaultyEnv', worker 1, sub-env 1, episode " in message, message
        assert "the env's step() raised ZeroDivisionError: boom" in message
        assert not marker.exists()
        # recreate_failed_workers: the worker whose env raised fails its health check (its
        # sampler stopped) and is replaced by a new process; training goes on.
        trainer.config["recreate_failed_workers"] = True
        result = trainer.train()
        assert result["num_healthy_workers"] == 1 and result["training_iteration"] == 2
        assert trainer.workers.remote_worker_indices() == [1]
        assert trainer.workers.foreach_worker(lambda w: os.getpid())[1] not in (pid, local_pid)
        # ignore_worker_failures: the worker is dropped (here the only one: a clear error).
        trainer.config["recreate_failed_workers"] = False
        trainer.config["ignore_worker_failures"] = True
        marker.touch()
        with pytest.raises(WorkerFailureError, match="No healthy remote rollout worker is left"):
            trainer.train()
    finally:
        trainer.stop()
