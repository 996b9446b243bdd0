"""Callbacks through real training: which hooks run how often and with what, custom metrics,
histogram data, batch mutation in on_postprocess_trajectory, legacy dict callbacks."""
from __future__ import annotations

import csv
import json
import os
from collections import Counter

import numpy as np
import pytest

from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.callbacks import DefaultCallbacks
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy
from tests.envs import ScriptedEnv

SB = SampleBatch


class Recorder(DefaultCallbacks):
    """Counts hook calls in a class-level Counter: the trainer, each worker and each policy
    build their own instance, as in the reference."""

    counts: Counter = Counter()
    seen: dict = {}

    def on_trainer_init(self, *, trainer, **kwargs):
        Recorder.counts["on_trainer_init"] += 1
        Recorder.seen["trainer"] = trainer

    def on_episode_start(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        Recorder.counts["on_episode_start"] += 1
        assert episode.length == 0 and "default_policy" in policies
        episode.user_data["rewards"] = []

    def on_episode_step(self, *, worker, base_env, episode, env_index=None, **kwargs):
        Recorder.counts["on_episode_step"] += 1
        episode.user_data["rewards"].append(episode.last_reward_for())

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        Recorder.counts["on_episode_end"] += 1
        Recorder.seen.setdefault("lengths", []).append(episode.length)
        episode.custom_metrics["ret"] = episode.total_reward
        episode.custom_metrics["steps_seen"] = len(episode.user_data["rewards"])
        episode.hist_data["step_rewards"] = list(episode.user_data["rewards"])

    def on_postprocess_trajectory(self, *, worker, episode, agent_id, policy_id, policies, postprocessed_batch,
                                  original_batches, **kwargs):
        Recorder.counts["on_postprocess_trajectory"] += 1
        assert policy_id == "default_policy" and SB.ADVANTAGES in postprocessed_batch
        assert len(set(postprocessed_batch[SB.EPS_ID])) == 1  # one trajectory per call
        postprocessed_batch["traj_len"] = np.full(postprocessed_batch.count, postprocessed_batch.count)

    def on_sample_end(self, *, worker, samples, **kwargs):
        Recorder.counts["on_sample_end"] += 1
        Recorder.seen.setdefault("sample_sizes", []).append(samples.count)
        assert "traj_len" in samples  # the column added in on_postprocess_trajectory

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        Recorder.counts["on_learn_on_batch"] += 1
        assert isinstance(policy, TorchPolicy)
        Recorder.seen.setdefault("learn_sizes", []).append(train_batch.count)

    def on_train_result(self, *, trainer, result, **kwargs):
        Recorder.counts["on_train_result"] += 1
        result["callback_ok"] = True


@pytest.fixture(autouse=True)
def _reset_recorder():
    Recorder.counts = Counter()
    Recorder.seen = {}


def test_hook_counts_and_arguments(tmp_path):
    # 5-step episodes; episode k pays k on its last step; 20 steps per train() call.
    t = PGTrainer(env=ScriptedEnv, logdir=str(tmp_path), config={
        "callbacks": Recorder, "env_config": {"episode_len": 5, "reward_is_episode_index": True},
        "train_batch_size": 20, "rollout_fragment_length": 20})
    try:
        assert Recorder.counts["on_trainer_init"] == 1 and Recorder.seen["trainer"] is t
        r = t.train()
        assert Recorder.counts == Counter({
            "on_trainer_init": 1,
            "on_episode_start": 5,  # 4 finished episodes + the one begun after the last end
            "on_episode_step": 20,
            "on_episode_end": 4,
            "on_postprocess_trajectory": 4,
            "on_sample_end": 1,
            "on_learn_on_batch": 1,
            "on_train_result": 1,
        })
        assert Recorder.seen["lengths"] == [5, 5, 5, 5]
        assert Recorder.seen["sample_sizes"] == [20] and Recorder.seen["learn_sizes"] == [20]
        assert r["callback_ok"] is True
        # Custom metrics: returns 1, 2, 3, 4.
        cm = r["custom_metrics"]
        assert (cm["ret_mean"], cm["ret_min"], cm["ret_max"]) == (2.5, 1.0, 4.0)
        assert (cm["steps_seen_mean"], cm["steps_seen_min"], cm["steps_seen_max"]) == (5.0, 5.0, 5.0)
        assert r["hist_stats"]["step_rewards"] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4]
        t.train()
        assert Recorder.counts["on_train_result"] == 2 and Recorder.counts["on_episode_end"] == 8
    finally:
        t.stop()
    # What on_train_result added is logged; custom metrics are columns of progress.csv.
    last = json.loads(open(os.path.join(t.logdir, "result.json")).read().splitlines()[-1])
    assert last["callback_ok"] is True
    rows = list(csv.DictReader(open(os.path.join(t.logdir, "progress.csv"))))
    assert float(rows[0]["custom_metrics/ret_mean"]) == 2.5
    assert float(rows[1]["custom_metrics/ret_max"]) == 8.0


def test_hooks_with_several_envs_and_ppo(tmp_path):
    t = PPOTrainer(env=ScriptedEnv, logdir=str(tmp_path), config={
        "callbacks": Recorder, "env_config": {"episode_len": 4}, "num_envs_per_worker": 2,
        "train_batch_size": 16, "rollout_fragment_length": 4, "sgd_minibatch_size": 8, "num_sgd_iter": 3})
    try:
        t.train()
        c = Recorder.counts
        assert c["on_episode_step"] == 16  # one call per sub-env per step
        assert c["on_episode_end"] == 4 and c["on_episode_start"] == 6
        assert c["on_sample_end"] == 2  # two fragments of 4 steps x 2 envs
        assert c["on_learn_on_batch"] == 1  # once per train batch, not per minibatch
        assert Recorder.seen["learn_sizes"] == [16]
    finally:
        t.stop()


class ZeroAdvantages(DefaultCallbacks):
    learned: list = []

    def on_postprocess_trajectory(self, *, postprocessed_batch, **kwargs):
        postprocessed_batch[SB.ADVANTAGES][:] = 7.0

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        ZeroAdvantages.learned.append(train_batch[SB.ADVANTAGES].copy())


def test_postprocess_trajectory_mutations_reach_the_learner(tmp_path):
    ZeroAdvantages.learned = []
    t = PGTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
        "callbacks": ZeroAdvantages, "train_batch_size": 50, "rollout_fragment_length": 50})
    try:
        t.train()
    finally:
        t.stop()
    assert len(ZeroAdvantages.learned) == 1 and np.all(ZeroAdvantages.learned[0] == 7.0)


def test_legacy_dict_callbacks(tmp_path):
    calls = Counter()
    ends = []

    def on_episode_end(info):
        calls["on_episode_end"] += 1
        ends.append(info["episode"].length)
        info["episode"].custom_metrics["legacy"] = 3.0

    def on_train_result(info):
        calls["on_train_result"] += 1
        assert info["trainer"] is not None
        info["result"]["legacy_seen"] = True

    def counter(name, keys):
        def fn(info):
            assert keys <= set(info), (name, sorted(info))
            calls[name] += 1
        return fn

    t = PGTrainer(env=ScriptedEnv, logdir=str(tmp_path), config={
        "env_config": {"episode_len": 5}, "train_batch_size": 10, "rollout_fragment_length": 10,
        "callbacks": {
            "on_episode_start": counter("on_episode_start", {"env", "policy", "episode"}),
            "on_episode_step": counter("on_episode_step", {"env", "episode"}),
            "on_episode_end": on_episode_end,
            "on_sample_end": counter("on_sample_end", {"worker", "samples"}),
            "on_postprocess_traj": counter("on_postprocess_traj", {"episode", "agent_id", "pre_batch", "post_batch"}),
            "on_train_result": on_train_result,
        }})
    try:
        r = t.train()
    finally:
        t.stop()
    assert calls == Counter({"on_episode_start": 3, "on_episode_step": 10, "on_episode_end": 2,
                             "on_sample_end": 1, "on_postprocess_traj": 2, "on_train_result": 1})
    assert ends == [5, 5]
    assert r["legacy_seen"] is True and r["custom_metrics"]["legacy_mean"] == 3.0


def test_unknown_legacy_callback_name(tmp_path):
    with pytest.raises(ValueError, match="on_episode_ends"):
        PGTrainer(env=ScriptedEnv, logdir=str(tmp_path), config={"callbacks": {"on_episode_ends": print}})
