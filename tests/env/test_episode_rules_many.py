"""`EpisodeRules.end_many` (the batched samplers' and EnvPool's rule) against the scalar `end`."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rlfleet.env.episode_rules import EpisodeRules

ALL_RULES = [EpisodeRules(h, soft, no_done) for h, soft, no_done in
             itertools.product([None, 1, 3, 7], [False, True], [False, True])]


@pytest.mark.parametrize("rules", ALL_RULES, ids=repr)
def test_end_many_matches_end_on_random_inputs(rules):
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        terminated = rng.random(n) < 0.2
        truncated = rng.random(n) < 0.2
        lengths = rng.integers(1, 10, n)
        ends = rules.end_many(terminated, truncated, lengths)
        for field in ends:
            assert field.dtype == bool and field.shape == (n,)
        for i in range(n):
            want = rules.end(bool(terminated[i]), bool(truncated[i]), int(lengths[i]))
            got = (bool(ends.over[i]), bool(ends.terminal[i]), bool(ends.reset[i]))
            assert got == tuple(want), (rules, terminated[i], truncated[i], lengths[i])


@pytest.mark.parametrize("rules", ALL_RULES, ids=repr)
def test_end_many_leaves_its_inputs_alone(rules):
    terminated = np.array([True, False, False, False])
    truncated = np.array([False, True, False, False])
    lengths = np.array([9, 9, 9, 1])
    copies = terminated.copy(), truncated.copy(), lengths.copy()
    rules.end_many(terminated, truncated, lengths)
    for given, kept in zip((terminated, truncated, lengths), copies):
        np.testing.assert_array_equal(given, kept)


def test_end_many_every_case_of_the_table():
    """Each row of the rules table (episode_rules.py) in one vector: env end, truncation,
    horizon hit (soft and hard), neither."""
    terminated = np.array([True, False, False, False])
    truncated = np.array([False, True, False, False])
    lengths = np.array([5, 5, 5, 4])
    hard = EpisodeRules(horizon=5).end_many(terminated, truncated, lengths)
    assert hard.over.tolist() == [True, True, True, False]
    assert hard.terminal.tolist() == [True, False, True, False]
    assert hard.reset.tolist() == [True, True, True, False]
    soft = EpisodeRules(horizon=5, soft_horizon=True, no_done_at_end=True).end_many(terminated, truncated, lengths)
    assert soft.over.tolist() == [True, True, True, False]
    assert soft.terminal.tolist() == [False, False, False, False]
    assert soft.reset.tolist() == [True, True, False, False]


@pytest.mark.parametrize("horizon, no_done, episode_len, last_terminal", [
    (3, False, 5, True),     # the horizon ends each episode, terminal (no bootstrap)
    (3, True, 5, False),     # ... bootstrapping under no_done_at_end
    (None, False, 4, False),  # the env's own time limit (truncated): not terminal
])
def test_vectorised_multi_agent_sampler_ends_episodes_by_the_rules(horizon, no_done, episode_len, last_terminal):
    from rlfleet.env.examples.cue_swarm import CueSwarm
    from rlfleet.policy.sample_batch import SampleBatch as SB
    from rlfleet.rollout.vector_multi_agent_sampler import VectorMultiAgentSampler
    from tests.envs import make_worker

    length = episode_len if horizon is None else horizon
    worker = make_worker(CueSwarm, {"env_config": {"num_agents": 3, "episode_len": episode_len},
                                    "num_envs_per_worker": 2, "rollout_fragment_length": 4 * length,
                                    "horizon": horizon, "no_done_at_end": no_done,
                                    "multiagent": {"policies": {"shared"},
                                                   "policy_mapping_fn": lambda aid, *a, **k: "shared"}})
    assert isinstance(worker.sampler, VectorMultiAgentSampler)
    part = worker.sample().policy_batches["shared"]
    ends = part[SB.DONES]
    # Every (episode, agent) trajectory is `length` rows and only its last row ends it.
    assert ends.sum() == 4 * 2 * 3
    np.testing.assert_array_equal(part[SB.T][ends], np.full(ends.sum(), length - 1))
    np.testing.assert_array_equal(part[SB.TERMINATEDS][ends], np.full(ends.sum(), last_terminal))
    assert not part[SB.TERMINATEDS][~ends].any()
    assert [m.episode_length for m in worker.get_metrics()] == [length] * 8
    worker.stop()
