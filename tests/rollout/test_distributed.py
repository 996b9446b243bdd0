"""Remote rollout and evaluation workers, remote envs, fault tolerance, on a real local Ray.

All Ray tests share the session's one local Ray (`ray_session` in conftest.py: 2 logical
CPUs, 127.0.0.1 only), ask for half a CPU per worker and keep batches tiny: each remote
worker is a process that imports torch, so actors are the cost here, not training.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.common.sampling import synchronous_parallel_sample
from rlfleet.callbacks import DefaultCallbacks
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.trainer import Trainer, WorkerFailureError
from tests.helpers import kill_remote_worker, load_tuned_example

# A hung test (e.g. actors that cannot be scheduled) fails instead of blocking the suite.
pytestmark = pytest.mark.timeout(300)

# 0.25 CPU per worker: the module's shared trainer (2 workers) and any one other trainer
# (up to 3 workers) fit in the session's 2 logical CPUs together.
SMALL = {
    "num_cpus_per_worker": 0.25,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 25,
    "train_batch_size": 150,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 7,
}


def make(trainer_cls=PPOTrainer, tmp_path=None, **overrides):
    config = dict(SMALL, **overrides)
    if trainer_cls is not PPOTrainer:
        config = {k: v for k, v in config.items() if k not in ("sgd_minibatch_size", "num_sgd_iter")}
    return trainer_cls(env="CartPole-v1", config=config, logdir=str(tmp_path) if tmp_path else None)


# --- no Ray needed ------------------------------------------------------------------
def test_import_rlfleet_does_not_import_ray():
    code = ("import sys, rlfleet; from rlfleet.algorithms.ppo import PPOTrainer; "
            "from rlfleet.rollout.worker_set import WorkerSet; assert 'ray' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_default_resource_request_bundles():
    req = PPOTrainer.default_resource_request({
        "num_workers": 2, "num_cpus_per_worker": 2, "num_gpus_per_worker": 0.5, "num_gpus": 1,
        "num_cpus_for_driver": 3, "custom_resources_per_worker": {"sensor": 1},
        "evaluation_interval": 1, "evaluation_num_workers": 1,
        "evaluation_config": {"num_cpus_per_worker": 1, "num_gpus_per_worker": 0},
        "placement_strategy": "SPREAD",
    })
    assert req.bundles == [
        {"CPU": 3, "GPU": 1},
        {"CPU": 2, "GPU": 0.5, "sensor": 1},
        {"CPU": 2, "GPU": 0.5, "sensor": 1},
        {"CPU": 1, "GPU": 0, "sensor": 1},
    ]
    assert req.strategy == "SPREAD"
    assert req.required_resources() == {"CPU": 8, "GPU": 2.0, "sensor": 3}
    # Defaults: the driver alone; evaluation workers only when evaluating.
    assert Trainer.default_resource_request({}).bundles == [{"CPU": 1, "GPU": 0}]
    assert len(PPOTrainer.default_resource_request({"evaluation_num_workers": 2}).bundles) == 3


def test_sample_async_is_one_batch_behind_and_deterministic(tmp_path):
    def run():
        trainer = make(tmp_path=tmp_path, sample_async=True)
        try:
            worker = trainer.workers.local_worker()
            first = worker.sample()  # the thread now collects the 2nd batch with these weights
            policy = trainer.get_policy()
            zeros = {k: np.zeros_like(v) for k, v in policy.get_weights().items()}
            policy.set_weights(zeros)  # a learner update: all-zero weights give logits 0
            second, third = worker.sample(), worker.sample()
            rewards = [trainer.train()["episode_reward_mean"] for _ in range(3)]
            return first, second, third, rewards
        finally:
            trainer.stop()

    a, b = run(), run()
    for x, y in zip(a[:3], b[:3]):
        np.testing.assert_array_equal(x["obs"], y["obs"])
        np.testing.assert_array_equal(x["actions"], y["actions"])
    assert a[3] == b[3]
    # Off-policy by exactly one batch: the 2nd batch was collected before the update, the
    # 3rd after it.
    first, second, third = a[:3]
    assert second.count == third.count == 50
    assert np.abs(second["action_dist_inputs"]).max() > 0
    assert np.abs(third["action_dist_inputs"]).max() == 0


# --- one trainer with 2 remote workers, shared by the checks below ------------------
@pytest.fixture(scope="module")
def ppo2(ray_session, tmp_path_factory):
    trainer = make(tmp_path=tmp_path_factory.mktemp("ppo2"), num_workers=2, observation_filter="MeanStdFilter")
    yield trainer
    trainer.stop()


def test_remote_workers_exist_and_local_has_no_env(ppo2):
    assert ppo2.workers.num_remote_workers() == 2
    assert ppo2.workers.local_worker().env is None  # create_env_on_driver=False
    assert ppo2.workers.foreach_worker_with_index(lambda w, i: (i, w.worker_index)) == [(0, 0), (1, 1), (2, 2)]
    pids = ppo2.workers.foreach_worker(lambda w: os.getpid())
    assert len(set(pids)) == 3 and pids[0] == os.getpid()
    assert ppo2.workers.foreach_policy(lambda p, pid: pid) == [DEFAULT_POLICY_ID] * 3


def test_sample_sizes_truncate_episodes(ppo2):
    ray = pytest.importorskip("ray")
    per_worker = [b.count for b in ray.get([w.sample.remote() for w in ppo2.workers.remote_workers()])]
    assert per_worker == [25 * 2, 25 * 2]
    # Rounds of one batch per worker until train_batch_size (150) is reached: 2 rounds.
    batch = synchronous_parallel_sample(ppo2.workers, 150)
    assert batch.count == 200
    # Worker order, not arrival order: the episode ids of worker 1 come first in each round.
    owners = batch["eps_id"] >> 40
    assert list(owners[:50]) == [1] * 50 and list(owners[50:100]) == [2] * 50


def test_train_syncs_filters_weights_and_reports_remote_metrics(ppo2):
    ray = pytest.importorskip("ray")
    result = ppo2.train()
    assert result["num_healthy_workers"] == 2
    assert result["timesteps_this_iter"] == 200
    assert result["episodes_this_iter"] > 0 and np.isfinite(result["episode_reward_mean"])
    assert set(result["sampler_perf"]) >= {"mean_env_wait_ms", "mean_inference_ms"}

    # Filters: every remote filter's running stats equal the local (merged) ones, and the
    # local stats count every step sampled by the remotes.
    local = ppo2.workers.local_worker().filters[DEFAULT_POLICY_ID]
    remote = ray.get([w.get_filters.remote() for w in ppo2.workers.remote_workers()])
    assert local.rs.n >= ppo2.counters["num_env_steps_sampled"]
    for filters in remote:
        f = filters[DEFAULT_POLICY_ID]
        assert f.rs.n == local.rs.n and f.buffer.n == 0
        np.testing.assert_allclose(f.rs.mean, local.rs.mean)
        np.testing.assert_allclose(f.rs.m2, local.rs.m2)

    # Weights: each remote worker holds the learner's weights after the sync.
    expected = ppo2.get_weights()[DEFAULT_POLICY_ID]
    for weights in ray.get([w.get_weights.remote() for w in ppo2.workers.remote_workers()]):
        for name, value in expected.items():
            np.testing.assert_array_equal(weights[DEFAULT_POLICY_ID][name], value)


def test_set_weights_reaches_every_worker(ppo2):
    weights = ppo2.get_weights()
    changed = {DEFAULT_POLICY_ID: {k: np.full_like(v, 0.25) for k, v in weights[DEFAULT_POLICY_ID].items()}}
    ppo2.set_weights(changed)
    got = ppo2.workers.foreach_worker(lambda w: w.get_weights())
    for weights in got:
        for name, value in weights[DEFAULT_POLICY_ID].items():
            np.testing.assert_array_equal(value, 0.25)


# --- evaluation workers (sequential and parallel), complete_episodes training --------
def test_evaluation_workers_sequential_and_parallel(ray_session, tmp_path):
    trainer = make(tmp_path=tmp_path, num_workers=1, batch_mode="complete_episodes", num_envs_per_worker=1,
                   evaluation_num_workers=2, evaluation_interval=1, evaluation_num_episodes=3,
                   evaluation_config={"explore": False, "create_env_on_driver": False}, create_env_on_driver=True)

    def eval_weights_equal(expected):
        for weights in trainer.evaluation_workers.foreach_worker(lambda w: w.get_weights()):
            for name, value in expected[DEFAULT_POLICY_ID].items():
                np.testing.assert_array_equal(weights[DEFAULT_POLICY_ID][name], value)

    try:
        # complete_episodes: whole episodes, at least fragment * envs steps per worker.
        batch = ray_session.get(trainer.workers.remote_workers()[0].sample.remote())
        assert batch.count >= 25 and batch["dones"][-1]
        assert trainer.evaluation_workers.num_remote_workers() == 2
        assert trainer.evaluation_workers.local_worker().env is None
        assert trainer.workers.local_worker().env is not None  # create_env_on_driver

        result = trainer.train()  # evaluates after training, with the new weights
        assert result["timesteps_this_iter"] >= 150  # sampled by the remote worker only
        assert trainer.workers.local_worker().sampler.perf_stats()["mean_env_wait_ms"] == 0
        ev = result["evaluation"]
        assert ev["episodes_this_iter"] == 3 and np.isfinite(ev["episode_reward_mean"])
        eval_weights_equal(trainer.get_weights())

        # In parallel to training: evaluates with the weights of the start of the iteration.
        trainer.config["evaluation_parallel_to_training"] = True
        before = trainer.get_weights()
        result = trainer.train()
        assert result["evaluation"]["episodes_this_iter"] == 3
        assert result["training_iteration"] == 2
        eval_weights_equal(before)
    finally:
        trainer.stop()


# --- remote envs -----------------------------------------------------------------
def test_remote_worker_envs_match_local_envs(ray_session, tmp_path):
    from rlfleet.rollout.remote_vector_env import RemoteVectorEnv

    remote = make(tmp_path=tmp_path, remote_worker_envs=True, horizon=30)
    local = make(tmp_path=tmp_path, horizon=30)
    try:
        env = remote.workers.local_worker().env
        assert isinstance(env, RemoteVectorEnv) and len(env.actors) == 2
        for _ in range(2):
            a, b = remote.workers.local_worker().sample(), local.workers.local_worker().sample()
            assert a.count == b.count == 50
            for key in ("obs", "actions", "rewards", "dones", "terminateds"):
                np.testing.assert_array_equal(a[key], b[key])
        assert remote.train()["episode_reward_mean"] == local.train()["episode_reward_mean"]
    finally:
        remote.stop()
        local.stop()


# --- multi-agent on remote workers ---------------------------------------------------
def test_multi_agent_with_a_remote_worker(ray_session, tmp_path):
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    trainer = PPOTrainer(env=MultiAgentCartPole, logdir=str(tmp_path), config=dict(
        SMALL, num_workers=1, env_config={"num_agents": 2},
        multiagent={"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}))
    try:
        result = trainer.train()
        assert result["num_healthy_workers"] == 1
        assert set(result["policy_reward_mean"]) == {"p0", "p1"}
        trainer.add_policy("p2", policy_mapping_fn=lambda aid, episode, worker, **kw: "p2")
        assert trainer.workers.foreach_worker(lambda w: sorted(w.policy_map)) == [["p0", "p1", "p2"]] * 2
        assert "p2" in trainer.train()["policy_reward_mean"]
    finally:
        trainer.stop()


def test_add_and_remove_policy_with_a_remote_worker(ray_session, tmp_path):
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    trainer = PPOTrainer(env=MultiAgentCartPole, logdir=str(tmp_path), config=dict(
        SMALL, num_workers=1, env_config={"num_agents": 2}, recreate_failed_workers=True,
        multiagent={"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}))
    try:
        trainer.train()
        trainer.add_policy("new", policy_mapping_fn=lambda aid, episode, worker, **kw: "p0" if aid == 0 else "new")
        for _ in range(2):
            result = trainer.train()
        assert "new" in result["policy_reward_mean"] and "new" in result["info"]["learner"]
        local = trainer.get_policy("new").get_weights()
        remote = ray_session.get(trainer.workers.remote_workers()[0].apply.remote(
            lambda w: (sorted(w.policy_map), w.get_policy("new").get_weights())))
        assert remote[0] == ["new", "p0", "p1"]
        for name, value in local.items():
            np.testing.assert_array_equal(remote[1][name], value)

        # A worker recreated after a failure, and evaluation workers made after the change,
        # get the run-time policy too.
        kill_remote_worker(ray_session, trainer.workers.remote_workers()[0])
        trainer._try_recover()
        assert trainer.workers.foreach_worker(lambda w: sorted(w.policy_map)) == [["new", "p0", "p1"]] * 2
        assert trainer.workers.foreach_worker(lambda w: sorted(w.policies_to_train)) == [["new", "p0", "p1"]] * 2
        assert trainer.evaluation_workers is None
        trainer.evaluate()
        assert sorted(trainer.evaluation_workers.local_worker().policy_map) == ["new", "p0", "p1"]

        trainer.remove_policy("new", policy_mapping_fn=lambda aid, episode, worker, **kw: f"p{aid}")
        everywhere = (trainer.workers.foreach_worker(lambda w: sorted(w.policy_map))
                      + trainer.evaluation_workers.foreach_worker(lambda w: sorted(w.policy_map)))
        assert everywhere == [["p0", "p1"]] * 3
        trainer.train()
        assert "new" not in trainer.train()["info"]["learner"]
    finally:
        trainer.stop()


def test_mapping_set_on_workers_survives_recreation(ray_session, tmp_path):
    """A policy mapping and policies to train set on the workers directly (not through the
    config or add/remove_policy) reach a worker recreated after a failure."""
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    trainer = PPOTrainer(env=MultiAgentCartPole, logdir=str(tmp_path), config=dict(
        SMALL, num_workers=1, env_config={"num_agents": 2}, recreate_failed_workers=True,
        multiagent={"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}))
    try:
        trainer.train()

        def everyone_p0(worker):
            worker.set_policy_mapping_fn(lambda aid, episode, worker, **kw: "p0")
            worker.set_policies_to_train(["p0"])

        trainer.workers.foreach_worker(everyone_p0)
        kill_remote_worker(ray_session, trainer.workers.remote_workers()[0])
        trainer._try_recover()
        assert trainer.workers.num_remote_workers() == 1
        mapped = trainer.workers.foreach_worker(
            lambda w: ([w.policy_mapping_fn(aid, None, w) for aid in (0, 1)], sorted(w.policies_to_train)))
        assert mapped == [(["p0", "p0"], ["p0"])] * 2
        result = trainer.train()
        assert "p1" not in result["info"]["learner"] and "p0" in result["info"]["learner"]
    finally:
        trainer.stop()


# --- fault tolerance ---------------------------------------------------------------
class KillOnceCallbacks(DefaultCallbacks):
    """The first remote worker to sample after the marker file appears kills its own
    process (SIGKILL) in the middle of train(). The marker path comes through
    `extra_python_environs_for_worker`, so it also shows those reach the workers."""

    def on_sample_end(self, *, worker, samples, **kwargs):
        marker = os.environ.get("RLFLEET_TEST_KILL_MARKER")
        if worker.worker_index > 0 and marker:
            try:
                os.rename(marker, f"{marker}.{worker.worker_index}")  # atomic: one worker wins
            except FileNotFoundError:
                return
            os.kill(os.getpid(), signal.SIGKILL)


def test_worker_death_error_recreate_and_ignore(ray_session, tmp_path):
    marker = tmp_path / "kill"
    trainer = make(tmp_path=tmp_path, num_workers=2, callbacks=KillOnceCallbacks, observation_filter="MeanStdFilter",
                   extra_python_environs_for_worker={"RLFLEET_TEST_KILL_MARKER": str(marker)})
    try:
        assert trainer.train()["num_healthy_workers"] == 2

        # Neither option: the failure surfaces, naming both.
        marker.touch()
        with pytest.raises(WorkerFailureError) as info:
            trainer.train()
        assert "'ignore_worker_failures': True" in str(info.value)
        assert "'recreate_failed_workers': True" in str(info.value)
        assert trainer.iteration == 1

        # recreate_failed_workers: the dead worker is found by the health check and replaced
        # (same worker index), with the current weights and filters.
        trainer.config["recreate_failed_workers"] = True
        result = trainer.train()
        assert result["num_healthy_workers"] == 2 and result["training_iteration"] == 2
        assert trainer.workers.remote_worker_indices() == [1, 2]
        pids = trainer.workers.foreach_worker(lambda w: os.getpid())
        assert len(set(pids)) == 3
        expected = trainer.get_weights()[DEFAULT_POLICY_ID]
        for weights in trainer.workers.foreach_worker(lambda w: w.get_weights()):
            for name, value in expected.items():
                np.testing.assert_array_equal(weights[DEFAULT_POLICY_ID][name], value)

        # ignore_worker_failures: a worker killed mid-train() is dropped, training goes on.
        trainer.config["recreate_failed_workers"] = False
        trainer.config["ignore_worker_failures"] = True
        marker.touch()
        result = trainer.train()
        assert result["num_healthy_workers"] == 1 and result["training_iteration"] == 3
        assert not marker.exists()
        assert trainer.train()["num_healthy_workers"] == 1

        # The last one dies too: a clear error (nothing healthy is left).
        marker.touch()
        with pytest.raises(WorkerFailureError, match="No healthy remote rollout worker is left"):
            trainer.train()
    finally:
        trainer.stop()


# --- seeds -------------------------------------------------------------------------
# PG also runs with sample_async: the background threads must not make runs differ either.
@pytest.mark.parametrize("trainer_cls,extra", [(PPOTrainer, {}), (PGTrainer, {"sample_async": True})],
                         ids=["PPO", "PG-sample_async"])
def test_same_seed_same_results_with_two_workers(ray_session, tmp_path, trainer_cls, extra):
    def run():
        trainer = make(trainer_cls, tmp_path=tmp_path, num_workers=2, observation_filter="MeanStdFilter", **extra)
        try:
            return [trainer.train()["episode_reward_mean"] for _ in range(3)], trainer.get_weights()
        finally:
            trainer.stop()

    (rewards_a, weights_a), (rewards_b, weights_b) = run(), run()
    assert rewards_a == rewards_b
    for name, value in weights_a[DEFAULT_POLICY_ID].items():
        np.testing.assert_array_equal(weights_b[DEFAULT_POLICY_ID][name], value)


# --- learning ----------------------------------------------------------------------
@pytest.mark.slow
def test_ppo_two_workers_learns_cartpole(ray_session, tmp_path):
    # tuned_examples/ppo/cartpole-ppo.yaml, sampled by two remote workers.
    config = {**load_tuned_example("ppo/cartpole-ppo.yaml").config, "num_workers": 2, "num_cpus_per_worker": 0.25}
    trainer = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config=config)
    try:
        best = 0.0
        while trainer.counters["num_env_steps_sampled"] < 100_000:
            result = trainer.train()
            best = max(best, result["episode_reward_mean"])
            if best >= 150:
                break
        assert best >= 150, f"episode_reward_mean {best} after {trainer.counters['num_env_steps_sampled']} steps"
        assert result["num_healthy_workers"] == 2
    finally:
        trainer.stop()


def _rlfleet_log_level(worker) -> int:
    import logging

    return logging.getLogger("rlfleet").getEffectiveLevel()


def test_log_level_applies_in_remote_workers(ray_session, tmp_path):
    trainer = make(PGTrainer, tmp_path=tmp_path, num_workers=1, log_level="DEBUG")
    try:
        levels = trainer.workers.foreach_worker(_rlfleet_log_level)
        assert levels[1:] == [10]  # the remote worker's own process
    finally:
        trainer.stop()
