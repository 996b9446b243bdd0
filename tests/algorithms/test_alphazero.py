"""AlphaZero: the search (a one-move win, masks, the save/restore hooks), ranked rewards, the
loss against NumPy, the connect four env against PettingZoo's rules, short training runs on
one- and two-player envs, checkpoint round trip, export, and remote self-play workers."""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.alphazero import AlphaZeroTrainer, SearchGame, SearchSettings, alphazero_loss, search
from rlfleet.algorithms.alphazero.mcts import choose_action, ranked
from rlfleet.algorithms.alphazero.players import play_match, random_player
from rlfleet.algorithms.alphazero.ranked_rewards import RankedRewardBuffer
from rlfleet.env.examples.connect_four import AGENTS, ConnectFourEnv
from rlfleet.env.examples.sparse_corridor import SparseCorridorEnv

C4 = "rlfleet.env.examples.connect_four:ConnectFourEnv"
CORRIDOR = "rlfleet.env.examples.sparse_corridor:SparseCorridorEnv"
GREEDY = dict(argmax_tree_policy=True, add_dirichlet_noise=False)


def uniform(num_actions: int):
    """A network that knows nothing: uniform priors, value 0."""
    def evaluate(obs_list):
        return np.full((len(obs_list), num_actions), 1.0 / num_actions), np.zeros(len(obs_list))
    return evaluate


def _position(moves):
    env = ConnectFourEnv()
    obs, _ = env.reset()
    for i, column in enumerate(moves):
        obs, *_ = env.step({AGENTS[i % 2]: column})
    game = SearchGame(env)
    (mover, single), = obs.items()
    return game, env.get_state(), single, mover


# --- the search -------------------------------------------------------------------------------
def test_search_finds_the_one_move_win_and_the_block():
    # player_0 has three on the bottom row (columns 0-2); player_1 has three in column 6.
    game, state, obs, mover = _position([0, 6, 1, 6, 2, 6])
    rng = np.random.default_rng(0)
    tree, = search([game], [(state, obs, mover, 0.0)], uniform(7), SearchSettings(num_simulations=60, **GREEDY),
                   rng, bounded=True)
    assert mover == "player_0" and choose_action(tree, SearchSettings(**GREEDY), rng) == 3
    assert tree.W[0, 3] / tree.N[0, 3] == pytest.approx(1.0)  # a won game, from the mover's side
    # player_0 has three up column 0; player_1, to move, must block there.
    game, state, obs, mover = _position([0, 6, 0, 5, 0])
    tree, = search([game], [(state, obs, mover, 0.0)], uniform(7), SearchSettings(num_simulations=200, **GREEDY),
                   rng, bounded=True)
    assert mover == "player_1" and choose_action(tree, SearchSettings(**GREEDY), rng) == 0


def test_search_never_tries_a_masked_move():
    # A full column in connect four, and the corridor's jump at the cell before the goal.
    game, state, obs, mover = _position([3, 3, 3, 3, 3, 3])
    assert obs["action_mask"][3] == 0
    rng = np.random.default_rng(1)
    trees = search([game], [(state, obs, mover, 0.0)], uniform(7), SearchSettings(num_simulations=50), rng,
                   bounded=True)
    assert trees[0].N[0, 3] == 0 and trees[0].P[0, 3] == 0 and trees[0].N[0].sum() == 50
    env = SparseCorridorEnv()
    env.reset()
    obs = env.set_state((8, 3))
    assert obs["action_mask"].tolist() == [1, 1, 0]
    tree, = search([SearchGame(env)], [(env.get_state(), obs, 0, 0.0)], uniform(3), SearchSettings(num_simulations=30),
                   rng, bounded=False)
    assert tree.N[0, 2] == 0 and (tree.N[:tree.size, 2] == 0).all()


def test_search_batches_many_games_in_lockstep():
    # Two games searched together give each its own tree; a network call serves both.
    calls = []

    def counting(obs_list):
        calls.append(len(obs_list))
        return uniform(7)(obs_list)
    (g1, s1, o1, m1), (g2, s2, o2, m2) = _position([0, 6, 1, 6, 2, 6]), _position([])
    trees = search([g1, g2], [(s1, o1, m1, 0.0), (s2, o2, m2, 0.0)], counting, SearchSettings(num_simulations=10),
                   np.random.default_rng(0), bounded=True)
    assert [t.N[0].sum() for t in trees] == [10, 10]
    assert calls[0] == 2 and len(calls) <= 11


class NoHooks(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, True, False, {}


def test_an_env_without_get_state_and_set_state_is_refused_naming_both(tmp_path):
    with pytest.raises(ValueError, match=r"get_state\(\) and no set_state\(\)"):
        SearchGame(NoHooks())
    with pytest.raises(ValueError, match="get_state"):
        AlphaZeroTrainer(env=NoHooks, config={"num_workers": 0}, logdir=str(tmp_path))


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ValueError, match="observation_filter"):
        AlphaZeroTrainer(env=CORRIDOR, config={"observation_filter": "MeanStdFilter"}, logdir=str(tmp_path))
    with pytest.raises(ValueError, match="num_simulations"):
        AlphaZeroTrainer(env=CORRIDOR, config={"mcts_config": {"num_simulations": 0}}, logdir=str(tmp_path))


# --- ranked rewards and the loss ---------------------------------------------------------------
def test_ranked_rewards_rank_against_the_percentile_and_flip_a_coin_on_ties():
    buffer = RankedRewardBuffer(percentile=75, max_length=4)
    buffer.add([1.0, 2.0, 3.0, 4.0, 5.0])  # the oldest falls out
    assert buffer.threshold() == pytest.approx(np.percentile([2, 3, 4, 5], 75))
    rng = np.random.default_rng(0)
    assert ranked(5.0, 4.25, rng) == 1.0 and ranked(4.0, 4.25, rng) == -1.0
    ties = {ranked(4.25, 4.25, rng) for _ in range(50)}
    assert ties == {-1.0, 1.0}
    restored = RankedRewardBuffer(75, 4)
    restored.set_state(buffer.get_state())
    assert list(restored.returns) == [2.0, 3.0, 4.0, 5.0]


def test_loss_matches_numpy_on_a_fixed_batch(tmp_path):
    trainer = AlphaZeroTrainer(env=CORRIDOR, config={"num_workers": 0, "seed": 0, "model": {"fcnet_hiddens": [8]}},
                               logdir=str(tmp_path))
    try:
        policy = trainer.get_policy()
        env = SparseCorridorEnv()
        pp = trainer.workers.local_worker().preprocessors["default_policy"]
        obs = np.stack([pp.transform(env.set_state((p, 0))) for p in (0, 8)])
        pi = np.array([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]], np.float32)  # the jump is illegal at cell 8
        z = np.array([1.0, -1.0], np.float32)
        batch = {"obs": torch.as_tensor(obs), "mcts_policies": torch.as_tensor(pi), "value_label": torch.as_tensor(z)}
        loss, stats = alphazero_loss(policy, policy.model, policy.dist_class, batch)
        priors, values = policy.evaluate(obs)
        ce = -np.mean([sum(p * np.log(q) for p, q in zip(pr, qr) if p > 0) for pr, qr in zip(pi, priors)])
        mse = np.mean((values - z) ** 2)
        assert priors[1, 2] == 0.0  # the mask reached the network's priors
        assert float(stats["policy_loss"]) == pytest.approx(ce, rel=1e-4)
        assert float(stats["vf_loss"]) == pytest.approx(mse, rel=1e-4)
        assert float(loss.detach()) == pytest.approx(ce + mse, rel=1e-4)
    finally:
        trainer.stop()


# --- the connect four env ----------------------------------------------------------------------
def test_connect_four_plays_by_pettingzoos_rules():
    connect_four_v3 = pytest.importorskip("pettingzoo.classic.connect_four_v3")
    rng = np.random.default_rng(0)
    for game in range(20):
        theirs, ours = connect_four_v3.env(), ConnectFourEnv()
        theirs.reset(seed=game)
        obs, _ = ours.reset()
        while True:
            agent = theirs.agent_selection
            observation, _, terminated, _, _ = theirs.last()
            if terminated:
                break
            mine = obs[agent]
            assert np.array_equal(mine["observation"], observation["observation"])
            assert np.array_equal(mine["action_mask"], observation["action_mask"])
            column = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            theirs.step(column)
            obs, rewards, terminated_ours, _, _ = ours.step({agent: column})
            if terminated_ours["__all__"]:
                assert {a: theirs.rewards[a] for a in AGENTS} == {a: rewards[a] for a in AGENTS}
                break


# --- training ----------------------------------------------------------------------------------
SHORT = {"num_workers": 0, "seed": 0, "rollout_fragment_length": 20, "train_batch_size": 40,
         "sgd_minibatch_size": 20, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]},
         "mcts_config": {"num_simulations": 6}, "ranked_rewards": {"num_init_rewards": 10}}


def test_short_single_player_train_with_ranked_rewards(tmp_path):
    from rlfleet.algorithms.alphazero.players import play_episode
    trainer = AlphaZeroTrainer(env=CORRIDOR, config=SHORT, logdir=str(tmp_path))
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert result["timesteps_total"] >= 40 and result["episodes_this_iter"] > 0
        assert 0 <= result["episode_reward_mean"] <= SparseCorridorEnv().optimal_return()
        assert np.isfinite(stats["ranked_rewards_threshold"]) and stats["replay_rows"] == result["timesteps_total"]
        after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in after)
        # The search as a player: a legal episode whose return the task allows.
        ret = play_episode(SearchGame(SparseCorridorEnv()), trainer.search_player(num_simulations=10))
        assert 0 <= ret <= SparseCorridorEnv().optimal_return()
    finally:
        trainer.stop()


def test_two_player_self_play_on_connect_four_learns_from_both_seats(tmp_path):
    config = dict(SHORT, num_envs_per_worker=2, ranked_rewards={"enable": False})
    trainer = AlphaZeroTrainer(env=C4, config=config, logdir=str(tmp_path))
    try:
        result = trainer.train()
        assert result["episodes_this_iter"] >= 1 and result["episode_reward_mean"] == 0.0  # zero-sum
        labels = trainer._replay.columns["value_label"]
        assert set(np.unique(labels)) <= {-1.0, 0.0, 1.0} and (labels == 1.0).any() and (labels == -1.0).any()
        pi = trainer._replay.columns["mcts_policies"]
        assert np.allclose(pi.sum(1), 1.0)
        # The network alone acts legally on a raw observation (a full column is never chosen).
        _, _, obs, _ = _position([3, 3, 3, 3, 3, 3])
        assert all(trainer.compute_single_action(obs, explore=e) != 3 for e in (True, False) for _ in range(10))
    finally:
        trainer.stop()


def test_checkpoint_round_trip_and_export(tmp_path):
    trainer = AlphaZeroTrainer(env=CORRIDOR, config=SHORT, logdir=str(tmp_path / "a"))
    restored = AlphaZeroTrainer(env=CORRIDOR, config=SHORT, logdir=str(tmp_path / "b"))
    try:
        trainer.train()
        path = trainer.save(str(tmp_path / "ckpt"))
        restored.restore(path)
        for key, value in trainer.get_policy().get_weights().items():
            assert np.array_equal(value, restored.get_policy().get_weights()[key])
        for key, column in trainer._replay.columns.items():
            assert np.array_equal(column, restored._replay.columns[key])
        assert list(restored._ranked.returns) == list(trainer._ranked.returns)
        assert restored._round == trainer._round
        # Both continue the same way: same self-play, same updates.
        a, b = trainer.train(), restored.train()
        assert a["timesteps_total"] == b["timesteps_total"]
        assert a["hist_stats"]["episode_reward"][-a["episodes_this_iter"]:] == \
            b["hist_stats"]["episode_reward"][-b["episodes_this_iter"]:]
        for key, value in trainer.get_policy().get_weights().items():
            assert np.array_equal(value, restored.get_policy().get_weights()[key])
        exported = trainer.export_policy_model(str(tmp_path / "export"))
        assert os.path.exists(exported) or os.listdir(str(tmp_path / "export"))
    finally:
        trainer.stop()
        restored.stop()


def test_trained_search_beats_random_play_quickly(tmp_path):
    # The search with a barely trained network already wins most games against random moves.
    config = dict(SHORT, num_envs_per_worker=2, ranked_rewards={"enable": False})
    trainer = AlphaZeroTrainer(env=C4, config=config, logdir=str(tmp_path))
    try:
        trainer.train()
        player = trainer.search_player(num_simulations=25)
        counts = play_match(SearchGame(ConnectFourEnv()), player, random_player(3), 6)
        assert counts["illegal"] == 0 and counts["win"] >= 5, counts
    finally:
        trainer.stop()


@pytest.mark.slow
def test_remote_self_play_workers(tmp_path, ray_session):
    config = dict(SHORT, num_workers=2, num_envs_per_worker=2)
    trainer = AlphaZeroTrainer(env=CORRIDOR, config=config, logdir=str(tmp_path))
    try:
        first, second = trainer.train(), trainer.train()
        assert first["num_healthy_workers"] == 2
        assert second["timesteps_total"] > first["timesteps_total"] >= 40
        assert second["episodes_total"] > first["episodes_total"] > 0
        # The remote workers search with the learner's latest weights.
        local = trainer.get_policy().get_weights()
        remote = trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())[1:]
        assert len(remote) == 2
        for weights in remote:
            assert all(np.array_equal(local[k], weights[k]) for k in local)
    finally:
        trainer.stop()
