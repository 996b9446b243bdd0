"""Trainer: config merging and errors, env resolution, the result dict, iteration pacing,
metrics smoothing, evaluation, acting (preprocessor + filter), weights, log files, seeding."""
from __future__ import annotations

import csv
import importlib.util
import json
import os

import numpy as np
import pytest

from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.ppo import DEFAULT_CONFIG as PPO_DEFAULTS
from rlfleet.env.registry import register_env
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.trainer.trainer import REPORTS_PER_STEP_LIMIT
from tests.envs import ActionRecordingEnv, CountingEnv, DiscreteObsEnv, ScriptedEnv
from tests.helpers import REPO_ROOT

SB = SampleBatch

# Small, fast settings: one train() is a few hundred env steps.
FAST_PPO = {"train_batch_size": 200, "rollout_fragment_length": 100, "sgd_minibatch_size": 100,
            "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16, 16]}}
FAST_PG = {"train_batch_size": 100, "rollout_fragment_length": 100, "model": {"fcnet_hiddens": [16]}}


@pytest.fixture
def make(tmp_path):
    """make(TrainerClass, env, **config) -> trainer, logging under tmp_path; stopped afterwards."""
    trainers = []

    def _make(cls, env_spec, **config):
        logdir = tmp_path / f"run{len(trainers)}"
        trainer = cls(config=config, env=env_spec, logdir=str(logdir))
        trainers.append(trainer)
        return trainer

    yield _make
    for t in trainers:
        t.stop()


# --- config --------------------------------------------------------------------------------------
def test_merge_trainer_configs_deep_updates_without_mutating():
    user = {"lr": 0.1, "model": {"fcnet_hiddens": [8]}, "env_config": {"anything": 1}}
    merged = PPOTrainer.merge_trainer_configs(PPO_DEFAULTS, user)
    assert merged["lr"] == 0.1 and merged["model"]["fcnet_hiddens"] == [8]
    # Sub-keys not given keep the algorithm's defaults (PPO: separate value branch).
    assert merged["model"]["vf_share_layers"] is False
    assert merged["model"]["fcnet_activation"] == PPO_DEFAULTS["model"]["fcnet_activation"]
    assert merged["env_config"] == {"anything": 1}  # env_config takes any sub-key
    assert merged["num_sgd_iter"] == PPO_DEFAULTS["num_sgd_iter"]
    assert PPO_DEFAULTS["lr"] != 0.1 and PPO_DEFAULTS["model"]["fcnet_hiddens"] != [8]
    assert user == {"lr": 0.1, "model": {"fcnet_hiddens": [8]}, "env_config": {"anything": 1}}


def test_merge_trainer_configs_rejects_unknown_keys():
    with pytest.raises(ValueError, match="lamda.*lambda"):
        PPOTrainer.merge_trainer_configs(PPO_DEFAULTS, {"lamda": 0.9})
    merged = PPOTrainer.merge_trainer_configs(PPO_DEFAULTS, {"lamda": 0.9}, _allow_unknown_configs=True)
    assert merged["lamda"] == 0.9


def test_bad_config_key_suggests_the_right_one(tmp_path):
    with pytest.raises(ValueError) as e:
        PPOTrainer(config={"num_worker": 0}, env="CartPole-v1", logdir=str(tmp_path))
    msg = str(e.value)
    assert "num_worker" in msg and "did you mean" in msg.lower() and "num_workers" in msg


def test_bad_config_value_names_key_and_value(tmp_path):
    with pytest.raises(ValueError, match="sgd_minibatch_size.*train_batch_size"):
        PPOTrainer(config={"sgd_minibatch_size": 500, "train_batch_size": 100}, env="CartPole-v1",
                   logdir=str(tmp_path))


def test_bad_env_id_suggests_close_one(tmp_path):
    with pytest.raises(ValueError) as e:
        PPOTrainer(config=FAST_PPO, env="CartPole-v2", logdir=str(tmp_path))
    assert "CartPole-v2" in str(e.value) and "CartPole-v1" in str(e.value)


@pytest.mark.parametrize("env", ["class", "registered", "path_colon", "path_dot", "config"])
def test_env_forms(make, env):
    register_env("counting_for_trainer_test", lambda ctx: CountingEnv(ctx))
    spec = {"class": CountingEnv, "registered": "counting_for_trainer_test", "path_colon": "tests.envs:CountingEnv",
            "path_dot": "tests.envs.CountingEnv", "config": None}[env]
    config = dict(FAST_PG, env_config={"episode_len": 4})
    if env == "config":
        config["env"] = CountingEnv  # the env given in the config instead of as an argument
    t = make(PGTrainer, spec, **config)
    sub_env = t.workers.local_worker().env.envs[0]
    assert isinstance(sub_env, CountingEnv)
    assert sub_env.env_config.worker_index == 0 and sub_env.episode_len == 4
    result = t.train()
    assert result["episode_len_mean"] == 4.0 and result["episode_reward_mean"] == 4.0


# --- train() and its result -------------------------------------------------------------------------
RESULT_KEYS = {
    "episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
    "episodes_this_iter", "episodes_total", "timesteps_total", "timesteps_this_iter",
    "training_iteration", "time_this_iter_s", "time_total_s", "num_healthy_workers",
    "custom_metrics", "hist_stats", "info", "sampler_perf",
}


def test_train_result_has_the_reference_keys(make):
    t = make(PPOTrainer, "CartPole-v1", seed=0, **FAST_PPO)
    results = []
    for i in (1, 2):
        results.append(t.train())
        assert t.iteration == i  # counts train() calls
    for i, r in enumerate(results, start=1):
        missing = RESULT_KEYS - set(r)
        assert not missing, f"result lacks {sorted(missing)}"
        assert "evaluation" not in r  # evaluation did not run
        has_psutil = importlib.util.find_spec("psutil") is not None
        assert ("perf" in r) == has_psutil
        assert r["training_iteration"] == i
        assert r["timesteps_this_iter"] == 200 and r["timesteps_total"] == 200 * i
        assert r["num_healthy_workers"] == 0
        assert r["time_this_iter_s"] > 0
        learner = r["info"]["learner"]["default_policy"]["learner_stats"]
        for key in ("total_loss", "policy_loss", "vf_loss", "kl", "entropy", "cur_lr"):
            assert np.isfinite(learner[key]), key
        assert r["info"]["num_env_steps_sampled"] == 200 * i
        assert r["info"]["num_env_steps_trained"] == 200 * i
        assert set(r["sampler_perf"]) >= {"mean_env_wait_ms", "mean_inference_ms", "mean_processing_ms"}
        assert len(r["hist_stats"]["episode_reward"]) == min(r["episodes_total"], 100)
    assert results[1]["time_total_s"] == pytest.approx(results[0]["time_this_iter_s"] + results[1]["time_this_iter_s"])
    assert results[1]["episodes_total"] == results[0]["episodes_total"] + results[1]["episodes_this_iter"]


def test_timesteps_per_iteration(make):
    t = make(PGTrainer, "CartPole-v1", timesteps_per_iteration=120, **FAST_PG)
    r = t.train()
    # Each training step samples 100 steps; two are needed to reach 120.
    assert r["timesteps_this_iter"] == 200 and r["timesteps_total"] == 200
    assert r["info"]["num_env_steps_trained"] == 200


def test_a_step_limit_ends_the_iteration_that_reaches_it(make):
    # `rlfleet train --stop '{"timesteps_total": 300}'` sets it: the iteration of 1000 steps ends at
    # the training step that reaches 300 (100 steps each), not a whole iteration later.
    t = make(PGTrainer, "CartPole-v1", timesteps_per_iteration=1000, **FAST_PG)
    t.set_step_limit(300)
    assert t.steps_left() == 300
    r = t.train()
    assert r["timesteps_total"] == 300 and t.steps_left() == 0
    t.set_step_limit(None)
    assert t.train()["timesteps_this_iter"] == 1000 and t.steps_left() is None


def test_a_step_limit_ends_a_time_paced_iteration_at_a_twentieth_of_it(make):
    # A 60 s min_iter_time_s would sample the whole 2000-step budget in one iteration (one mean
    # return over the run); with the limit an iteration ends at 2000 / 20 = 100 steps (one
    # training step), or at its timesteps_per_iteration when that is larger.
    assert REPORTS_PER_STEP_LIMIT == 20
    t = make(PGTrainer, "CartPole-v1", min_iter_time_s=60, **FAST_PG)
    t.set_step_limit(2000)
    r = t.train()
    assert r["timesteps_this_iter"] == 100 and r["time_this_iter_s"] < 30
    t = make(PGTrainer, "CartPole-v1", min_iter_time_s=60, timesteps_per_iteration=300, **FAST_PG)
    t.set_step_limit(2000)
    assert t.train()["timesteps_this_iter"] == 300


def test_min_iter_time_s(make):
    t = make(PGTrainer, CountingEnv, min_iter_time_s=0.25, **dict(FAST_PG, train_batch_size=10,
                                                                  rollout_fragment_length=10))
    r = t.train()
    assert r["time_this_iter_s"] >= 0.25
    assert r["timesteps_this_iter"] > 10 and r["timesteps_this_iter"] % 10 == 0  # several training steps


def test_metrics_smoothing_window(make):
    # Episode k returns exactly k; two 5-step episodes per train() call.
    t = make(PGTrainer, ScriptedEnv, env_config={"episode_len": 5, "reward_is_episode_index": True},
             metrics_smoothing_episodes=3, train_batch_size=10, rollout_fragment_length=10)
    expected = [  # (mean, min, max) over the last <= 3 episodes
        (1.5, 1.0, 2.0),
        (3.0, 2.0, 4.0),
        (5.0, 4.0, 6.0),
    ]
    for i, (mean, lo, hi) in enumerate(expected, start=1):
        r = t.train()
        assert (r["episode_reward_mean"], r["episode_reward_min"], r["episode_reward_max"]) == (mean, lo, hi)
        assert r["episodes_this_iter"] == 2 and r["episodes_total"] == 2 * i
        assert r["hist_stats"]["episode_reward"] == list(range(max(1, 2 * i - 2), 2 * i + 1))


def test_metrics_smoothing_episodes_is_a_minimum(make):
    # As the reference's min_history: all of an iteration's new episodes count, even when
    # more than metrics_smoothing_episodes finished; fewer are padded with earlier ones.
    t = make(PGTrainer, ScriptedEnv, env_config={"episode_len": 5, "reward_is_episode_index": True},
             metrics_smoothing_episodes=3, train_batch_size=30, rollout_fragment_length=30)
    r = t.train()  # episodes 1..6
    assert r["episodes_this_iter"] == 6
    assert r["hist_stats"]["episode_reward"] == [1, 2, 3, 4, 5, 6]
    assert (r["episode_reward_mean"], r["episode_reward_min"]) == (3.5, 1.0)
    r = t.train()  # episodes 7..12: the window is exactly this iteration's
    assert r["hist_stats"]["episode_reward"] == [7, 8, 9, 10, 11, 12] and r["episodes_total"] == 12


def test_episode_window_unit():
    from rlfleet.rollout.episode import RolloutMetrics
    from rlfleet.rollout.metrics import EpisodeWindow

    def eps(*rewards):
        return [RolloutMetrics(episode_length=1, episode_reward=float(r)) for r in rewards]

    w = EpisodeWindow(3)
    assert w.add(eps(1, 2, 3, 4, 5))["hist_stats"]["episode_reward"] == [1, 2, 3, 4, 5]
    r = w.add(eps(6))
    assert r["hist_stats"]["episode_reward"] == [4, 5, 6] and r["episodes_this_iter"] == 1
    assert w.add([])["hist_stats"]["episode_reward"] == [4, 5, 6]
    assert w.total == 6


def test_no_episode_yet_gives_nan_reward(make):
    t = make(PGTrainer, CountingEnv, env_config={"episode_len": 1000}, train_batch_size=10,
             rollout_fragment_length=10)
    r = t.train()
    assert r["episodes_this_iter"] == 0 and np.isnan(r["episode_reward_mean"])


# --- evaluation -------------------------------------------------------------------------------------
def test_evaluation_runs_with_its_own_config(make):
    t = make(PGTrainer, ScriptedEnv, env_config={"episode_len": 5}, evaluation_interval=1,
             evaluation_num_episodes=3, evaluation_config={"explore": False}, **FAST_PG)
    r = t.train()
    ev = r["evaluation"]
    assert ev["episodes_this_iter"] == 3  # one eval env: exactly the 3 episodes asked for
    assert ev["episode_len_mean"] == 5.0 and ev["episode_reward_mean"] == 5.0
    eval_worker = t.evaluation_workers.local_worker()
    assert eval_worker.sampler.settings.explore is False and eval_worker.get_policy().config["explore"] is False
    assert eval_worker.sampler.settings.complete_episodes
    assert t.workers.local_worker().sampler.settings.explore is True
    # The evaluation policy acts with the trained weights.
    for key, value in t.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(value, eval_worker.get_policy().get_weights()[key])
    # Evaluation episodes do not leak into training metrics.
    assert r["episodes_this_iter"] == 20


def test_evaluation_interval_and_several_eval_envs(make):
    t = make(PGTrainer, "CartPole-v1", evaluation_interval=2, evaluation_num_episodes=3,
             evaluation_config={"num_envs_per_worker": 2}, **FAST_PG)
    assert "evaluation" not in t.train()
    r = t.train()
    assert r["evaluation"]["episodes_this_iter"] >= 3
    assert t.evaluation_workers.local_worker().env.num_envs == 2


def test_evaluate_without_interval(make):
    t = make(PGTrainer, CountingEnv, evaluation_num_episodes=2, **FAST_PG)
    out = t.evaluate()
    assert out["evaluation"]["episodes_this_iter"] == 2 and out["evaluation"]["episode_len_mean"] == 5.0


def test_custom_eval_function(make):
    calls = []

    def good(trainer, eval_workers):
        calls.append(eval_workers)
        return {"score": 42}

    t = make(PGTrainer, CountingEnv, evaluation_interval=1, custom_eval_function=good, **FAST_PG)
    assert t.train()["evaluation"] == {"score": 42}
    assert calls and calls[0] is t.evaluation_workers


@pytest.mark.parametrize("bad", [None, 3.5, [1, 2], {}])
def test_custom_eval_function_must_return_a_dict(make, bad):
    t = make(PGTrainer, CountingEnv, evaluation_interval=1, custom_eval_function=lambda tr, ws: bad, **FAST_PG)
    with pytest.raises(ValueError, match="custom_eval_function"):
        t.train()


# --- acting -----------------------------------------------------------------------------------------
def test_compute_single_action_applies_preprocessor_and_filter(make):
    t = make(PPOTrainer, DiscreteObsEnv, observation_filter="MeanStdFilter", seed=0, **FAST_PPO)
    t.train()
    worker = t.workers.local_worker()
    filt = worker.filters["default_policy"]
    n_before = filt.rs.n
    assert n_before > 0 and np.abs(filt.rs.mean).max() > 0.1
    policy = t.get_policy()
    for raw in range(4):
        expected_in = (np.eye(4)[raw] - filt.rs.mean) / (filt.rs.std + 1e-8)
        action, state, extra = t.compute_single_action(raw, explore=False, full_fetch=True)
        want = policy.compute_actions(expected_in[None].astype(np.float32), explore=False)[2]
        np.testing.assert_allclose(extra[SB.ACTION_DIST_INPUTS], want[SB.ACTION_DIST_INPUTS][0], rtol=1e-5, atol=1e-6)
        assert action == int(np.argmax(want[SB.ACTION_DIST_INPUTS][0])) and state == []
        # Plain one-hot input (no filter) would give other network outputs.
        unfiltered = policy.compute_actions(np.eye(4, dtype=np.float32)[raw][None], explore=False)[2]
        assert not np.allclose(unfiltered[SB.ACTION_DIST_INPUTS][0], extra[SB.ACTION_DIST_INPUTS])
    assert filt.rs.n == n_before  # acting does not update the filter
    with pytest.raises(ValueError):
        t.compute_single_action(7)  # not in Discrete(4)


def test_compute_actions_over_a_dict(make):
    t = make(PPOTrainer, "CartPole-v1", seed=0, **FAST_PPO)
    obs = {"a": np.array([0.0, 0.1, 0.0, -0.1], np.float32), 7: np.array([0.1, -0.5, 0.2, 0.3], np.float32)}
    actions = t.compute_actions(obs, explore=False)
    assert set(actions) == {"a", 7}
    for key, o in obs.items():
        assert actions[key] == t.compute_single_action(o, explore=False)
    actions, states, extra = t.compute_actions(obs, explore=False, full_fetch=True)
    assert extra[SB.ACTION_DIST_INPUTS].shape == (2, 2)


def test_compute_single_action_unsquashes_into_env_bounds(make):
    t = make(PPOTrainer, ActionRecordingEnv, seed=0, **FAST_PPO)
    for explore in (False, True):
        for _ in range(20):
            a = t.compute_single_action(np.array([0.5], np.float32), explore=explore)
            assert 2.0 <= float(a[0]) <= 4.0


def test_weights_between_two_trainers(make):
    a = make(PPOTrainer, "CartPole-v1", seed=1, **FAST_PPO)
    b = make(PPOTrainer, "CartPole-v1", seed=2, **FAST_PPO)
    a.train()
    obs = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)

    def dist_inputs(t):
        return t.compute_actions({i: o for i, o in enumerate(obs)}, explore=False, full_fetch=True)[2][
            SB.ACTION_DIST_INPUTS]

    assert not np.allclose(dist_inputs(a), dist_inputs(b))
    b.set_weights(a.get_weights())
    np.testing.assert_array_equal(dist_inputs(a), dist_inputs(b))
    for key, value in a.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(value, b.get_weights()["default_policy"][key])
    with pytest.raises(ValueError, match="nope"):
        b.set_weights({"nope": {}})


# --- log files --------------------------------------------------------------------------------------
def test_log_files(make):
    t = make(PGTrainer, "CartPole-v1", lr=0.00123, **FAST_PG)
    for _ in range(3):
        t.train()
    t.stop()
    params = json.load(open(os.path.join(t.logdir, "params.json")))
    assert params["lr"] == 0.00123 and params["env"] == "CartPole-v1"
    lines = open(os.path.join(t.logdir, "result.json")).read().splitlines()
    assert len(lines) == 3
    assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2, 3]
    rows = list(csv.DictReader(open(os.path.join(t.logdir, "progress.csv"))))
    assert [int(r["training_iteration"]) for r in rows] == [1, 2, 3]
    assert "episode_reward_mean" in rows[0] and "hist_stats/episode_reward" not in rows[0]


# --- seeding ----------------------------------------------------------------------------------------
def test_same_seed_same_results_in_one_process(make):
    config = dict(FAST_PPO, seed=123, num_envs_per_worker=2)
    a = make(PPOTrainer, "CartPole-v1", **config)
    b = make(PPOTrainer, "CartPole-v1", **config)
    ra, rb = [], []
    for _ in range(3):  # interleaved: the two trainers must not disturb each other
        ra.append(a.train()["episode_reward_mean"])
        rb.append(b.train()["episode_reward_mean"])
    assert ra == rb
    for key, value in a.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(value, b.get_weights()["default_policy"][key])


def test_different_seeds_differ(make):
    a = make(PPOTrainer, "CartPole-v1", **dict(FAST_PPO, seed=1))
    b = make(PPOTrainer, "CartPole-v1", **dict(FAST_PPO, seed=2))
    ra, rb = a.train(), b.train()
    assert ra["hist_stats"]["episode_reward"] != rb["hist_stats"]["episode_reward"]


# --- trainer state (get_state / set_state) ----------------------------------------------------------
def test_state_moves_a_run_to_another_trainer_in_memory(make):
    """`get_state()` handed to a trainer with another seed: both then train identically
    (counters, policies, filters, RNGs and the restart seed all come across)."""
    config = dict(FAST_PG, seed=3, observation_filter="MeanStdFilter")
    a = make(PGTrainer, "CartPole-v1", **config)
    a.train()
    state = a.get_state()
    assert state["algorithm"] == "PG" and state["iteration"] == 1
    assert set(state["worker"]) >= {"policies", "filters"}
    b = make(PGTrainer, "CartPole-v1", **dict(config, seed=4))
    b.set_state(state)
    a.set_state(state)  # both restart their episodes from the state's seed
    assert (b.iteration, b.counters, b._episodes.total) == (a.iteration, a.counters, a._episodes.total)
    ra, rb = a.train(), b.train()
    assert ra["hist_stats"]["episode_reward"] == rb["hist_stats"]["episode_reward"]
    for key, value in a.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(value, b.get_weights()["default_policy"][key])


def test_state_of_another_algorithm_or_shape_changes_nothing(make):
    pg = make(PGTrainer, "CartPole-v1", seed=1, **FAST_PG)
    ppo = make(PPOTrainer, "CartPole-v1", seed=2, **FAST_PPO)
    wide = make(PGTrainer, "CartPole-v1", seed=2, **dict(FAST_PG, model={"fcnet_hiddens": [32]}))
    before = ppo.get_weights()
    with pytest.raises(ValueError, match="written by a PG trainer and cannot be restored into a PPO trainer"):
        ppo.set_state(pg.get_state())
    with pytest.raises(ValueError, match=r"has shape \(16, 4\) in the checkpoint, but the model expects \(32, 4\)"):
        wide.set_state(pg.get_state())
    for key, value in before["default_policy"].items():
        np.testing.assert_array_equal(value, ppo.get_weights()["default_policy"][key])


def test_checkpoint_module_keeps_to_the_file_format():
    """rlfleet/checkpoint/ goes through Trainer.get_state / set_state: it never reads a trainer's
    private fields nor probes objects with hasattr/getattr (tensors aside)."""
    import re
    from pathlib import Path

    import rlfleet.checkpoint as checkpoint

    source = "".join(p.read_text(encoding="utf-8") for p in sorted(Path(checkpoint.__file__).parent.glob("*.py")))
    assert not re.search(r"trainer\._\w", source)
    probes = [line for line in source.splitlines() if re.search(r"\b(hasattr|getattr)\(", line)]
    assert probes == ['        if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor']


def test_sampling_and_evaluation_calls_ray_only_in_the_worker_set():
    import re

    src = REPO_ROOT / "src" / "rlfleet"
    files = [*sorted((src / "trainer").rglob("*.py")), *sorted((src / "checkpoint").rglob("*.py")),
             *sorted((src / "algorithms").rglob("*.py"))]
    # ES / ARS's perturbation pool is their worker set (tests/architecture/test_layers.py allows it the same way).
    allowed = {"algorithms/evolution/worker_pool.py"}
    offenders = [str(f.relative_to(src)) for f in files
                 if re.search(r"\bray\.|import_ray", f.read_text("utf-8")) and str(f.relative_to(src)) not in allowed]
    assert offenders == []


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="torch's default is already one thread")
def test_extra_python_environs_for_driver_sets_torch_threads(tmp_path):
    # Torch is imported (and has read OMP_NUM_THREADS) before any trainer exists, so the
    # trainer must apply the thread count to the running torch: fewer threads, not more.
    import subprocess
    import sys

    script = (
        "import os, torch\n"
        "from rlfleet.algorithms.pg import PGTrainer\n"
        "before = torch.get_num_threads()\n"
        "t = PGTrainer(env='CartPole-v1', logdir=LOGDIR, config={'num_cpus_for_driver': 2,\n"
        "              'extra_python_environs_for_driver': {'OMP_NUM_THREADS': '1', 'RLFLEET_TEST_VAR': 7}})\n"
        "print(before, torch.get_num_threads(), os.environ['OMP_NUM_THREADS'], os.environ['RLFLEET_TEST_VAR'])\n"
        "t.stop()\n"
    ).replace("LOGDIR", repr(str(tmp_path)))
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after, omp, var = out.stdout.split()
    assert int(before) >= 2 and (int(after), omp, var) == (1, "1", "7")


def test_extra_python_environs_thread_count_must_be_a_number(tmp_path):
    with pytest.raises(ValueError, match="extra_python_environs_for_driver.*OMP_NUM_THREADS"):
        PGTrainer(env="CartPole-v1", logdir=str(tmp_path),
                  config={"extra_python_environs_for_driver": {"OMP_NUM_THREADS": "many"}})


@pytest.mark.parametrize("wait", [10, 0.5, -1, "10"])
def test_remote_env_batch_wait_ms_other_than_zero_is_refused(wait, tmp_path):
    # Lockstep sampling cannot go on with only the sub-envs that answered: say so, do not ignore it.
    with pytest.raises(ValueError, match="remote_env_batch_wait_ms.*lockstep"):
        PGTrainer(env="CartPole-v1", logdir=str(tmp_path),
                  config={"remote_worker_envs": True, "num_envs_per_worker": 2, "remote_env_batch_wait_ms": wait})


def test_stop_is_idempotent_and_leaves_no_thread(make):
    import threading

    before = {t.ident for t in threading.enumerate()}
    t = make(PPOTrainer, "CartPole-v1", sample_async=True, evaluation_interval=1, evaluation_num_episodes=1,
             evaluation_parallel_to_training=False, **FAST_PPO)
    t.train()
    assert any(th.name.startswith("rlfleet") for th in threading.enumerate())
    logger = t._result_logger
    t.stop()
    t.stop()  # a second call does nothing
    assert logger._closed and t._result_logger is None
    new = [th for th in threading.enumerate() if th.ident not in before]
    for th in new:  # tensorboardX's queue feeder quits on its own once its queue is closed
        th.join(timeout=5)
    assert [th.name for th in new if th.is_alive()] == []


# --- the rest of the reference's Trainer API (issue 11) --------------------------------------------
def test_with_updates_makes_a_new_trainer_class(tmp_path):
    from rlfleet.algorithms.pg import PGTrainer

    seen = []
    MyPG = PGTrainer.with_updates(name="MyPG", default_config={"lr": 0.0123},
                                  validate_config=lambda config: seen.append(config["lr"]))
    assert MyPG._name == "MyPG" and issubclass(MyPG, PGTrainer) and PGTrainer._name == "PG"
    trainer = MyPG(env="CartPole-v1", logdir=str(tmp_path), config={"rollout_fragment_length": 10,
                                                                     "train_batch_size": 10})
    try:
        assert trainer.config["lr"] == 0.0123 and seen == [0.0123] and repr(trainer) == "MyPG"
        assert PGTrainer._default_config["lr"] != 0.0123
    finally:
        trainer.stop()


def test_reference_api_aliases_and_state(tmp_path):
    from rlfleet.algorithms.pg import PGTrainer

    config = {"seed": 0, "rollout_fragment_length": 20, "train_batch_size": 20}
    a = PGTrainer(env="CartPole-v1", logdir=str(tmp_path / "a"), config=config)
    b = PGTrainer(env="CartPole-v1", logdir=str(tmp_path / "b"), config=dict(config, seed=1))
    try:
        for _ in range(3):
            a.train()
        assert "CPU" in PGTrainer.resource_help({"num_workers": 2}) and "num_workers" in PGTrainer.resource_help({})
        metrics = a.collect_metrics()
        assert "episode_reward_mean" in metrics and "sampler_perf" in metrics
        logged = []
        a.callbacks.on_train_result = lambda trainer, result: logged.append(result["training_iteration"])
        a.log_result({"training_iteration": 99})
        assert logged == [99]
        path = a.save_checkpoint(str(tmp_path / "ck"))
        b.load_checkpoint(path)
        assert b.iteration == a.iteration
        b.__setstate__(a.__getstate__())
        for key, value in a.get_weights()["default_policy"].items():
            assert (b.get_weights()["default_policy"][key] == value).all()
        with pytest.raises(TypeError, match="rebuilt from its config"):
            PGTrainer.__new__(PGTrainer).__setstate__(a.__getstate__())
    finally:
        a.cleanup()
        b.stop()
