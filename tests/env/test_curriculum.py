"""Curricula (`env_task_fn` + TaskSettableEnv) on local and remote workers; the fake sampler;
pluggable samplers (`sample_collector`)."""
from __future__ import annotations

import numpy as np
import pytest

from rlfleet.algorithms.pg.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.env import TaskSettableEnv
from rlfleet.env.examples import CurriculumCorridorEnv, corridor_curriculum
from rlfleet.env.task_settable import apply_env_task_fn
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.fake_sampler import FakeSampler

SB = SampleBatch


def _levels_seen(trainer) -> list:
    return trainer.workers.foreach_env_with_context(lambda env, ctx: (ctx.worker_index, ctx.vector_index,
                                                                      env.get_task()))


def test_the_level_rises_with_the_return_and_the_envs_run_it():
    trainer = PPOTrainer(env=CurriculumCorridorEnv, config={
        "seed": 0, "env_task_fn": corridor_curriculum, "env_config": {"max_level": 3}, "num_envs_per_worker": 4,
        "rollout_fragment_length": 50, "train_batch_size": 400, "sgd_minibatch_size": 100, "num_sgd_iter": 5,
        "lr": 1e-3, "model": {"fcnet_hiddens": [32]}})
    try:
        history = []
        for _ in range(8):
            result = trainer.train()
            (levels,) = _levels_seen(trainer)
            assert len({level for _, _, level in levels}) == 1  # every sub-env got the task
            history.append((result["episode_reward_mean"], levels[0][2], result["episode_len_mean"]))
        rewards, levels, lengths = zip(*history)
        assert levels[0] == 0 and levels[-1] == 3, history
        # After each iteration, the level moved up exactly when that iteration's return reached 0.9.
        for (_, level, _), (reward, next_level, _) in zip(history, history[1:]):
            assert next_level == (min(level + 1, 3) if reward >= 0.9 else level), history
        # The envs ran the new levels: longer corridors, longer episodes.
        assert lengths[-1] > 2 * lengths[0], history
        env = trainer.workers.local_worker().env.envs[0]
        assert env.level == 3 and env.length == 24
    finally:
        trainer.stop()


@pytest.mark.usefixtures("ray_session")
def test_local_and_remote_workers_get_the_task():
    seen = []

    def to_worker_level(train_results, env, ctx):
        # Each worker's sub-envs go to a level of their own: proof that the call reached them.
        return min(ctx.worker_index + train_results["training_iteration"], env.max_level)

    trainer = PGTrainer(env=CurriculumCorridorEnv, config={
        "seed": 0, "num_workers": 1, "num_cpus_per_worker": 0.25, "create_env_on_driver": True,
        "env_task_fn": to_worker_level, "num_envs_per_worker": 2, "rollout_fragment_length": 20,
        "train_batch_size": 40})
    try:
        trainer.train()
        seen = sorted(level for per_worker in _levels_seen(trainer) for level in per_worker)
    finally:
        trainer.stop()
    # The local worker (index 0, with envs of its own here) and remote worker 1, two sub-envs each.
    assert seen == [(0, 0, 1), (0, 1, 1), (1, 0, 2), (1, 1, 2)], seen


def test_apply_env_task_fn_sets_only_changed_tasks_and_names_the_key():
    class Counting(TaskSettableEnv):
        def __init__(self):
            self.task, self.sets = 0, 0

        def get_task(self):
            return self.task

        def set_task(self, task):
            self.task, self.sets = task, self.sets + 1

    env = Counting()
    assert apply_env_task_fn(lambda r, e, c: 0, {}, env, None) == 0 and env.sets == 0
    assert apply_env_task_fn(lambda r, e, c: r["level"], {"level": 2}, env, None) == 2 and env.sets == 1
    with pytest.raises(ValueError, match="'env_task_fn' is set, but the env"):
        apply_env_task_fn(lambda r, e, c: 1, {}, object(), None)
    with pytest.raises(ValueError, match="env_task_fn"):
        PPOTrainer(env=CurriculumCorridorEnv, config={"env_task_fn": "not a function"})


# --- fake sampler ---------------------------------------------------------------------------------
def test_fake_sampler_serves_the_first_batch_every_iteration():
    trainer = PPOTrainer(env="CartPole-v1", config={
        "seed": 0, "fake_sampler": True, "rollout_fragment_length": 50, "train_batch_size": 100,
        "num_envs_per_worker": 2, "sgd_minibatch_size": 50, "num_sgd_iter": 1})
    try:
        worker = trainer.workers.local_worker()
        assert isinstance(worker.sampler, FakeSampler)
        first = worker.sample()
        second = worker.sample()
        assert first is not second  # a copy: a learner writing into it changes nothing later
        for key in (SB.OBS, SB.ACTIONS, SB.REWARDS, SB.EPS_ID):
            np.testing.assert_array_equal(first[key], second[key])
        second[SB.OBS][:] = 0
        np.testing.assert_array_equal(worker.sample()[SB.OBS], first[SB.OBS])
        before = trainer.get_weights()["default_policy"]
        results = [trainer.train() for _ in range(3)]
        assert [r["timesteps_total"] for r in results] == [100, 200, 300]
        after = trainer.get_weights()["default_policy"]
        assert any(not np.allclose(before[k], after[k]) for k in before)
        np.testing.assert_array_equal(worker.sample()[SB.OBS], first[SB.OBS])
        # Evaluation still plays real episodes.
        assert len(worker.sample_episodes(1)) >= 1
    finally:
        trainer.stop()


# --- pluggable samplers ---------------------------------------------------------------------------
class ConstantSampler:
    """A minimal Sampler: the worker's default sampler, with every reward set to 1."""

    def __init__(self, *, worker, settings):
        from rlfleet.rollout.sampler import SingleAgentSampler

        self.settings = settings
        pid = next(iter(worker.policy_map))
        self._inner = SingleAgentSampler(worker=worker, vector_env=worker.env, policy=worker.policy_map[pid],
                                         preprocessor=worker.preprocessors[pid], obs_filter=worker.filters[pid],
                                         callbacks=worker.callbacks, settings=settings)
        self.steps_since_sync = 0

    def sample(self):
        batch = self._inner.sample()
        batch[SB.REWARDS] = np.ones_like(batch[SB.REWARDS])
        return batch

    def sample_episodes(self, num_episodes):
        return self._inner.sample_episodes(num_episodes)

    def pop_metrics(self):
        return self._inner.pop_metrics()

    def perf_stats(self):
        return {}

    def restart(self):
        self._inner.restart()

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


class NotASampler:
    def __init__(self, *, worker, settings):
        pass


@pytest.mark.parametrize("collector", [ConstantSampler, f"{__name__}:ConstantSampler"])
def test_sample_collector_class_or_path(collector):
    trainer = PGTrainer(env="CartPole-v1", config={
        "seed": 0, "sample_collector": collector, "rollout_fragment_length": 20, "train_batch_size": 20})
    try:
        assert type(trainer.workers.local_worker().sampler).__name__ == "ConstantSampler"
        assert trainer.workers.local_worker().sample()[SB.REWARDS].tolist() == [1.0] * 20
        trainer.train()
    finally:
        trainer.stop()


def test_sample_collector_errors_name_the_key():
    with pytest.raises(ValueError, match="'sample_collector': NotASampler does not implement the Sampler"):
        PGTrainer(env="CartPole-v1", config={"sample_collector": NotASampler})
    with pytest.raises(ValueError, match="sample_collector"):
        PGTrainer(env="CartPole-v1", config={"sample_collector": 3})
