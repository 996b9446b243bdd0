"""Offline data: output, input (files, mixtures, custom readers), bad data, off-policy
estimation, and BC / MARWIL learning from data written by `output`."""
from __future__ import annotations

import glob
import json
import os

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.offline import IOContext, JsonReader, OfflineDataError, decode_line, encode_batch, register_input
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from tests.helpers import load_tuned_example
from tests.offline_helpers import write_scripted_cartpole

SB = SampleBatch


def _batch(n=7, seed=0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch({
        SB.OBS: rng.normal(size=(n, 4)).astype(np.float32), SB.NEXT_OBS: rng.normal(size=(n, 4)).astype(np.float32),
        SB.ACTIONS: rng.integers(0, 2, n), SB.REWARDS: np.ones(n, np.float32), SB.EPS_ID: np.repeat([5, 9], [3, n - 3]),
        SB.T: np.arange(n), SB.TERMINATEDS: np.arange(n) == n - 1, SB.ACTION_PROB: rng.random(n).astype(np.float32),
        "image": rng.integers(0, 255, (n, 3, 2, 2), dtype=np.uint8), "f64": rng.normal(size=n),
    })


@pytest.mark.parametrize("compress", [[], ["obs", "new_obs", "image", "f64", "actions"]])
def test_round_trip_is_lossless(compress):
    batch = _batch()
    out, normalized = decode_line(encode_batch(batch, compress, actions_normalized=True))
    assert normalized is True and set(out) == set(batch)
    for k in batch:
        assert out[k].dtype == batch[k].dtype and out[k].shape == batch[k].shape and np.array_equal(out[k], batch[k]), k
    ma = MultiAgentBatch({"p0": batch, "p1": _batch(3, 1)}, 7)
    back, _ = decode_line(encode_batch(ma, compress))
    assert isinstance(back, MultiAgentBatch) and back.count == 7
    assert np.array_equal(back.policy_batches["p1"][SB.OBS], ma.policy_batches["p1"][SB.OBS])


class _InfoCartPole(gym.Wrapper):
    """CartPole whose infos hold what envs put there: numbers, NumPy values, strings, nested
    dicts, and one entry JSON cannot hold (an arbitrary object)."""

    def __init__(self, config=None):
        super().__init__(gym.make("CartPole-v1"))
        self.steps = 0

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.steps += 1
        info = {"step": self.steps, "x": np.float32(obs[0]), "pair": np.array([self.steps, -1]), "tag": "ok",
                "nested": {"ok": [True, None, float("nan")]}, "handle": object()}
        return obs, reward, terminated, truncated, info


def test_infos_round_trip_and_unjsonable_entries_are_dropped_with_one_warning(tmp_path, caplog):
    from rlfleet.algorithms.pg import PGTrainer

    # encode / decode: JSON values come back equal, NumPy values as numbers and lists
    infos = np.empty(3, dtype=object)
    infos[:] = [{"a": 1, "b": [1.5, "s"], "c": {"d": None}}, {}, {"a": np.int64(2), "e": np.arange(2)}]
    batch = SampleBatch({SB.REWARDS: np.ones(3, np.float32), SB.INFOS: infos})
    for compress in ([], [SB.INFOS, SB.REWARDS]):
        out, _ = decode_line(encode_batch(batch, compress))
        assert out[SB.INFOS].dtype == object and out[SB.INFOS].shape == (3,)
        assert list(out[SB.INFOS]) == [{"a": 1, "b": [1.5, "s"], "c": {"d": None}}, {}, {"a": 2, "e": [0, 1]}]

    # a real run: every written row carries its step's info; the object entry is dropped, once
    caplog.set_level("WARNING", logger="rlfleet.offline.json_format")
    trainer = PGTrainer(env=_InfoCartPole, logdir=str(tmp_path / "log"), config={
        "output": str(tmp_path / "out"), "train_batch_size": 100, "rollout_fragment_length": 100, "seed": 0,
        "log_sys_usage": False})
    result = trainer.train()
    trainer.train()
    trainer.stop()
    assert result["info"]["learner"]  # the learner ran on the batch (whose `infos` the worker dropped)
    warned = [r.getMessage() for r in caplog.records if "'handle'" in r.getMessage()]
    assert len(warned) == 1 and "dropping the info entry 'handle'" in warned[0], warned
    reader = JsonReader(str(tmp_path / "out"))
    rows = 0
    for _ in range(2):
        read = reader.next()
        for t, info in zip(read[SB.T], read[SB.INFOS]):
            assert set(info) == {"step", "x", "pair", "tag", "nested"}, info
            assert info["pair"][1] == -1 and info["tag"] == "ok" and isinstance(info["x"], float)
            assert info["nested"]["ok"][:2] == [True, None] and np.isnan(info["nested"]["ok"][2])
        # `t` counts steps within an episode from 0; the env's counter runs over resets
        steps = np.array([info["step"] for info in read[SB.INFOS]])
        assert np.all(np.diff(steps)[np.diff(read[SB.EPS_ID]) == 0] == 1)
        rows += read.count
    assert rows == 200


def test_ppo_writes_every_sampled_batch_to_logdir_and_rolls_over(tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer

    trainer = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
        "output": "logdir", "output_max_file_size": 20000, "num_envs_per_worker": 2, "rollout_fragment_length": 50,
        "train_batch_size": 200, "sgd_minibatch_size": 50, "num_sgd_iter": 1, "seed": 3, "log_sys_usage": False})
    trainer.train()
    trainer.stop()
    files = sorted(glob.glob(str(tmp_path / "output-*_worker-0_*.json")))
    assert len(files) >= 2, files  # 2 batches of 100 rows (~11 kB each) pass 20 kB
    rows = 0
    for f in files:
        for line in open(f):
            batch, normalized = decode_line(line, f)
            assert {SB.EPS_ID, SB.T, SB.TERMINATEDS, SB.TRUNCATEDS, SB.ACTION_PROB, SB.ACTION_LOGP} <= set(batch)
            rows += batch.count
    assert rows == 200
    assert json.loads(open(files[0]).readline())["columns"]["obs"]["codec"] == "lz4"


def test_remote_workers_write_their_own_files_and_split_input(tmp_path, ray_session):
    from rlfleet.algorithms.pg import PGTrainer

    out = str(tmp_path / "out")
    trainer = PGTrainer(env="CartPole-v1", logdir=str(tmp_path / "log"), config={
        "output": out, "num_workers": 2, "rollout_fragment_length": 50, "train_batch_size": 100, "seed": 1})
    trainer.train()
    trainer.stop()
    names = sorted(os.path.basename(f).split("_worker-")[1] for f in glob.glob(out + "/*.json"))
    assert names == ["1_0.json", "2_0.json"], names
    files = sorted(glob.glob(out + "/*.json"))
    w1 = JsonReader(out, IOContext(config={"num_workers": 2}, worker_index=1))
    w2 = JsonReader(out, IOContext(config={"num_workers": 2}, worker_index=2))
    assert w1.files == files[:1] and w2.files == files[1:]


def test_bc_from_ppo_output_and_estimates_of_the_writing_policy(tmp_path):
    """A trained PPO policy writes its experience; IS/WIS estimate that policy on its own
    data within 10 % of its measured return; BC from the data gets >= 80 % of that return."""
    from rlfleet.algorithms.bc import BCTrainer
    from rlfleet.algorithms.ppo import PPOTrainer

    ppo = load_tuned_example("ppo/cartpole-ppo.yaml")
    writer = PPOTrainer(env="CartPole-v1", config=dict(ppo.config, seed=1), logdir=str(tmp_path / "ppo"))
    while writer.train()["episode_reward_mean"] < 150:
        pass
    weights = writer.get_weights()
    writer.stop()
    out = str(tmp_path / "data")
    # The trained policy, frozen (lr 0), writes 4k steps in whole episodes.
    frozen = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path / "frozen"), config=dict(
        ppo.config, seed=2, lr=0.0, output=out, batch_mode="complete_episodes", gamma=1.0))
    frozen.set_weights(weights)
    returns = []
    while frozen.counters["num_env_steps_sampled"] < 4000:
        returns.append(frozen.train()["episode_reward_mean"])
    frozen.stop()
    measured = float(np.mean(returns))
    # Off-policy estimates of the same policy (gamma 1: undiscounted returns).
    bc_cfg = load_tuned_example("bc/cartpole-bc.yaml").config
    reader = BCTrainer(env="CartPole-v1", logdir=str(tmp_path / "ope"), config=dict(
        bc_cfg, input=out, input_evaluation=["is", "wis"], gamma=1.0, lr=0.0, train_batch_size=4000,
        model={"fcnet_hiddens": [64, 64]}))
    reader.set_weights(weights)
    estimates = reader.train()["off_policy_estimator"]
    reader.stop()
    for name in ("is", "wis"):
        assert abs(estimates[name]["V_target"] - measured) <= 0.1 * measured, (name, estimates, measured)
    # BC on the written data, evaluated in the env.
    bc = BCTrainer(env="CartPole-v1", logdir=str(tmp_path / "bc"), config=dict(
        bc_cfg, input=out, evaluation_interval=10, evaluation_num_episodes=5, input_evaluation=[]))
    result = {}
    for _ in range(100):
        result = bc.train()
        if "evaluation" not in result:
            continue
        if result["evaluation"]["episode_reward_mean"] >= 0.8 * measured:
            break
    bc.stop()
    assert result["evaluation"]["episode_reward_mean"] >= 0.8 * measured, (result["evaluation"], measured)


def test_marwil_beats_bc_on_mixed_quality_data(tmp_path):
    from rlfleet.registry import get_trainer_class

    files, _ = write_scripted_cartpole(str(tmp_path / "mixed"), 12000, epsilon=0.6, seed=5)
    example = load_tuned_example("marwil/cartpole-marwil.yaml")
    finals = {}
    for algo in ("BC", "MARWIL"):
        trainer = get_trainer_class(algo)(env="CartPole-v1", logdir=str(tmp_path / algo), config=dict(
            example.config, input=files, seed=7, evaluation_interval=100, evaluation_num_episodes=10,
            input_evaluation=[]))
        for _ in range(100):
            result = trainer.train()
        trainer.stop()
        finals[algo] = result["evaluation"]["episode_reward_mean"]
    print(finals)
    assert finals["MARWIL"] > 1.3 * finals["BC"], finals


def test_mixture_draws_in_proportion_and_custom_readers(tmp_path):
    from rlfleet.algorithms.pg import PGTrainer

    files, _ = write_scripted_cartpole(str(tmp_path / "d"), 2048, seed=1)
    register_input("constant_test_reader", lambda ioctx: _Constant(ioctx))
    trainer = PGTrainer(env="CartPole-v1", logdir=str(tmp_path / "log"), config={
        "input": {"sampler": 0.3, files[0]: 0.5, "constant_test_reader": 0.2}, "input_config": {"rows": 3},
        "rollout_fragment_length": 10, "seed": 0, "input_evaluation": []})
    worker = trainer.workers.local_worker()
    counts = {10: 0, 256: 0, 3: 0}
    for _ in range(200):
        counts[worker.sample().count] += 1
    trainer.stop()
    assert abs(counts[10] / 200 - 0.3) <= 0.05 and abs(counts[256] / 200 - 0.5) <= 0.05, counts
    assert abs(counts[3] / 200 - 0.2) <= 0.05, counts


class _Constant:
    def __init__(self, ioctx):
        self.n = ioctx.input_config["rows"]

    def next(self):
        return SampleBatch({SB.OBS: np.zeros((self.n, 4), np.float32), SB.ACTIONS: np.zeros(self.n, np.int64),
                            SB.REWARDS: np.zeros(self.n, np.float32), SB.EPS_ID: np.zeros(self.n, np.int64),
                            SB.TERMINATEDS: np.zeros(self.n, bool)})


def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("case,needle", [
    ("truncated", "not valid JSON"),
    ("missing", "lacks the required column(s) ['rewards']"),
    ("action", "outside the action space"),
    ("obs_shape", "observations have shape (3,)"),
    ("codec", "unknown compression codec 'zstd'"),
    ("pickle", "only bool, int, uint and float"),
])
def test_bad_data_names_file_line_and_problem(tmp_path, case, needle):
    from rlfleet.algorithms.bc import BCTrainer

    good = encode_batch(SampleBatch({SB.OBS: np.zeros((2, 4), np.float32), SB.ACTIONS: np.array([0, 1]),
                                     SB.REWARDS: np.ones(2, np.float32), SB.EPS_ID: np.array([1, 1]),
                                     SB.TERMINATEDS: np.array([False, True])}))
    line = json.loads(good)
    if case == "truncated":
        bad = good[: len(good) // 2]
    else:
        if case == "missing":
            del line["columns"]["rewards"]
        elif case == "action":
            line["columns"]["actions"] = [0, 2]
        elif case == "obs_shape":
            line["columns"]["obs"] = [[0, 0, 0], [0, 0, 0]]
        elif case == "codec":
            line["columns"]["obs"] = {"dtype": "float32", "shape": [2, 4], "codec": "zstd", "data": ""}
        else:
            line["columns"]["obs"] = {"dtype": "O", "data": [1, 2]}
        bad = json.dumps(line)
    path = _write(tmp_path / "bad.json", good + "\n" + bad + "\n")
    trainer = BCTrainer(env="CartPole-v1", logdir=str(tmp_path / "log"), config={
        "input": path, "train_batch_size": 4, "input_evaluation": []})
    with pytest.raises(OfflineDataError) as err:
        trainer.train()
    trainer.stop()
    assert f"{path}:2" in str(err.value) and needle in str(err.value), str(err.value)


def test_bad_input_specs_fail_at_construction(tmp_path):
    from rlfleet.algorithms.bc import BCTrainer

    with pytest.raises(ValueError, match="glob matches no file"):
        BCTrainer(env="CartPole-v1", logdir=str(tmp_path), config={"input": str(tmp_path / "none" / "*.json")})
    with pytest.raises(ValueError, match="sum to 0.9"):
        BCTrainer(env="CartPole-v1", logdir=str(tmp_path), config={"input": {"sampler": 0.4, "x": 0.5}})
    with pytest.raises(ValueError, match="'input_evaluation'"):
        BCTrainer(env="CartPole-v1", logdir=str(tmp_path), config={"input_evaluation": ["bogus"]})


def test_continuous_actions_are_normalized_when_read(tmp_path):
    """Pendulum data in the env's action space ([-2, 2]) reaches the policy as [-1, 1]."""
    from rlfleet.algorithms.marwil import MARWILTrainer

    n = 5
    actions = np.array([[-2.0], [-1.0], [0.0], [1.0], [2.0]], np.float32)
    line = encode_batch(SampleBatch({SB.OBS: np.zeros((n, 3), np.float32), SB.NEXT_OBS: np.zeros((n, 3), np.float32),
                                     SB.ACTIONS: actions, SB.REWARDS: np.zeros(n, np.float32),
                                     SB.EPS_ID: np.zeros(n, np.int64), SB.TERMINATEDS: np.zeros(n, bool)}))
    path = _write(tmp_path / "p.json", line + "\n")
    trainer = MARWILTrainer(env="Pendulum-v1", logdir=str(tmp_path / "log"), config={"input": path,
                                                                                     "input_evaluation": []})
    batch = trainer.workers.local_worker().sample()
    assert np.allclose(batch[SB.ACTIONS].ravel(), [-1, -0.5, 0, 0.5, 1]) and SB.ADVANTAGES in batch
    trainer.train()
    trainer.stop()


def test_pg_marwil_and_bc_share_one_training_step():
    from rlfleet.algorithms.bc import BCTrainer
    from rlfleet.algorithms.common.multi_agent import SingleUpdateTrainer
    from rlfleet.algorithms.marwil import MARWILTrainer
    from rlfleet.algorithms.pg import PGTrainer

    for trainer_class in (PGTrainer, MARWILTrainer, BCTrainer):
        assert trainer_class.training_step is SingleUpdateTrainer.training_step, trainer_class
