"""Built-in action masking: a Dict observation with an "action_mask" entry.

A single-agent env whose legal actions change every step (Discrete and MultiDiscrete), the
model's input without the mask, the errors, and PPO and DQN in self-play on PettingZoo's
connect four (masked and trained: no illegal move in 1,000 steps).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.models.action_mask import FLOAT_MIN, ActionMaskModel


class ShiftingLegalActionsEnv(gym.Env):
    """Each step a random half of the actions is legal; an illegal one scores -1 and is counted."""

    def __init__(self, config=None):
        config = config or {}
        self.multi = bool(config.get("multi", False))
        self.key = config.get("key", "action_mask")
        self.nvec = [4, 3] if self.multi else [6]
        self.action_space = gym.spaces.MultiDiscrete(self.nvec) if self.multi else gym.spaces.Discrete(6)
        self.observation_space = gym.spaces.Dict({
            self.key: gym.spaces.Box(0, 1, (sum(self.nvec),), np.int8),
            "position": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        })
        self.illegal = 0
        self.rng = np.random.default_rng(0)

    def _obs(self):
        parts = []
        for n in self.nvec:
            part = np.zeros(n, np.int8)
            part[self.rng.choice(n, size=max(1, n // 2), replace=False)] = 1
            parts.append(part)
        self.mask = np.concatenate(parts)
        return {self.key: self.mask, "position": self.rng.uniform(-1, 1, 3).astype(np.float32)}

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        choices = np.atleast_1d(action)
        offsets = np.concatenate([[0], np.cumsum(self.nvec)[:-1]])
        legal = all(self.mask[o + int(a)] for o, a in zip(offsets, choices))
        self.illegal += not legal
        self.t += 1
        return self._obs(), 1.0 if legal else -1.0, False, self.t >= 50, {}


def _illegal_moves(trainer, steps: int) -> int:
    worker = trainer.workers.local_worker()
    worker.foreach_env(lambda env: setattr(env.unwrapped, "illegal", 0))
    sampled = 0
    while sampled < steps:
        sampled += worker.sample().env_steps()
    return sum(worker.foreach_env(lambda env: env.unwrapped.illegal))


@pytest.mark.parametrize("multi", [False, True], ids=["discrete", "multidiscrete"])
def test_ppo_never_takes_an_illegal_action_and_its_model_sees_the_rest(multi):
    trainer = PPOTrainer(env=ShiftingLegalActionsEnv, config={
        "seed": 0, "env_config": {"multi": multi}, "rollout_fragment_length": 200, "train_batch_size": 200,
        "sgd_minibatch_size": 100, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}})
    try:
        model = trainer.get_policy().model
        assert isinstance(model, ActionMaskModel)
        # the inner net's first layer takes the 3 "position" values, not the mask
        first = next(m for m in model.inner.modules() if isinstance(m, torch.nn.Linear))
        assert first.in_features == 3
        trainer.train()
        assert _illegal_moves(trainer, 1000) == 0
        # greedy (deterministic) actions are legal too
        env = ShiftingLegalActionsEnv({"multi": multi})
        obs, _ = env.reset(seed=3)
        for _ in range(50):
            obs, *_ = env.step(trainer.compute_single_action(obs, explore=False))
        assert env.illegal == 0
    finally:
        trainer.stop()


def test_without_the_mask_key_the_same_env_makes_illegal_moves():
    # The control for the test above: the key names the entry, so with another key nothing is masked.
    trainer = PPOTrainer(env=ShiftingLegalActionsEnv, config={
        "seed": 0, "rollout_fragment_length": 200, "train_batch_size": 200, "sgd_minibatch_size": 100,
        "model": {"action_mask_key": "legal", "fcnet_hiddens": [16]}})
    try:
        assert not isinstance(trainer.get_policy().model, ActionMaskModel)
        assert _illegal_moves(trainer, 1000) > 100
    finally:
        trainer.stop()


def test_dqn_masks_acting_exploration_and_the_target_argmax():
    trainer = DQNTrainer(env=ShiftingLegalActionsEnv, config={
        "seed": 0, "learning_starts": 100, "timesteps_per_iteration": 300, "min_iter_time_s": 0,
        "rollout_fragment_length": 4, "train_batch_size": 32, "hiddens": [16], "model": {"fcnet_hiddens": [16]},
        "exploration_config": {"initial_epsilon": 1.0, "final_epsilon": 0.5, "epsilon_timesteps": 1000}})
    try:
        trainer.train()
        assert _illegal_moves(trainer, 1000) == 0  # epsilon >= 0.5: half the actions are random
        model = trainer.get_policy().model
        obs = torch.as_tensor(trainer.workers.local_worker().sample()["obs"][:8])
        q, _ = model.q_values(model.target_q_net, obs)
        mask = obs[:, :6] > 0.5  # the Dict's keys are sorted: "action_mask" comes first
        assert bool((q[~mask] == FLOAT_MIN).all()) and bool((q[mask] > FLOAT_MIN).all())
        first = next(m for m in model.q_net.modules() if isinstance(m, torch.nn.Linear))
        assert first.in_features == 3  # the net sees "position", not the mask
    finally:
        trainer.stop()


def test_a_row_that_allows_nothing_stays_unmasked_and_bad_masks_are_named():
    from rlfleet.models.action_mask import mask_layout
    from rlfleet.models.preprocessors import get_preprocessor

    env = ShiftingLegalActionsEnv()
    box = get_preprocessor(env.observation_space).observation_space
    layout = mask_layout(box, env.action_space, {})
    values = torch.zeros(2, 6)
    mask = torch.tensor([[1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.float32)
    out = layout.apply(values, mask)
    assert out[0].tolist() == [0, FLOAT_MIN, 0, FLOAT_MIN, FLOAT_MIN, FLOAT_MIN]
    assert out[1].tolist() == [0] * 6
    with pytest.raises(ValueError, match="has 6 entries, but the action space Discrete\\(4\\) has 4"):
        mask_layout(box, gym.spaces.Discrete(4), {})
    with pytest.raises(ValueError, match="masking needs Discrete or MultiDiscrete"):
        mask_layout(box, gym.spaces.Box(-1, 1, (6,)), {})
    with pytest.raises(ValueError, match="action_mask_key"):
        PPOTrainer(env=ShiftingLegalActionsEnv, config={"model": {"action_mask_key": ""}})


@pytest.mark.parametrize("trainer_cls", [PPOTrainer, DQNTrainer], ids=["PPO", "DQN"])
def test_self_play_on_connect_four_makes_no_illegal_move(trainer_cls):
    pytest.importorskip("pettingzoo.classic")
    from pettingzoo.classic import connect_four_v3

    from rlfleet.env.pettingzoo import PettingZooEnv
    from rlfleet.env.registry import register_env

    class CountingConnectFour(PettingZooEnv):
        """Counts moves the board's mask forbids (PettingZoo would end the game on one)."""

        illegal = 0

        def step(self, action_dict):
            agent = self.env.agent_selection
            if not self.env.observe(agent)["action_mask"][action_dict[agent]]:
                CountingConnectFour.illegal += 1
            return super().step(action_dict)

    common = {"seed": 0, "env_config": {}, "multiagent": {
        "policies": {"shared"}, "policy_mapping_fn": lambda agent_id, episode, worker, **kw: "shared"},
        "model": {"fcnet_hiddens": [64]}}
    if trainer_cls is PPOTrainer:
        config = dict(common, rollout_fragment_length=200, train_batch_size=400, sgd_minibatch_size=100,
                      num_sgd_iter=2)
    else:
        config = dict(common, learning_starts=200, timesteps_per_iteration=400, min_iter_time_s=0,
                      rollout_fragment_length=8, train_batch_size=32, hiddens=[32])
    register_env("counting_connect_four", lambda ctx: CountingConnectFour(connect_four_v3.env()))
    trainer = trainer_cls(env="counting_connect_four", config=config)
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["info"]["learner"], "no learning happened"
        CountingConnectFour.illegal = 0
        worker, played = trainer.workers.local_worker(), 0
        while played < 1000:
            played += worker.sample().env_steps()
        assert CountingConnectFour.illegal == 0
    finally:
        trainer.stop()


class BoardWithMaskEnv(gym.Env):
    """A 3 x 4 board of two planes beside a mask: the legal moves are the columns whose top
    cell is empty in both planes; reward 1 for a legal move."""

    def __init__(self, config=None):
        self.extra = bool((config or {}).get("extra"))
        self.pixels = bool((config or {}).get("uint8"))  # the board as 0 / 255 pixels
        spaces = {"board": gym.spaces.Box(0, 255 if self.pixels else 1, (3, 4, 2),
                                          np.uint8 if self.pixels else np.float32),
                  "action_mask": gym.spaces.Box(0, 1, (4,), np.int8)}
        if self.extra:
            spaces["turn"] = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Discrete(4)
        self.illegal = 0

    def _obs(self):
        mask = (self.board[0].sum(-1) == 0).astype(np.int8)
        board = (self.board * 255).astype(np.uint8) if self.pixels else self.board.copy()
        obs = {"board": board, "action_mask": mask}
        if self.extra:
            obs["turn"] = 0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.board = self.np_random.integers(0, 2, (3, 4, 2)).astype(np.float32)
        self.board[0, self.np_random.integers(4)] = 0  # one legal column at least
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        legal = bool(self._obs()["action_mask"][action])
        self.illegal += not legal
        self.board = self.np_random.integers(0, 2, (3, 4, 2)).astype(np.float32)
        self.board[0, self.np_random.integers(4)] = 0
        self.t += 1
        return self._obs(), float(legal), False, self.t >= 10, {}


@pytest.mark.parametrize("trainer_cls, uint8", [(PPOTrainer, False), (DQNTrainer, False), (PPOTrainer, True),
                                                (DQNTrainer, True)], ids=["PPO", "DQN", "PPO-uint8", "DQN-uint8"])
def test_a_board_beside_the_mask_reaches_conv_filters_in_its_shape(trainer_cls, uint8):
    filters = [[16, [3, 4], 1]]  # one "valid" layer: its input is the board, unpadded
    config = {"seed": 0, "model": {"conv_filters": filters}, "rollout_fragment_length": 50,
              "train_batch_size": 100, "env_config": {"uint8": uint8}}
    if trainer_cls is DQNTrainer:
        config.update(learning_starts=50, timesteps_per_iteration=100, min_iter_time_s=0, train_batch_size=32)
    else:
        config.update(sgd_minibatch_size=50, num_sgd_iter=1)
    trainer = trainer_cls(env=BoardWithMaskEnv, config=config)
    try:
        model = trainer.get_policy().model
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert convs and convs[0].in_channels == 2  # the board's planes are the channels
        seen = []
        hook = convs[0].register_forward_hook(lambda module, inputs, out: seen.append(inputs[0]))
        env = BoardWithMaskEnv({"uint8": uint8})
        obs, _ = env.reset(seed=1)
        trainer.compute_single_action(obs, explore=False)
        hook.remove()
        # the conv got the board itself ([C, H, W] of the [H, W, C] entry), not the mask; uint8
        # pixels scaled to [-1, 1] (model.zero_mean), as for a plain image observation
        expected = torch.as_tensor(obs["board"], dtype=torch.float32).permute(2, 0, 1)
        if uint8:
            expected = expected * (2.0 / 255.0) - 1.0
        assert torch.allclose(seen[0][0], expected, atol=1e-6)
        trainer.train()
        assert _illegal_moves(trainer, 300) == 0
    finally:
        trainer.stop()


def test_conv_filters_beside_a_mask_and_two_other_entries_is_refused():
    with pytest.raises(ValueError, match="conv_filters.*beside an action mask, one"):
        PPOTrainer(env=BoardWithMaskEnv, config={"env_config": {"extra": True},
                                                 "model": {"conv_filters": [[8, [2, 2], 1]]}})


def test_conv_filters_on_flat_observations_is_refused_for_every_trained_policy():
    from rlfleet.algorithms.bandits import BanditLinUCBTrainer
    from rlfleet.env.examples.bandits import LinearContextualBandit

    filters = [[8, [2, 2], 1]]
    with pytest.raises(ValueError, match="'model.conv_filters'.*policy 'default_policy' sees observations of shape"):
        PPOTrainer(env="CartPole-v1", config={"model": {"conv_filters": filters}})
    # a trained policy without a torch model (the linear bandits) reads no conv_filters either
    with pytest.raises(ValueError, match="'model.conv_filters'"):
        BanditLinUCBTrainer(env=LinearContextualBandit, config={"model": {"conv_filters": filters}})
