"""VMAS scenarios through the slot API (`VmasSlots`): the adapter gives what VMAS gives stepped
directly, and the vectorised sampler samples a VMAS batch. Skipped without vmas (not an extra)."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.env.vector_multi_agent_env import VectorMultiAgentEnv
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.vector_multi_agent_sampler import VectorMultiAgentSampler
from tests.multi_agent_helpers import shared_ppo_worker as make_worker

vmas = pytest.importorskip("vmas", reason="vmas is not installed (pip install vmas; it is not an rlfleet extra)")

SB = SampleBatch
SCENE = "navigation"  # dense rewards (distance to goal)
SCENARIO = dict(continuous_actions=False, max_steps=6, n_agents=3)


@pytest.mark.parametrize("continuous", [False, True])
def test_same_seed_same_observations_and_rewards_as_vmas_stepped_directly(continuous):
    from rlfleet.env.vmas_slots import VmasSlots

    num_envs, seed = 3, 11
    scenario = {**SCENARIO, "continuous_actions": continuous}
    views = VmasSlots.make_batch(SCENE, num_envs, **scenario)
    adapter = VectorMultiAgentEnv(views, seeds=[seed, None, None])
    first = [adapter.reset_at(i) for i in range(num_envs)]
    direct = vmas.make_env(SCENE, num_envs=num_envs, device="cpu", seed=seed, terminated_truncated=True,
                           **scenario)
    for i in range(num_envs):
        obs = direct.reset_at(i)
    group = views[0].slot_groups["agents"]
    assert group.agents == ("agent_0", "agent_1", "agent_2")
    assert group.action_space.shape == (2,) if continuous else group.action_space.n == 9
    np.testing.assert_array_equal(np.stack([f.obs["agents"] for f in first]),
                                  np.stack([o.numpy() for o in obs], axis=1))
    rng = np.random.default_rng(0)
    rewarded = False
    for t in range(SCENARIO["max_steps"]):
        acts = (rng.uniform(-1, 1, (num_envs, 3, 2)).astype(np.float32) if continuous
                else rng.integers(0, 9, (num_envs, 3)))
        out = adapter.step({"agents": acts})
        obs, rew, term, trunc, _ = direct.step([acts[:, j].copy() for j in range(3)])
        np.testing.assert_array_equal(out.obs["agents"], np.stack([o.numpy() for o in obs], axis=1))
        np.testing.assert_array_equal(out.rewards["agents"], np.stack([r.numpy() for r in rew], axis=1))
        rewarded |= bool(out.rewards["agents"].any())
        last = t == SCENARIO["max_steps"] - 1
        assert (out.truncated_all == last).all() and not out.terminated_all.any()
        assert (out.alive["agents"] == (not last)).all() and (out.truncateds["agents"] == last).all()
    assert rewarded  # the comparison saw rewards, not only zeros


def test_views_step_together_and_are_made_in_order():
    from rlfleet.env.env_context import EnvContext
    from rlfleet.env.vmas_slots import VmasCreator, VmasSlots

    views = VmasSlots.make_batch(SCENE, 2, **SCENARIO)
    views[0].reset_slots(seed=1)
    with pytest.raises(ValueError, match="step together"):
        views[0].step_slots({"agents": np.zeros(3, np.int64)})
    creator = VmasCreator(SCENE, **SCENARIO)
    with pytest.raises(ValueError, match="sub-env 0 first"):
        creator(EnvContext(vector_index=1))
    # A batch of one sub-env steps alone (the dict API, e.g. on the general path).
    alone = creator(EnvContext())
    obs, _ = alone.reset(seed=2)
    obs, rew, term, trunc, _ = alone.step({aid: 0 for aid in obs})
    assert sorted(rew) == ["agent_0", "agent_1", "agent_2"] and not trunc["__all__"]


def test_a_vmas_batch_samples_on_the_vectorised_path_with_one_shared_policy():
    from rlfleet.env.vmas_slots import VmasCreator

    worker = make_worker(VmasCreator(SCENE, **SCENARIO), num_envs=2, fragment=9,
                         model={"fcnet_hiddens": [16]})
    assert isinstance(worker.sampler, VectorMultiAgentSampler)
    batch = worker.sample().policy_batches["shared"]
    assert batch.count == 2 * 3 * 9 and np.isfinite(batch[SB.ADVANTAGES]).all()
    assert batch[SB.DONES].sum() == 2 * 3  # one end (step 6) per sub-env and agent
    metrics = worker.get_metrics()
    assert len(metrics) == 2 and all(m.episode_length == 6 for m in metrics)
    worker.stop()


def test_seeded_resets_reproduce_the_batch():
    from rlfleet.env.vmas_slots import VmasSlots

    def first_and_later(seeds):
        views = VmasSlots.make_batch(SCENE, 2, **SCENARIO)
        first = [view.reset_slots(seed=seed).obs["agents"] for view, seed in zip(views, seeds)]
        later = views[1].reset_slots(seed=seeds[1]).obs["agents"]  # reseeds the shared stream
        return np.stack(first), later

    a, b, c = first_and_later([5, 6]), first_and_later([5, 6]), first_and_later([5, 7])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0][1], c[0][1])
