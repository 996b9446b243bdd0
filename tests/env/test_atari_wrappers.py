"""DeepMind Atari wrappers on a fake ALE-like env (every wrapper alone, the full stack, and the
RolloutWorker choosing it by `preprocessor_pref`), plus a smoke test on real Pong when ale-py
is installed."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.env.wrappers.atari import (
    EpisodicLifeEnv,
    FireResetEnv,
    FrameStack,
    GenericPixelFrame,
    MaxAndSkipEnv,
    NoopResetEnv,
    WarpFrame,
    is_atari,
    resize_area,
    wrap_deepmind,
)


class _Ale:
    def __init__(self, env):
        self.env = env

    def lives(self):
        return self.env.lives_left


class FakeAtari(gym.Env):
    """210x160x3 frames whose pixels encode the frame counter; 3 lives, one lost every
    `life_len` frames; reward = the action taken (so sums are checkable). Logs every call."""

    def __init__(self, life_len: int = 20, meanings=("NOOP", "FIRE", "RIGHT", "LEFT"), frameskip: int = 1):
        self.observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(meanings))
        self.meanings = list(meanings)
        self.life_len = life_len
        self.ale = _Ale(self)
        self._frameskip = frameskip
        self.log = []
        self.frame = 0
        self.lives_left = 3

    def get_action_meanings(self):
        return self.meanings

    def _obs(self):
        img = np.zeros((210, 160, 3), np.uint8)
        img[:, :, 0] = self.frame % 256
        img[self.frame % 210, :, 1] = 200  # a moving line: max-pooling shows two of them
        return img

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.log.append("reset")
        self.frame = 0
        self.lives_left = 3
        return self._obs(), {}

    def step(self, action):
        self.log.append(int(action))
        self.frame += 1
        if self.frame % self.life_len == 0:
            self.lives_left -= 1
        return self._obs(), float(action), self.lives_left == 0, False, {}


def test_noop_reset_takes_1_to_30_noops():
    counts = set()
    for seed in range(20):
        env = NoopResetEnv(FakeAtari(life_len=1000))
        env.reset(seed=seed)
        log = env.unwrapped.log
        assert log[0] == "reset" and set(log[1:]) == {0}
        counts.add(len(log) - 1)
    assert min(counts) >= 1 and max(counts) <= 30 and len(counts) > 5


def test_fire_reset_presses_fire_then_2():
    env = FireResetEnv(FakeAtari())
    env.reset(seed=0)
    assert env.unwrapped.log == ["reset", 1, 2]
    with pytest.raises(ValueError, match="FIRE"):
        FireResetEnv(FakeAtari(meanings=("NOOP", "RIGHT", "LEFT")))


def test_max_and_skip_sums_rewards_and_max_pools_the_last_two_frames():
    inner = FakeAtari(life_len=1000)
    env = MaxAndSkipEnv(inner, skip=4)
    env.reset(seed=0)
    obs, reward, *_ = env.step(3)
    assert reward == 12.0 and inner.frame == 4
    rows = np.flatnonzero(obs[:, 0, 1] == 200)
    assert rows.tolist() == [3, 4]  # frames 3 and 4 max-pooled
    assert obs[0, 0, 0] == 4


def test_episodic_life_ends_episodes_per_life_and_resets_only_on_game_over():
    inner = FakeAtari(life_len=3)
    env = EpisodicLifeEnv(inner)
    env.reset(seed=0)
    ends = []
    for _ in range(3):
        steps, terminated = 0, False
        while not terminated:
            _, _, terminated, _, _ = env.step(2)
            steps += 1
        ends.append(steps)
        env.reset()
    assert ends == [3, 2, 2]  # after a lost life, reset takes one no-op step
    assert inner.log.count("reset") == 2  # the first reset, then the real game over


def test_warp_frame_is_grayscale_dim_by_dim_uint8():
    env = WarpFrame(FakeAtari(), dim=84)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8 and env.observation_space.contains(obs)
    frame = np.full((4, 6, 3), [100, 50, 200], np.uint8)
    gray = WarpFrame(FakeAtari(), dim=2).observation(frame)
    assert gray.shape == (2, 2, 1) and np.all(gray == round(0.299 * 100 + 0.587 * 50 + 0.114 * 200))
    # Area interpolation averages whole blocks for integer ratios.
    img = np.arange(16, dtype=np.uint8).reshape(4, 4)
    np.testing.assert_array_equal(resize_area(img, 2, 2), [[2, 4], [10, 12]])  # 2.5->2, 4.5->4 (round half even)


def test_frame_stack_keeps_the_last_four_frames_in_order():
    env = FrameStack(WarpFrame(FakeAtari(life_len=1000), dim=10), 4)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (10, 10, 4) and env.observation_space.shape == (10, 10, 4)
    assert np.all(obs == obs[..., :1])  # the first frame repeated
    for _ in range(5):
        obs, *_ = env.step(0)
    # Red channel = frame counter, grayscale weights it by 0.299: frames 2, 3, 4, 5 (in the
    # bottom rows, away from the moving line).
    np.testing.assert_array_equal(obs[9, 0], np.round(0.299 * np.array([2, 3, 4, 5])).astype(np.uint8))


def test_wrap_deepmind_full_stack():
    env = wrap_deepmind(FakeAtari(), dim=84, framestack=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    assert env.observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    names = []
    e = env
    while isinstance(e, gym.Wrapper):
        names.append(type(e).__name__)
        e = e.env
    assert names == ["FrameStack", "WarpFrame", "FireResetEnv", "EpisodicLifeEnv", "MaxAndSkipEnv", "NoopResetEnv"]
    # An env that skips frames itself (ALE v5) gets no second frame skip; framestack off.
    env = wrap_deepmind(FakeAtari(frameskip=4), dim=42, framestack=False)
    assert env.observation_space.shape == (42, 42, 1)
    assert "MaxAndSkipEnv" not in repr(env)


def _register_fake(name: str) -> None:
    if name not in gym.registry:
        gym.register(name, entry_point=FakeAtari)


@pytest.mark.parametrize("pref,shape", [("deepmind", (42, 42, 4)), ("rllib", (42, 42, 3))])
def test_worker_applies_the_preprocessing_preprocessor_pref_asks_for(pref, shape):
    _register_fake("FakeGameNoFrameskip-v4")
    assert is_atari(gym.make("FakeGameNoFrameskip-v4"))
    trainer = PPOTrainer(env="FakeGameNoFrameskip-v4", config={
        "preprocessor_pref": pref, "seed": 0, "rollout_fragment_length": 8, "train_batch_size": 8,
        "sgd_minibatch_size": 8, "num_sgd_iter": 1, "model": {"dim": 42},
    })
    try:
        worker = trainer.workers.local_worker()
        assert worker.env.observation_space.shape == shape
        batch = worker.sample()
        assert batch["obs"].dtype == np.uint8 and batch["obs"].shape == (8, *shape)
        assert set(np.unique(batch["rewards"])) <= {0.0, 1.0}  # clip_rewards None: sign-clipped for Atari
        if pref == "rllib":
            assert isinstance(worker.env.envs[0], GenericPixelFrame)
        else:  # wrapped once, though both the trainer's creator and the worker wrap
            assert type(worker.env.envs[0].env).__name__ == "WarpFrame"
        # Whatever else builds envs from the trainer's creator (evaluation) gets them too.
        assert trainer.env_creator({}).observation_space.shape == shape
    finally:
        trainer.stop()


@pytest.mark.slow
def test_pong_smoke():
    pytest.importorskip("ale_py", reason="ale-py is not installed (pip install 'rlfleet[atari]')")
    trainer = PPOTrainer(env="ALE/Pong-v5", config={
        "seed": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 32, "train_batch_size": 64,
        "sgd_minibatch_size": 32, "num_sgd_iter": 1, "model": {"vf_share_layers": True},
    })
    try:
        worker = trainer.workers.local_worker()
        assert worker.env.observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] == 128
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
        batch = worker.sample()
        assert batch["obs"].dtype == np.uint8 and batch["obs"].shape[1:] == (84, 84, 4)
    finally:
        trainer.stop()
