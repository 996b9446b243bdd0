"""The vectorised multi-agent path (slot envs, VectorMultiAgentSampler) against the general one."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
from rlfleet.env.pettingzoo import ParallelPettingZooEnv
from rlfleet.env.vector_multi_agent_env import DictSlotAdapter, SlotCopies, VectorMultiAgentEnv
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.multi_agent_sampler import MultiAgentSampler
from rlfleet.rollout.vector_multi_agent_sampler import VectorMultiAgentSampler
from tests.multi_agent_helpers import shared_ppo_worker as make_worker

SB = SampleBatch


def spread(ctx=None):
    from mpe2 import simple_spread_v3
    return ParallelPettingZooEnv(simple_spread_v3.parallel_env(N=3, max_cycles=25))


def _sorted(batch: SampleBatch) -> SampleBatch:
    order = np.lexsort((batch[SB.T], batch[SB.AGENT_INDEX], batch[SB.EPS_ID]))
    return SampleBatch({k: v[order] for k, v in batch.items()})


@pytest.mark.parametrize("count_by", ["env_steps", "agent_steps"])
def test_same_batches_as_the_general_path_on_a_pettingzoo_parallel_env(count_by):
    pytest.importorskip("mpe2")
    fragment = 30 if count_by == "env_steps" else 90  # 30 env steps of 2 envs of 3 agents either way
    ma = {"count_steps_by": count_by}
    general = make_worker(spread, fragment=fragment, multiagent_extra=ma)
    fast = make_worker(lambda ctx: DictSlotAdapter(spread()), fragment=fragment, multiagent_extra=ma)
    assert isinstance(general.sampler, MultiAgentSampler)
    assert isinstance(fast.sampler, VectorMultiAgentSampler)
    for _ in range(2):  # the second batch starts mid-episode (30 steps, episodes of 25)
        a, b = general.sample(), fast.sample()
        assert a.count == b.count == 60 and a.agent_steps() == b.agent_steps() == 180
        pa, pb = _sorted(a.policy_batches["shared"]), _sorted(b.policy_batches["shared"])
        assert sorted(pa.keys()) == sorted(pb.keys())
        for key in pa.keys():
            assert pa[key].dtype == pb[key].dtype, key
            np.testing.assert_allclose(pa[key], pb[key], rtol=1e-5, atol=1e-6, err_msg=key)
    ma, mb = general.get_metrics(), fast.get_metrics()
    assert [(m.episode_length, m.agent_rewards.keys()) for m in ma] == [
        (m.episode_length, m.agent_rewards.keys()) for m in mb]
    np.testing.assert_allclose([m.episode_reward for m in ma], [m.episode_reward for m in mb], rtol=1e-5)
    general.stop()
    fast.stop()


def _trajectories(batch: SampleBatch):
    """`{(eps_id, agent_index): rows}` in row order."""
    out = {}
    for j, key in enumerate(zip(batch[SB.EPS_ID].tolist(), batch[SB.AGENT_INDEX].tolist())):
        out.setdefault(key, []).append(j)
    return out


def test_agents_leaving_by_mask_two_cartpoles():
    # Two policies, one per slot; each agent leaves when its own pole falls.
    worker = make_worker(lambda ctx: SlotCopies("CartPole-v1", {"num_agents": 2}), num_envs=3, fragment=100,
                         policies=("p0", "p1"), mapping=lambda aid, episode, worker, **kw: f"p{aid}")
    assert isinstance(worker.sampler, VectorMultiAgentSampler)
    batch = worker.sample()
    assert batch.count == 300 and set(batch.policy_batches) == {"p0", "p1"}
    metrics = worker.get_metrics()
    assert metrics
    lengths = {}
    for pid, part in batch.policy_batches.items():
        assert set(part[SB.AGENT_INDEX].tolist()) == {int(pid[1])}
        for (eps, agent), rows in _trajectories(part).items():
            ts, dones = part[SB.T][rows], part[SB.DONES][rows]
            np.testing.assert_array_equal(ts, np.arange(ts[0], ts[0] + len(rows)))  # no gaps, no dead rows
            assert not dones[:-1].any()  # only a trajectory's last row ends it
            if dones[-1]:
                lengths.setdefault(eps, {})[agent] = ts[-1] + 1
                assert part[SB.REWARDS][rows].sum() == len(rows)  # CartPole: 1 per step alive
        assert np.isfinite(part[SB.ADVANTAGES]).all() and np.isfinite(part[SB.VF_PREDS]).all()
    # An episode lasts as long as its longest-lived agent; its reward sums both agents'.
    for m in metrics:
        ((a0, p0), r0), ((a1, p1), r1) = sorted(m.agent_rewards.items())
        assert (p0, p1) == ("p0", "p1") and m.episode_length == max(r0, r1) and m.episode_reward == r0 + r1
    whole = [(eps, ls) for eps, ls in lengths.items() if len(ls) == 2 and min(batch.policy_batches["p0"][SB.T][
        batch.policy_batches["p0"][SB.EPS_ID] == eps]) == 0]
    assert whole and all(max(ls.values()) in {m.episode_length for m in metrics} for _, ls in whole)
    worker.stop()


def test_slot_env_dict_api_and_vector_env_layout():
    from rlfleet.env.examples.cue_swarm import CueSwarm

    env = CueSwarm({"num_agents": 5, "episode_len": 2})
    obs, _ = env.reset(seed=1)
    assert sorted(obs) == list(range(5)) and env.observation_space.contains(obs[0])
    obs, rew, term, trunc, _ = env.step({a: 0 for a in obs})
    assert not trunc["__all__"] and set(rew) == set(range(5))
    obs, rew, term, trunc, _ = env.step({a: 0 for a in obs})
    assert trunc["__all__"] and not term["__all__"] and all(trunc[a] for a in range(5))
    venv = VectorMultiAgentEnv([CueSwarm({"num_agents": 5}) for _ in range(3)], seeds=[1, 2, 3])
    first = venv.reset_at(0)
    assert first.obs["agents"].shape == (5, 8) and first.alive["agents"].all()
    for i in (1, 2):
        venv.reset_at(i)
    step = venv.step({"agents": np.zeros((3, 5), np.int64)})
    assert step.obs["agents"].shape == (3, 5, 8) and step.rewards["agents"].shape == (3, 5)
    assert step.truncated_all.shape == (3,)
    with pytest.raises(ValueError, match="share one"):
        VectorMultiAgentEnv([CueSwarm({"num_agents": 5}), CueSwarm({"num_agents": 6})])


def test_settings_the_fast_path_lacks_send_the_worker_to_the_general_path(caplog):
    from rlfleet.env.examples.cue_swarm import CueSwarm

    worker = make_worker(CueSwarm, num_envs=1, fragment=20, batch_mode="complete_episodes",
                         env_config={"num_agents": 4})
    assert isinstance(worker.sampler, MultiAgentSampler)
    assert "complete_episodes" in caplog.text
    batch = worker.sample()  # the dict API of the same env
    assert batch.policy_batches["shared"].count == 4 * 20
    worker.stop()


def test_unknown_policy_and_bad_rewards_are_named():
    from rlfleet.env.checks import EnvCheckError
    from rlfleet.env.examples.cue_swarm import CueSwarm

    worker = make_worker(CueSwarm, num_envs=1, fragment=5, env_config={"num_agents": 4},
                         mapping=lambda aid, episode, worker, **kw: "shared" if aid < 3 else "nope")
    with pytest.raises(ValueError, match="'nope' for agent 3.*known policy ids: \\['shared'\\]"):
        worker.sample()
    worker.stop()

    class NaNSwarm(CueSwarm):
        def step_slots(self, actions):
            out = super().step_slots(actions)
            out.rewards["agents"][2] = np.nan
            return out

    worker = make_worker(NaNSwarm, num_envs=1, fragment=5, env_config={"num_agents": 4})
    with pytest.raises(EnvCheckError, match="agent 2"):
        worker.sample()
    with pytest.raises(EnvCheckError):  # until restart()
        worker.sample()
    worker.stop()


def test_ppo_with_parameter_sharing_learns_a_64_agent_swarm():
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.examples.cue_swarm import CueSwarm

    trainer = PPOTrainer(env=CueSwarm, config={
        "seed": 0, "num_workers": 0, "rollout_fragment_length": 6400, "train_batch_size": 6400,
        "sgd_minibatch_size": 1024, "num_sgd_iter": 10, "lr": 3e-3, "metrics_smoothing_episodes": 5,
        "model": {"fcnet_hiddens": [64, 64]}, "env_config": {"num_agents": 64},
        "multiagent": {"count_steps_by": "agent_steps", "policies": {"shared"},
                       "policy_mapping_fn": lambda aid, episode, worker, **kw: "shared"}})
    try:
        assert isinstance(trainer.workers.local_worker().sampler, VectorMultiAgentSampler)
        first = trainer.train()
        for _ in range(6):
            result = trainer.train()
    finally:
        trainer.stop()
    per_step = lambda r: r["policy_reward_mean"]["shared"] / 20  # noqa: E731  (episodes of 20 steps)
    # Random: 1 / 4 per agent step; after 7 iterations (44,800 agent steps) well above.
    assert per_step(first) < 0.3 and per_step(result) > 0.6, (per_step(first), per_step(result))


def test_agent_step_counting_with_dead_slots_reaches_the_target():
    worker = make_worker(lambda ctx: SlotCopies("CartPole-v1", {"num_agents": 2}), num_envs=2, fragment=150,
                         multiagent_extra={"count_steps_by": "agent_steps"})
    assert isinstance(worker.sampler, VectorMultiAgentSampler)
    for _ in range(3):
        batch = worker.sample()
        # 300 agent steps, overshooting by less than one step of 4 slots.
        assert 300 <= batch.agent_steps() < 304 and batch.count >= 75
    worker.stop()


def test_policies_added_and_removed_at_run_time_take_the_slots_from_the_next_sample():
    from rlfleet.env.examples.cue_swarm import CueSwarm

    worker = make_worker(CueSwarm, num_envs=2, fragment=10, env_config={"num_agents": 6})
    assert set(worker.sample().policy_batches) == {"shared"}
    worker.add_policy("odd", policy_mapping_fn=lambda aid, episode, worker, **kw: "odd" if aid % 2 else "shared")
    batch = worker.sample()
    assert set(batch.policy_batches) == {"shared", "odd"}
    assert set(batch.policy_batches["odd"][SB.AGENT_INDEX].tolist()) == {1, 3, 5}
    assert batch.policy_batches["odd"].count == batch.policy_batches["shared"].count == 10 * 2 * 3
    worker.remove_policy("odd", policy_mapping_fn=lambda aid, episode, worker, **kw: "shared")
    assert set(worker.sample().policy_batches) == {"shared"}
    metrics = worker.sample_episodes(3)  # evaluation: metrics only
    assert len(metrics) >= 3 and all(m.episode_length == 20 for m in metrics)
    assert {pid for m in metrics for _, pid in m.agent_rewards} == {"shared"}
    worker.stop()


def test_restart_after_an_env_error_resets_every_sub_env():
    from rlfleet.env.checks import EnvError
    from rlfleet.env.examples.cue_swarm import CueSwarm

    class FailsOnce(CueSwarm):
        failed = False

        def step_slots(self, actions):
            if not FailsOnce.failed:
                FailsOnce.failed = True
                raise RuntimeError("boom")
            return super().step_slots(actions)

    worker = make_worker(FailsOnce, num_envs=2, fragment=5, env_config={"num_agents": 3})
    with pytest.raises(EnvError, match="'FailsOnce', worker 0: the env's step\\(\\) raised RuntimeError: boom"):
        worker.sample()
    with pytest.raises(EnvError, match="boom"):  # until restart()
        worker.sample()
    worker.sampler.restart()
    assert worker.sample().policy_batches["shared"].count == 5 * 2 * 3
    worker.stop()


def test_vmas_missing_is_named_with_the_pip_command(monkeypatch):
    import sys

    from rlfleet.env.vmas_slots import VmasCreator

    monkeypatch.setitem(sys.modules, "vmas", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install vmas"):
        VmasCreator("navigation")


def _critic_policy(needs: bool):
    from rlfleet.algorithms.ppo import PPOTorchPolicy

    class CentralCriticPPO(PPOTorchPolicy):
        needs_other_agent_batches = needs
        seen: list = []

        def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
            CentralCriticPPO.seen.append({aid: b.count for aid, (_, b) in other_agent_batches.items()})
            return super().postprocess_trajectory(sample_batch, other_agent_batches, episode)

    return CentralCriticPPO


def test_a_policy_reading_other_agent_batches_gets_them_on_the_general_path(caplog):
    policy = _critic_policy(needs=True)
    worker = make_worker(lambda ctx: SlotCopies("CartPole-v1", {"num_agents": 2}), num_envs=1, fragment=10,
                         multiagent_extra={"policies": {"shared": (policy, None, None, None)}})
    assert isinstance(worker.sampler, MultiAgentSampler) and "other_agent_batches" in caplog.text
    worker.sample()
    assert policy.seen and all(len(others) == 1 for others in policy.seen)  # the other pole's trajectory
    worker.stop()


def test_reading_other_agent_batches_undeclared_on_the_vectorised_path_names_the_fix():
    worker = make_worker(lambda ctx: SlotCopies("CartPole-v1", {"num_agents": 2}), num_envs=1, fragment=10,
                         multiagent_extra={"policies": {"shared": (_critic_policy(needs=False), None, None, None)}})
    assert isinstance(worker.sampler, VectorMultiAgentSampler)
    with pytest.raises(ValueError, match="needs_other_agent_batches = True"):
        worker.sample()
    worker.stop()
