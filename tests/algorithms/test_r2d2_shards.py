"""APEX_R2D2: R2D2 over Ape-X's replay shards. Sequences reach the shards with their start
states, worker-side priorities are R2D2's mix, the learner's priorities go back to the shard
the sequences came from; in-process and Ray shards, a checkpoint round trip, and learning the
memory task RepeatFirstObsEnv."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.algorithms.apex.replay_shard import ReplayShard, td_errors
from rlfleet.algorithms.r2d2 import DEFAULT_CONFIG as R2D2_DEFAULTS
from rlfleet.algorithms.r2d2 import ApexR2D2Trainer
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.env.examples import RepeatFirstObsEnv, StatelessCartPole
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.registry import get_trainer_class
from rlfleet.replay import BATCH_INDEXES, PRIO_WEIGHTS
from rlfleet.replay.sequences import SEQ_LOSS_START
from tests.helpers import load_tuned_example, train_until

SB = SampleBatch
BURN_IN, SEQ_LEN = 2, 4
SMALL = {"seed": 0, "model": {"use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [8], "max_seq_len": SEQ_LEN},
         "hiddens": [8], "learning_starts": 60, "train_batch_size": 36, "timesteps_per_iteration": 100,
         "min_iter_time_s": 0, "replay_burn_in": BURN_IN, "n_step": 2, "num_replay_buffer_shards": 2,
         "target_network_update_freq": 100, "log_sys_usage": False}


def stored_sequences(shard: ReplayShard) -> SampleBatch:
    """An in-process shard's sequences of the default policy, in slot order."""
    state = shard.buffers[DEFAULT_POLICY_ID].get_state()
    return SampleBatch({k[len("data/"):]: v for k, v in state.items() if k.startswith("data/")})


def test_registered_with_r2d2_defaults_and_apex_replay():
    assert get_trainer_class("APEX_R2D2") is ApexR2D2Trainer
    cfg = ApexR2D2Trainer._default_config
    for key in ("lr", "gamma", "train_batch_size", "buffer_size", "replay_burn_in", "zero_init_states",
                "prioritized_replay_eta", "use_h_function", "batch_mode"):
        assert cfg[key] == R2D2_DEFAULTS[key], key
    assert cfg["target_network_update_freq"] == 2500 * 1280  # trained steps, as in Ape-X: the paper's 2500 updates
    assert cfg["model"]["use_lstm"] is True
    assert cfg["num_replay_buffer_shards"] == 4 and cfg["worker_side_prioritization"] is True
    assert cfg["prioritized_replay"] is True and cfg["exploration_config"]["type"] == "PerWorkerEpsilonGreedy"


@pytest.mark.parametrize("bad, match", [
    ({"batch_mode": "truncate_episodes"}, "complete_episodes"),
    ({"model": {"use_lstm": False}}, "use_lstm"),
    ({"store_buffer_in_checkpoints": True}, "store_buffer_in_checkpoints"),
    ({"compress_observations": True}, "compress_observations"),
    ({"num_replay_buffer_shards": 0}, "num_replay_buffer_shards"),
])
def test_settings_it_cannot_serve_are_refused_by_name(bad, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        ApexR2D2Trainer(env=StatelessCartPole, config=dict(SMALL, **bad), logdir=str(tmp_path))


def test_r2d2_points_to_apex_r2d2_for_shards(tmp_path):
    from rlfleet.algorithms.r2d2 import R2D2Trainer

    with pytest.raises(ValueError, match="num_replay_buffer_shards.*run 'APEX_R2D2'"):
        R2D2Trainer(env=StatelessCartPole, config=dict(SMALL), logdir=str(tmp_path))


def test_sequences_reach_the_shards_with_their_start_states_and_r2d2_priorities(tmp_path):
    # No learning (learning_starts out of reach): the weights the states were recorded with stay.
    config = dict(SMALL, learning_starts=10 ** 6, zero_init_states=False)
    trainer = ApexR2D2Trainer(env=StatelessCartPole, config=config, logdir=str(tmp_path))
    try:
        result = trainer.train()
        policy = trainer.get_policy()
        net = policy.model.q_net
        alpha, eps = trainer.config["prioritized_replay_alpha"], trainer.config["prioritized_replay_eps"]
        checked = 0
        for shard in trainer.shards:
            seqs = stored_sequences(shard)
            assert seqs[SB.OBS].shape[1:] == (BURN_IN + SEQ_LEN + 2, 2)  # burn-in + trained rows + n-step tail
            starts = seqs[SEQ_LOSS_START] == 0  # an episode's first sequence has no burn-in rows before it
            for k in range(2):  # LSTM h and c
                assert seqs[f"state_in_{k}"].shape == (seqs.count, 8)
                assert np.all(seqs[f"state_in_{k}"][starts] == 0) and np.all(seqs[f"state_in_{k}"][~starts] != 0)
            # A sequence's stored state is the memory after its predecessor's rows up to its first row.
            for i in np.flatnonzero(~starts[1:]):
                state = [torch.as_tensor(seqs[f"state_in_{k}"][i][None]) for k in range(2)]
                with torch.no_grad():
                    for row in seqs[SB.OBS][i][:int(seqs[SEQ_LOSS_START][i]) + SEQ_LEN - BURN_IN]:
                        _, state = net({SB.OBS: torch.as_tensor(row[None])}, state, None)
                for k in range(2):
                    np.testing.assert_allclose(state[k][0].numpy(), seqs[f"state_in_{k}"][i + 1], atol=1e-5)
                checked += 1
            # Worker-side priorities: the loss's eta-mix of each sequence's |TD errors|.
            expected = (td_errors(policy, seqs) + eps) ** alpha
            np.testing.assert_allclose(shard.priorities(DEFAULT_POLICY_ID), expected, rtol=1e-4)
            assert np.ptp(expected) > 0
        assert checked > 10
        added = sum(result["info"][f"replay_shard_{i}"][DEFAULT_POLICY_ID]["num_added"] for i in range(2))
        assert added == sum(stored_sequences(s).count for s in trainer.shards) > 0
    finally:
        trainer.stop()


def test_learner_priorities_go_back_to_the_shard_replayed_from(tmp_path):
    trainer = ApexR2D2Trainer(env=StatelessCartPole, config=dict(SMALL, training_intensity=36), logdir=str(tmp_path))
    events = []

    def spy(i, shard):
        replay, update = shard.replay, shard.update_priorities

        def replay_spy(*args):
            out = replay(*args)
            events.append(("replay", i, None if out is None else out[DEFAULT_POLICY_ID][BATCH_INDEXES]))
            return out

        def update_spy(updates):
            idx, priorities = updates[DEFAULT_POLICY_ID]
            update(updates)
            events.append(("update", i, idx, priorities))
        shard.replay, shard.update_priorities = replay_spy, update_spy

    for i, shard in enumerate(trainer.shards):
        spy(i, shard)
    try:
        for _ in range(2):
            result = trainer.train()
        updates = [e for e in events if e[0] == "update"]
        assert {e[1] for e in updates} == {0, 1} and result["info"]["num_target_updates"] >= 1
        for before, after in zip(events, events[1:]):
            if after[0] == "update":  # the batch replayed just before, from the same shard
                assert before[0] == "replay" and before[1] == after[1]
                np.testing.assert_array_equal(before[2], after[2])
        # The shard holds exactly the last priorities sent (its later replays change nothing).
        _, i, idx, priorities = updates[-1]
        alpha = trainer.config["prioritized_replay_alpha"]
        last = {int(j): p for j, p in zip(idx, priorities)}  # a repeated index keeps its last value
        np.testing.assert_allclose(trainer.shard_priorities(i)[list(last)], np.array(list(last.values())) ** alpha,
                                   rtol=1e-5)
        assert np.isfinite(result["info"]["learner"][DEFAULT_POLICY_ID]["learner_stats"]["loss"])
    finally:
        trainer.stop()


def test_remote_workers_fill_ray_shards_and_a_checkpoint_restores(ray_session, tmp_path):
    cfg = dict(SMALL, num_workers=1, num_cpus_per_worker=0.5, max_weight_sync_delay=50, zero_init_states=False)
    trainer = ApexR2D2Trainer(env=StatelessCartPole, config=cfg, logdir=str(tmp_path / "run"))
    try:
        assert not any(isinstance(s, ReplayShard) for s in trainer.shards)  # Ray actor handles
        for _ in range(10):
            result = trainer.train()
            info = result["info"]
            if info["num_target_updates"] > 0 and all(info[f"replay_shard_{i}"]["num_priority_updates"] > 0
                                                      for i in range(2)):
                break
        assert info["num_env_steps_trained"] > 0 and info["num_weight_syncs"] > 0
        assert all(info[f"replay_shard_{i}"]["num_priority_updates"] > 0 for i in range(2))
        # What a Ray shard replays: whole sequences with their start states, as the worker cut them.
        replayed = trainer.workers.get_futures([trainer.workers.call_actor(trainer.shards[1], "replay", 16, 0.4)])[0]
        seqs = replayed[DEFAULT_POLICY_ID]
        starts = seqs[SEQ_LOSS_START] == 0
        assert seqs[SB.ACTIONS].shape == (16, BURN_IN + SEQ_LEN) and seqs[PRIO_WEIGHTS].shape == (16,)
        assert np.all(seqs["state_in_0"][starts] == 0) and np.all(seqs["state_in_0"][~starts] != 0)
        assert np.ptp(trainer.shard_priorities(1)) > 0
        with trainer.learner_paused():
            weights = trainer.get_policy().get_weights()
            counters = dict(trainer.counters)
            path = trainer.save(str(tmp_path / "ckpt"))
    finally:
        trainer.stop()
    # Weights and counters come back; shard contents are not checkpointed (as in APEX), so the
    # restored trainer (in-process shards) refills them before it learns again.
    restored = ApexR2D2Trainer.from_checkpoint(path, config_overrides={"num_workers": 0})
    try:
        restored_weights = restored.get_policy().get_weights()
        assert set(restored_weights) == set(weights)
        assert all(np.array_equal(restored_weights[k], weights[k]) for k in weights)
        assert restored.counters["num_env_steps_sampled"] == counters["num_env_steps_sampled"]
        assert restored.train()["timesteps_total"] > counters["num_env_steps_sampled"]
    finally:
        restored.stop()


def test_learns_the_memory_task(tmp_path):
    example = load_tuned_example("r2d2/repeat-first-obs-apex-r2d2.yaml")
    trainer = ApexR2D2Trainer(env=RepeatFirstObsEnv, config=example.config, logdir=str(tmp_path))
    try:
        result, history = train_until(trainer, reward=0.9, max_timesteps=4000)
    finally:
        trainer.stop()
    assert result["episode_reward_mean"] >= 0.9, history
