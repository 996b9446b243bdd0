"""MAgent2 battles through the slot API (`MAgentSlots`): actions reach the right agents, and the
vectorised sampler runs a battle with one shared policy per team."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.vector_multi_agent_sampler import VectorMultiAgentSampler
from tests.multi_agent_helpers import shared_ppo_worker as make_worker

battle_v4 = pytest.importorskip("magent2.environments.battle_v4")

SB = SampleBatch


def battle(ctx=None, map_size=16, max_cycles=20):
    from rlfleet.env.magent2_slots import MAgentSlots

    return MAgentSlots(battle_v4.parallel_env(map_size=map_size, max_cycles=max_cycles))


def test_each_teams_actions_reach_its_own_agents():
    env = battle()
    assert {g: (s.num_slots, s.observation_space.shape) for g, s in env.slot_groups.items()} == {
        "red": (6, (845,)), "blue": (6, (845,))}
    first = env.reset_slots(seed=3)
    assert first.alive["red"].all() and first.alive["blue"].all()
    # Actions 13-20 attack, at a cost of 0.1 on top of the step reward of -0.005.
    attack = {"red": np.array([17, 13, 10, 5, 6, 0]), "blue": np.array([1, 0, 3, 17, 13, 19])}
    step = env.step_slots(attack)
    for team, acts in attack.items():
        np.testing.assert_allclose(step.rewards[team], np.where(acts >= 13, -0.105, -0.005), atol=1e-6)
    for _ in range(19):
        step = env.step_slots({g: np.zeros(6, np.int64) for g in attack})
    assert step.truncated_all and not step.terminated_all and not step.alive["red"].any()


def test_a_battle_samples_on_the_vectorised_path_with_a_policy_per_team():
    worker = make_worker(lambda ctx: battle(map_size=16, max_cycles=10), num_envs=2, fragment=15,
                         policies=("red", "blue"), mapping=lambda aid, episode, worker, **kw: aid.split("_")[0],
                         model={"fcnet_hiddens": [32]})
    assert isinstance(worker.sampler, VectorMultiAgentSampler)
    batch = worker.sample()
    assert batch.count == 30
    for team in ("red", "blue"):
        part = batch.policy_batches[team]
        assert part[SB.OBS].shape[1:] == (845,) and np.isfinite(part[SB.ADVANTAGES]).all()
        assert 0 < part.count <= 6 * 2 * 15
    metrics = worker.get_metrics()
    assert metrics and all(m.episode_length <= 10 for m in metrics)
    assert {pid for m in metrics for _, pid in m.agent_rewards} == {"red", "blue"}
    worker.stop()
