"""A Gymnasium VectorEnv as a worker's env (rlfleet/env/gym_vector_env.py): in each autoreset
mode no transition crosses an episode boundary and a truncated episode bootstraps from its real
final observation; NaN observations are named by sub-env and step as on the per-env path."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from rlfleet.env.checks import EnvCheckError
from rlfleet.env.gym_vector_env import GymVectorEnv
from tests.envs import make_worker

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
OBS = spaces.Box(-1.0, 1e6, (2,), np.float32)


def episode_len(serial: int) -> int:
    return 2 + serial % 5


def ends_terminated(serial: int) -> bool:
    return serial % 2 == 0  # odd serials end truncated


class CounterEnv(gym.Env):
    """Observations [episode serial, step]; episode `s` lasts `episode_len(s)` steps and ends
    terminated (even s) or truncated (odd s); reward 1. Serials are unique per sub-env."""

    observation_space = OBS
    action_space = spaces.Discrete(2)

    def __init__(self, config=None):
        self.serial = 1000 * getattr(config, "vector_index", 0) - 1
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.serial += 1
        self.t = 0
        return np.array([self.serial, 0], np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t >= episode_len(self.serial)
        term = end and ends_terminated(self.serial)
        return np.array([self.serial, self.t], np.float32), 1.0, term, end and not term, {"t": self.t}


class CounterVectorEnv(gym.vector.VectorEnv):
    """`num_envs` CounterEnvs as one batched env, in the autoreset `mode` given; `nan_at`
    (env, serial, step) puts a NaN into that observation."""

    def __init__(self, num_envs: int, mode: AutoresetMode, nan_at=None):
        self.num_envs = num_envs
        self.metadata = {"autoreset_mode": mode}
        self.single_observation_space, self.single_action_space = OBS, spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(OBS, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.mode, self.nan_at = mode, nan_at
        self.serial = 1000 * np.arange(num_envs) - 1
        self.t = np.zeros(num_envs, np.int64)
        self.done = np.zeros(num_envs, bool)

    def _obs(self):
        obs = np.stack([self.serial, self.t], axis=1).astype(np.float32)
        if self.nan_at is not None:
            i, serial, t = self.nan_at
            if self.serial[i] == serial and self.t[i] == t:
                obs[i, 1] = np.nan
        return obs

    def _reset(self, mask):
        self.serial[mask] += 1
        self.t[mask] = 0
        self.done[mask] = False

    def reset(self, *, seed=None, options=None):
        mask = (options or {}).get("reset_mask", np.ones(self.num_envs, bool))
        self._reset(mask)
        return self._obs(), {}

    def step(self, actions):
        assert self.action_space.contains(np.asarray(actions))
        n = self.num_envs
        resetting = self.done.copy() if self.mode is AutoresetMode.NEXT_STEP else np.zeros(n, bool)
        assert self.mode is not AutoresetMode.DISABLED or not self.done.any(), "stepped an ended env"
        self.t[~resetting] += 1
        self._reset(resetting)
        lengths = 2 + self.serial % 5
        end = (self.t >= lengths) & ~resetting
        term = end & (self.serial % 2 == 0)
        trunc = end & ~term
        rewards = np.where(resetting, 0.0, 1.0)
        self.done = end
        obs, info = self._obs(), {}
        if self.mode is AutoresetMode.SAME_STEP and end.any():
            info = {"final_obs": np.array([o if e else None for o, e in zip(obs, end)], object), "_final_obs": end}
            self._reset(end)
            obs = self._obs()
        return obs, rewards, term, trunc, info


def assert_no_transition_crosses_an_episode(batch):
    obs, new = batch["obs"], batch["new_obs"]
    assert batch.count > 0
    assert (new[:, 0] == obs[:, 0]).all(), "a transition from one episode into another"
    assert (new[:, 1] == obs[:, 1] + 1).all()
    assert (batch["rewards"] == 1).all(), "a reset step recorded as a transition"
    assert (obs[batch["t"] == 0, 1] == 0).all()
    assert (batch["t"] == obs[:, 1]).all()
    done = batch["dones"]
    serials = obs[done, 0].astype(int)
    # The final observation is the real one: the truncated ones bootstrap from it.
    assert (new[done, 1] == [episode_len(s) for s in serials]).all()
    assert (batch["terminateds"][done] == [ends_terminated(s) for s in serials]).all()
    assert (batch["truncateds"][done] == [not ends_terminated(s) for s in serials]).all()
    assert not batch["terminateds"][~done].any() and not batch["truncateds"][~done].any()
    return int(done.sum())


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_each_autoreset_mode_keeps_transitions_inside_episodes(mode):
    worker = make_worker(lambda ctx: CounterVectorEnv(4, mode), {"rollout_fragment_length": 25})
    assert worker.env.num_envs == 4 and worker.env.mode is mode
    ended = 0
    for _ in range(3):  # episodes run across fragment boundaries
        ended += assert_no_transition_crosses_an_episode(worker.sample())
    assert ended >= 30
    lengths = [m.episode_length for m in worker.sampler.pop_metrics()]
    assert lengths and all(2 <= n <= 6 for n in lengths)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gym_env_vectorize_mode_builds_gymnasiums_vector_env_over_the_creator(mode):
    worker = make_worker(CounterEnv, {"gym_env_vectorize_mode": mode, "num_envs_per_worker": 3,
                                      "rollout_fragment_length": 20})
    try:
        assert isinstance(worker.env, GymVectorEnv) and worker.env.num_envs == 3
        for _ in range(2):
            assert_no_transition_crosses_an_episode(worker.sample())
        if mode == "sync":  # the infos of each sub-env, as on the per-env path
            assert worker.env.envs is not None and len(worker.env.envs) == 3
    finally:
        worker.stop()


def test_complete_episodes_with_next_step_autoreset():
    worker = make_worker(lambda ctx: CounterVectorEnv(3, AutoresetMode.NEXT_STEP),
                         {"rollout_fragment_length": 10, "batch_mode": "complete_episodes"})
    batch = worker.sample()
    assert batch["dones"][-1]
    assert_no_transition_crosses_an_episode(batch)


def test_a_hard_horizon_resets_single_sub_envs_with_reset_mask():
    worker = make_worker(CounterEnv, {"gym_env_vectorize_mode": "sync", "num_envs_per_worker": 2, "horizon": 3,
                                      "rollout_fragment_length": 20})
    batch = worker.sample()
    assert batch["new_obs"][:, 1].max() == 3  # no episode runs past the horizon
    assert (batch["new_obs"][:, 0] == batch["obs"][:, 0]).all()
    # On a batched env that resets all sub-envs at once the horizon is refused, by name.
    with pytest.raises(ValueError, match="'horizon': 3 needs the vector env to reset single sub-envs"):
        make_worker("CartPole-v1", {"env": "CartPole-v1", "gym_env_vectorize_mode": "vector_entry_point",
                                    "horizon": 3})


def test_cartpole_vector_entry_point_samples_only_real_transitions():
    worker = make_worker("CartPole-v1", {"env": "CartPole-v1", "gym_env_vectorize_mode": "vector_entry_point",
                                         "num_envs_per_worker": 16,
                                         "rollout_fragment_length": 64, "seed": 1})
    batch = worker.sample()
    assert (batch["rewards"] == 1).all()  # CartPole pays 1 a step: a 0 is a reset step kept
    for eps in np.unique(batch["eps_id"]):
        rows = batch["eps_id"] == eps
        t = batch["t"][rows]
        assert (np.diff(t) == 1).all()
        assert (batch["obs"][rows][1:] == batch["new_obs"][rows][:-1]).all()
    assert 64 * 16 <= batch.count < 64 * 16 + 16  # the dropped reset steps topped up


def test_nan_observation_of_a_batched_env_is_named_by_sub_env_and_step():
    # Sub-env 2's 2nd episode (serial 2001, 3 steps long) gives a NaN at its step 2: after the
    # first episode, where the vectorised check runs.
    worker = make_worker(lambda ctx: CounterVectorEnv(3, AutoresetMode.NEXT_STEP, nan_at=(2, 2001, 2)),
                         {"rollout_fragment_length": 20})
    with pytest.raises(EnvCheckError, match=r"sub-env 2, episode \d+, step 2: observation\[1\] is nan"):
        worker.sample()
    # In the first episode (the detailed check).
    worker = make_worker(lambda ctx: CounterVectorEnv(3, AutoresetMode.SAME_STEP, nan_at=(1, 1000, 1)),
                         {"rollout_fragment_length": 20})
    with pytest.raises(EnvCheckError, match=r"sub-env 1, episode \d+, step 1: observation\[1\] is nan"):
        worker.sample()


def test_settings_a_vector_env_cannot_honour_are_refused_by_name():
    with pytest.raises(ValueError, match="num_envs_per_worker.*is 2; set num_envs_per_worker to 4"):
        make_worker(lambda ctx: CounterVectorEnv(4, AutoresetMode.NEXT_STEP), {"num_envs_per_worker": 2})
    with pytest.raises(ValueError, match="has no vector_entry_point"):
        make_worker("Acrobot-v1", {"env": "Acrobot-v1", "gym_env_vectorize_mode": "vector_entry_point"})
    with pytest.raises(ValueError, match="gym_env_vectorize_mode"):
        make_worker("CartPole-v1", {"gym_env_vectorize_mode": "threads"})
    with pytest.raises(ValueError, match="'remote_worker_envs': True both say"):
        make_worker("CartPole-v1", {"gym_env_vectorize_mode": "sync", "remote_worker_envs": True})


def test_ppo_learns_cartpole_from_gymnasiums_batched_env():
    from rlfleet.algorithms.ppo import PPOTrainer

    trainer = PPOTrainer(config={
        "env": "CartPole-v1", "seed": 0, "num_workers": 0, "gym_env_vectorize_mode": "vector_entry_point",
        "num_envs_per_worker": 64, "rollout_fragment_length": 32, "train_batch_size": 2048,
        "sgd_minibatch_size": 512, "num_sgd_iter": 4, "lr": 0.001, "kl_coeff": 0.0, "vf_clip_param": 10000.0,
        "model": {"fcnet_hiddens": [64, 64]}})
    try:
        for _ in range(40):
            result = trainer.train()
            if result["episode_reward_mean"] >= 200:
                break
        assert result["episode_reward_mean"] >= 200, result["episode_reward_mean"]
        assert result["timesteps_total"] <= 40 * 2048 + 64
    finally:
        trainer.stop()


def test_envpool_is_already_batched_so_a_vectorize_mode_is_refused():
    pytest.importorskip("envpool")
    with pytest.raises(ValueError, match="gym_env_vectorize_mode='sync' is not available with env='envpool:CartPole"):
        make_worker("envpool:CartPole-v1", {"env": "envpool:CartPole-v1", "gym_env_vectorize_mode": "sync"})


def test_record_env_films_sub_env_0_of_a_sync_vector_env(tmp_path):
    pytest.importorskip("moviepy")
    pytest.importorskip("imageio_ffmpeg")
    from rlfleet.algorithms.ppo import PPOTrainer

    trainer = PPOTrainer(config={"env": "CartPole-v1", "gym_env_vectorize_mode": "sync", "num_envs_per_worker": 2,
                                 "record_env": str(tmp_path), "rollout_fragment_length": 100,
                                 "train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 1})
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert list(tmp_path.rglob("*.mp4"))


def test_a_bad_first_observation_after_a_next_step_reset_is_named_at_step_0():
    # Sub-env 2's 2nd episode (serial 2001) starts with a NaN: step 0 of that episode, not a
    # step of the one that ended.
    worker = make_worker(lambda ctx: CounterVectorEnv(3, AutoresetMode.NEXT_STEP, nan_at=(2, 2001, 0)),
                         {"rollout_fragment_length": 20})
    with pytest.raises(EnvCheckError, match=r"sub-env 2, episode \d+, step 0: observation\[1\] is nan"):
        worker.sample()


def _event_callbacks(events):
    from rlfleet.callbacks import DefaultCallbacks

    class Events(DefaultCallbacks):
        def on_episode_start(self, *, episode, env_index, **kw):
            events.append(("start", env_index))

        def on_episode_step(self, *, episode, env_index, **kw):
            events.append(("step", env_index, episode.last_reward_for()))

        def on_episode_end(self, *, episode, env_index, **kw):
            events.append(("end", env_index, episode.length, episode.last_info_for()))

    return Events


def test_episode_callbacks_skip_next_step_reset_rows_and_see_the_ending_steps_info():
    events = []
    worker = make_worker(lambda ctx: CounterVectorEnv(2, AutoresetMode.NEXT_STEP),
                         {"rollout_fragment_length": 20, "callbacks": _event_callbacks(events)})
    worker.sample()
    env0 = [e for e in events if e[1] == 0]
    for before, after in zip(env0, env0[1:]):
        if before[0] == "end":  # the next event of that sub-env starts the next episode
            assert after[0] == "start", env0
    assert all(e[2] == 1.0 for e in env0 if e[0] == "step")  # no reward-0 reset row
    # Same-step envs return the next episode's reset info beside the ending step's: the
    # episode ends with its own last info, as on the per-env path.
    events.clear()
    worker = make_worker(CounterEnv, {"gym_env_vectorize_mode": "sync", "num_envs_per_worker": 2,
                                      "rollout_fragment_length": 20, "callbacks": _event_callbacks(events)})
    worker.sample()
    ends = [e for e in events if e[0] == "end"]
    assert ends and all(e[3]["t"] == e[2] for e in ends), ends
