"""Two lanes for one learner update (rlfleet.fast.lanes): the same bits either way, the
choice by timing, and how many lanes a process may use."""
from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.fast.lanes import LaneChooser, Lanes, learner_lanes
from rlfleet.algorithms.ddpg.numpy_learner import DDPGNumpyLearner
from rlfleet.algorithms.sac.numpy_learner import SACNumpyLearner
from rlfleet.algorithms.td3 import TD3Trainer
from rlfleet.policy.numpy_learner import LEARN_ON_BATCH, planned_numpy_learner
from rlfleet.policy.sample_batch import SampleBatch
from tests.helpers import optimizer_arrays
from tests.numpy_learner_helpers import DDPG_SMALL_NETS, ddpg_policy, sac_policy, transitions


def test_pair_runs_second_piece_on_another_thread_and_returns_both():
    lanes = Lanes(2)
    seen = []
    a, b = lanes.pair(lambda: (seen.append(threading.get_ident()), 1)[1],
                      lambda: (seen.append(threading.get_ident()), 2)[1])
    assert (a, b) == (1, 2)
    assert len(set(seen)) == 2
    lanes.close()


@pytest.mark.parametrize("failing", ["first", "second"])
def test_pair_reraises_either_pieces_error(failing):
    lanes = Lanes(2)

    def boom():
        raise RuntimeError(failing)

    with pytest.raises(RuntimeError, match=failing):
        lanes.pair(boom if failing == "first" else (lambda: 1), boom if failing == "second" else (lambda: 1))
    lanes.close()


def test_second_lane_keeps_the_callers_floating_point_error_handling():
    lanes = Lanes(2)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            lanes.pair(lambda: 0, lambda: np.float32(1.0) / np.zeros(1, np.float32))
    lanes.close()


class FakeClock:
    """Each update takes `cost[mode]` seconds, mode read from the chooser."""

    def __init__(self, costs):
        self.costs, self.now, self.chooser = costs, 0.0, None

    def __call__(self):
        return self.now

    def run(self, updates):
        modes = []
        for _ in range(updates):
            self.chooser.start()
            modes.append(self.chooser.parallel)
            self.now += self.costs[self.chooser.parallel]
            self.chooser.finish()
        return modes


@pytest.mark.parametrize("faster", [True, False])
def test_chooser_keeps_the_faster_mode_and_checks_again(faster):
    clock = FakeClock({faster: 1.0, not faster: 2.0})
    chooser = clock.chooser = LaneChooser(2, warmup=2, probes=4, interval=10, clock=clock)
    modes = clock.run(2 + 8 + 10)
    assert modes[:2] == [False, False]  # warm-up on one lane
    assert sorted(modes[2:10]) == [False] * 4 + [True] * 4  # probes alternate
    assert modes[10:20] == [faster] * 10
    clock.costs = {faster: 2.0, not faster: 1.0}  # the load changed
    modes = clock.run(4 + 10)
    assert modes[4:] == [not faster] * 10


def test_chooser_with_one_lane_never_probes():
    clock = FakeClock({True: 1.0, False: 5.0})
    clock.chooser = LaneChooser(1, warmup=0, probes=2, interval=3, clock=clock)
    assert clock.run(20) == [False] * 20


def test_learner_lanes_rule(monkeypatch):
    monkeypatch.setattr("rlfleet.fast.lanes._usable_cores", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert learner_lanes({"num_workers": 0, "num_cpus_for_driver": 1}) == 2
    assert learner_lanes({"num_workers": 2, "num_cpus_for_driver": 1}) == 1
    assert learner_lanes({"num_workers": 2, "num_cpus_for_driver": 2}) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert learner_lanes({"num_workers": 0, "num_cpus_for_driver": 1}) == 1
    monkeypatch.setattr("rlfleet.fast.lanes._usable_cores", lambda: 1)
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert learner_lanes({"num_workers": 0}) == 1



def _learner(policy, learner_class, parallel: bool):
    learner = planned_numpy_learner(policy, LEARN_ON_BATCH)
    assert isinstance(learner, learner_class), policy.fast_plan
    learner.lane_chooser.fixed = parallel
    return learner


def _assert_same_bits(serial, parallel, data, updates: int = 4) -> None:
    rng = np.random.default_rng(0)
    for _ in range(updates):
        rows = rng.choice(len(data), 64, replace=False)
        batch = SampleBatch({k: v[rows] for k, v in data.items()})
        parallel.generator.set_state(serial.generator.get_state())
        serial.learn_on_batch(batch.copy())
        parallel.learn_on_batch(batch.copy())
    wa, wb = serial.get_weights(), parallel.get_weights()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
    oa, ob = optimizer_arrays(serial), optimizer_arrays(parallel)
    for k in oa:
        np.testing.assert_array_equal(oa[k], ob[k], err_msg=k)


def test_sac_update_is_the_same_on_two_lanes():
    data = transitions("Pendulum-v1", 300)
    env = gym.make("Pendulum-v1")
    serial, parallel = (sac_policy(env.observation_space, env.action_space) for _ in range(2))
    _learner(serial, SACNumpyLearner, False)
    learner = _learner(parallel, SACNumpyLearner, True)
    _assert_same_bits(serial, parallel, data)
    assert learner.lanes.parallel


def test_td3_update_is_the_same_on_two_lanes():
    data = transitions("Pendulum-v1", 300)
    env = gym.make("Pendulum-v1")
    serial, parallel = (ddpg_policy(TD3Trainer, env, **DDPG_SMALL_NETS) for _ in range(2))
    _learner(serial, DDPGNumpyLearner, False)
    learner = _learner(parallel, DDPGNumpyLearner, True)
    _assert_same_bits(serial, parallel, data, updates=5)  # TD3's delayed actor steps included
    assert learner.lanes.parallel
