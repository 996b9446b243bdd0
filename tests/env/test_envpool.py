"""EnvPool as a vector-env backend (`env: "envpool:<id>"`, rlfleet/env/envpool_env.py): the
config string, spaces and seeds, EnvPool's next-step autoreset mapped onto rlfleet's episode
ends (no transition from a final observation to the next episode's first), PPO on it, and
the errors a user meets. Skipped where envpool is not installed (`pip install envpool`)."""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

envpool = pytest.importorskip("envpool")

from rlfleet.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy, PPOTrainer  # noqa: E402
from rlfleet.config import merge_configs, validate_config  # noqa: E402
from rlfleet.env.envpool_env import EnvPoolCreator, EnvPoolVectorEnv  # noqa: E402
from rlfleet.env.episode_rules import EpisodeRules  # noqa: E402
from rlfleet.env.registry import resolve_env  # noqa: E402
from rlfleet.policy.sample_batch import SampleBatch  # noqa: E402
from rlfleet.rollout.rollout_worker import RolloutWorker  # noqa: E402
from rlfleet.utils.seeding import derive_seed  # noqa: E402
from tests.helpers import load_tuned_example, train_until  # noqa: E402

SB = SampleBatch
CARTPOLE = "envpool:CartPole-v1"


def make_worker(*, env: str = CARTPOLE, worker_index: int = 0, **overrides) -> RolloutWorker:
    config = merge_configs(DEFAULT_CONFIG, {"env": env, "num_envs_per_worker": 4, "rollout_fragment_length": 100,
                                            "seed": 3, "model": {"fcnet_hiddens": [16]}, **overrides})
    validate_config(config)
    _, creator = resolve_env(env)
    return RolloutWorker(env_creator=creator, policy_class=PPOTorchPolicy, config=config,
                         worker_index=worker_index, num_workers=max(worker_index, 0))


def env_rows(batch: SampleBatch, i: int) -> SampleBatch:
    """Sub-env `i`'s rows of a fast-path batch (env-major, so contiguous)."""
    return batch.slice(*np.flatnonzero(batch[SB.ENV_ID] == i)[[0, -1]] + [0, 1])


# --- the config string -----------------------------------------------------------------
def test_config_string_builds_one_pool_of_num_envs_per_worker():
    name, creator = resolve_env(CARTPOLE)
    assert name == CARTPOLE and isinstance(creator, EnvPoolCreator)  # not Gymnasium's "module:Id" form
    worker = make_worker(num_envs_per_worker=3)
    try:
        assert isinstance(worker.env, EnvPoolVectorEnv) and worker.env.num_envs == 3
        assert worker.env.observation_space.shape == (4,) and worker.env.action_space.n == 2
        batch = worker.sample()
        assert batch.count == 300 and sorted(set(batch[SB.ENV_ID])) == [0, 1, 2]
    finally:
        worker.stop()


def test_unknown_id_lists_close_matches():
    with pytest.raises(ValueError, match=r"not an EnvPool task id.*'envpool:CartPole-v1'"):
        resolve_env("envpool:CartPol-v1")


def test_missing_envpool_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # `import envpool` raises ImportError
    with pytest.raises(ImportError, match="pip install"):
        resolve_env(CARTPOLE)


def test_env_config_goes_to_envpool_make_and_reserved_keys_are_refused():
    worker = make_worker(env_config={"max_episode_steps": 12}, seed=0)
    try:
        # A random CartPole policy often lasts past 12 steps: those episodes are truncated
        # (bootstrapped), not terminated.
        batch = worker.sample()
        ends = batch[SB.DONES]
        assert batch[SB.T].max() == 11 and ends.any()
        at_limit = ends & (batch[SB.T] == 11)
        assert at_limit.any() and not batch[SB.TERMINATEDS][at_limit].any()
        assert batch[SB.TRUNCATEDS][at_limit].all()
    finally:
        worker.stop()
    with pytest.raises(ValueError, match="num_envs_per_worker"):
        make_worker(env_config={"num_envs": 3})
    with pytest.raises(ValueError, match=r"\['not_an_option'\].*max_episode_steps"):
        make_worker(env_config={"not_an_option": 1})


def test_unsupported_settings_name_the_key():
    with pytest.raises(ValueError, match="remote_worker_envs"):
        make_worker(remote_worker_envs=True)


# --- episode ends ----------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*precision lowered")  # EnvPool's float32 Box from float64 bounds
def test_transitions_across_autoreset_match_envpool_step_by_step():
    """Replays each sub-env's recorded actions on a fresh one-env pool with the same seed,
    stepping it as EnvPool does by itself (the step after an end returns the reset
    observation): every recorded row is a real step, the rows after an end start the next
    episode from exactly EnvPool's reset observation, and no row goes from a final
    observation to a reset one (that row would have reward 0 here)."""
    seed, n = 3, 4
    worker = make_worker(seed=seed, num_envs_per_worker=n)
    try:
        batch = worker.sample()
    finally:
        worker.stop()
    assert batch[SB.DONES].sum() >= n  # every sub-env crossed at least one reset (random policy)
    assert (batch[SB.REWARDS] == 1.0).all()
    for i in range(n):
        rows = env_rows(batch, i)
        ref = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=1,
                           seed=[derive_seed(seed, 0, i) & 0x7FFFFFFF])
        obs, _ = ref.reset()
        assert np.array_equal(rows[SB.OBS][0], obs[0])
        for k in range(rows.count):
            if k > 0:
                assert np.array_equal(rows[SB.OBS][k], obs[0]), (i, k)
            obs, reward, term, trunc, _ = ref.step(np.array([rows[SB.ACTIONS][k]]))
            assert np.array_equal(rows[SB.NEXT_OBS][k], obs[0]) and reward[0] == rows[SB.REWARDS][k]
            assert bool(rows[SB.DONES][k]) == bool(term[0] or trunc[0])
            assert bool(rows[SB.TERMINATEDS][k]) == bool(term[0])
            if term[0] or trunc[0]:
                assert rows[SB.T][k + 1:k + 2].tolist() in ([], [0])  # the next row starts an episode
                obs, reward, *_ = ref.step(np.array([0]))  # EnvPool's own reset step ...
                assert reward[0] == 0.0  # ... which the sampler never recorded
            else:
                assert rows[SB.T][k + 1:k + 2].tolist() in ([], [rows[SB.T][k] + 1])
                assert rows[SB.EPS_ID][k + 1:k + 2].tolist() in ([], [rows[SB.EPS_ID][k]])


def test_horizon_and_soft_horizon_apply_as_for_gymnasium_envs():
    venv = EnvPoolVectorEnv("CartPole-v1", num_envs=2, seeds=[1, 2], rules=EpisodeRules(horizon=3))
    venv.reset_all()
    steps = [venv.step([1, 0]) for _ in range(4)]
    assert [bool(s.ends[0]) for s in steps] == [False, False, True, False]
    assert steps[2].terminateds.all() and set(steps[2].reset_obs) == {0, 1}  # the reference's done=True
    assert not np.array_equal(steps[2].reset_obs[0], steps[2].obs[0])  # reset, not continued
    soft = EnvPoolVectorEnv("CartPole-v1", num_envs=1, seeds=[1], rules=EpisodeRules(horizon=2, soft_horizon=True))
    soft.reset_all()
    s1, s2, s3 = (soft.step([i % 2]) for i in range(3))
    assert s2.ends[0] and s2.terminateds[0] and np.array_equal(s2.reset_obs[0], s2.obs[0])  # the env goes on
    assert not s3.ends[0]
    venv.close()
    soft.close()


def test_infos_are_one_dict_per_env():
    venv = EnvPoolVectorEnv("CartPole-v1", num_envs=3, seeds=[1, 2, 3])
    venv.reset_all()
    infos = venv.step([0, 1, 0]).infos
    assert len(infos) == 3 and [int(info["env_id"]) for info in infos] == [0, 1, 2]
    assert int(infos[2]["elapsed_step"]) == 1
    venv.close()


# --- seeds -----------------------------------------------------------------------------
def test_same_seed_same_samples_and_workers_differ():
    def first_obs(**kw):
        worker = make_worker(**kw)
        try:
            return worker.sample()[SB.OBS]
        finally:
            worker.stop()

    a = first_obs(seed=11)
    assert np.array_equal(a, first_obs(seed=11))
    assert not np.array_equal(a, first_obs(seed=12))
    assert not np.array_equal(a[:1], first_obs(seed=11, worker_index=1)[:1])
    assert not np.array_equal(a[:1], first_obs(seed=None)[:1])


def test_restart_episodes_reseeds_the_pool():
    worker = make_worker(seed=5)
    try:
        first = worker.sample()[SB.OBS][:1]
        worker.sample()
        worker.restart_episodes(5)
        assert np.array_equal(worker.sample()[SB.OBS][:1], first)
    finally:
        worker.stop()


# --- training --------------------------------------------------------------------------
def test_ppo_trains_and_episode_stats_follow_cartpole(tmp_path):
    config = {"num_envs_per_worker": 4, "rollout_fragment_length": 50, "train_batch_size": 400,
              "sgd_minibatch_size": 100, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}, "seed": 4}
    trainer = PPOTrainer(env=CARTPOLE, config=config, logdir=str(tmp_path))
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] == 800 and result["episodes_total"] > 0
        hist = result["hist_stats"]
        # CartPole pays 1 per step: a return equals its length, at most 500 (v1's time limit).
        assert hist["episode_reward"] == [float(n) for n in hist["episode_lengths"]]
        assert 0 < max(hist["episode_lengths"]) <= 500
        assert result["episode_reward_mean"] == pytest.approx(result["episode_len_mean"])
    finally:
        trainer.stop()


@pytest.mark.slow
def test_ppo_learns_cartpole_on_envpool(tmp_path):
    # tuned_examples/ppo/cartpole-ppo.yaml on EnvPool's CartPole, with a seed it does not use.
    config = {**load_tuned_example("ppo/cartpole-ppo.yaml").config, "seed": 21}
    trainer = PPOTrainer(env=CARTPOLE, config=config, logdir=str(tmp_path))
    start = time.perf_counter()
    try:
        result, history = train_until(trainer, reward=150, max_timesteps=60_000)
    finally:
        trainer.stop()
    assert result["episode_reward_mean"] >= 150, history
    assert max(result["hist_stats"]["episode_lengths"]) <= 500
    assert time.perf_counter() - start < 60  # ~10 s on an idle 2-core machine


def test_remote_workers_each_build_their_own_pool(ray_session, tmp_path):
    config = {"num_workers": 2, "num_cpus_per_worker": 0.25, "num_envs_per_worker": 2,
              "rollout_fragment_length": 25, "train_batch_size": 100, "sgd_minibatch_size": 50, "num_sgd_iter": 1,
              "model": {"fcnet_hiddens": [16]}, "seed": 6}
    trainer = PPOTrainer(env=CARTPOLE, config=config, logdir=str(tmp_path))
    try:
        result = trainer.train()
        assert result["num_healthy_workers"] == 2 and result["timesteps_total"] >= 100
        pools = trainer.workers.foreach_worker(lambda w: repr(w.env))[1:]
        assert pools == ["EnvPoolVectorEnv('CartPole-v1', num_envs=2)"] * 2
        first = [b[SB.OBS][0].tolist() for b in ray_session.get([w.sample.remote()
                                                                  for w in trainer.workers.remote_workers()])]
        assert first[0] != first[1]  # seeded per worker
    finally:
        trainer.stop()


# --- Atari -----------------------------------------------------------------------------
def test_atari_images_come_channels_last_and_rewards_are_clipped():
    worker = make_worker(env="envpool:Pong-v5", num_envs_per_worker=2, rollout_fragment_length=10,
                         model={"conv_filters": [[4, [8, 8], 8], [8, [11, 11], 1]], "fcnet_hiddens": [8]})
    try:
        assert worker.env.observation_space.shape == (84, 84, 4) and worker.env.is_atari
        assert worker.sampler.settings.reward_clipper is not None  # clip_rewards: None means "Atari: clip"
        batch = worker.sample()
        assert batch[SB.OBS].shape == (20, 84, 84, 4) and batch[SB.OBS].dtype == np.uint8
        # The frame stack's newest frame is the last channel: stepping shifts it back by one.
        assert np.array_equal(batch[SB.NEXT_OBS][0][..., :3], batch[SB.OBS][0][..., 1:])
    finally:
        worker.stop()


# --- MuJoCo ----------------------------------------------------------------------------
def test_mujoco_box_actions_reach_the_pool():
    worker = make_worker(env="envpool:HalfCheetah-v4", num_envs_per_worker=2, rollout_fragment_length=10)
    try:
        assert worker.env.observation_space.shape == (17,) and worker.env.action_space.shape == (6,)
        batch = worker.sample()
        assert batch[SB.OBS].dtype == np.float32 and batch[SB.ACTIONS].shape == (20, 6)
        assert np.isfinite(batch[SB.REWARDS]).all()
    finally:
        worker.stop()
    # HalfCheetah's control cost is -0.1 * |action|^2 (info "reward_ctrl"): the actions arrive.
    venv = EnvPoolVectorEnv("HalfCheetah-v4", num_envs=2, seeds=[1, 2])
    venv.reset_all()
    infos = venv.step(np.array([[0.5] * 6, [1.0] * 6])).infos
    assert [float(info["reward_ctrl"]) for info in infos] == pytest.approx([-0.15, -0.6])
    venv.close()
