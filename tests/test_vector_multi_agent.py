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

SB = SampleBatch


def make_worker(creator, num_envs=2, fragment=30, seed=0, policies=("shared",), mapping=None, **extra):
    from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy
    from rlfleet.config import merge_configs, validate_config
    from rlfleet.rollout.rollout_worker import RolloutWorker

    mapping = mapping or (lambda aid, episode, worker, **kw: "shared")
    config = merge_configs(DEFAULT_CONFIG, dict(
        num_envs_per_worker=num_envs, rollout_fragment_length=fragment, seed=seed,
        multiagent={"policies": set(policies), "policy_mapping_fn": mapping}, **extra))
    validate_config(config)
    return RolloutWorker(env_creator=creator, policy_class=PPOTorchPolicy, config=config)


def spread(ctx=None):
    from mpe2 import simple_spread_v3
    return ParallelPettingZooEnv(simple_spread_v3.parallel_env(N=3, max_cycles=25))


def _sorted(batch: SampleBatch) -> SampleBatch:
    order = np.lexsort((batch[SB.T], batch[SB.AGENT_INDEX], batch[SB.EPS_ID]))
    return SampleBatch({k: v[order] for k, v in batch.items()})


def test_same_batches_as_the_general_path_on_a_pettingzoo_parallel_env():
    pytest.importorskip("mpe2")
    general = make_worker(spread)
    fast = make_worker(lambda ctx: DictSlotAdapter(spread()))
    assert isinstance(general.sampler, MultiAgentSampler)
    assert isinstance(fast.sampler, VectorMultiAgentSampler)
    for _ in range(2):  # the second batch starts mid-episode (30 steps, episodes of 25)
        a, b = general.sample(), fast.sample()
        assert a.count == b.count == 60
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
