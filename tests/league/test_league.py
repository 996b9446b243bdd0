"""League self-play (rlfleet/league): PFSP matchmaking against known counts, the per-episode
seat mapping, and PPO on connect four through the PettingZoo AEC adapter with action masks:
snapshots on schedule, the league table in results and TensorBoard, snapshots spilled by
the policy map's LRU, checkpoint round trips, and no illegal move."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from rlfleet.league import League, LeagueCallbacks, LeagueMapping, LeagueSettings
from tests.helpers import read_tb_scalars

pytest.importorskip("pettingzoo.classic")
from pettingzoo.classic import connect_four_v3  # noqa: E402

SEATS = ("player_0", "player_1")


# --------------------------------------------------------------------------------------
# PFSP matchmaking and the table, on known counts
# --------------------------------------------------------------------------------------
def _league(**settings) -> League:
    league = League(LeagueSettings(**settings))
    for sid, (w, l, d) in {"main_v1": (7, 3, 0), "main_v2": (2, 6, 2), "main_v3": (10, 0, 0)}.items():
        league.add_snapshot(sid)
        league.record(sid, "win", w)
        league.record(sid, "loss", l)
        league.record(sid, "draw", d)
    league.add_snapshot("main_v4")  # not played yet
    return league


def test_pfsp_probabilities_follow_loss_rates_with_a_floor():
    league = _league(self_play_prob=0.25, pfsp_p=2.0, pfsp_floor=0.05)
    loss = {"main_v1": 1 - 0.7, "main_v2": 1 - (2 + 1) / 10, "main_v3": 0.0}
    weights = {"main_v1": loss["main_v1"] ** 2, "main_v2": loss["main_v2"] ** 2,
               "main_v3": 0.05, "main_v4": 1.0}  # v3: beaten every time, kept at the floor; v4: untried
    total = sum(weights.values())
    probs = league.probabilities()
    assert probs["main"] == pytest.approx(0.25)
    for sid, w in weights.items():
        assert probs[sid] == pytest.approx(0.75 * w / total)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert league.table()["main_v2"] == {"win_rate": pytest.approx(0.3), "games": 10}
    assert "main_v4" not in league.table()
    # p = 1 weighs by the loss rate itself
    flat = _league(self_play_prob=0.0, pfsp_p=1.0).probabilities()
    assert flat["main_v2"] / flat["main_v1"] == pytest.approx(0.7 / 0.3)
    assert League(LeagueSettings()).probabilities() == {"main": 1.0}  # no snapshot yet: self-play only


def test_the_random_member_keeps_a_fixed_share_before_and_after_snapshots():
    league = _league(self_play_prob=0.2, pfsp_p=2.0, pfsp_floor=0.05, random_prob=0.25)
    probs = league.probabilities()
    plain = _league(self_play_prob=0.2, pfsp_p=2.0, pfsp_floor=0.05).probabilities()
    assert probs["random"] == pytest.approx(0.25) and probs["main"] == pytest.approx(0.2)
    for sid in ("main_v1", "main_v2", "main_v3", "main_v4"):  # PFSP over the rest: 0.55 of 0.8
        assert probs[sid] == pytest.approx(plain[sid] * 0.55 / 0.8)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert League(LeagueSettings(random_prob=0.25)).probabilities() == {"main": 0.75, "random": 0.25}
    assert "random" not in plain  # random_prob 0 (the default): no such member, the same draws as before
    with pytest.raises(ValueError, match="random_prob: 0.8 must be .*self_play_prob \\(0.2\\) \\+ random_prob below 1"):
        LeagueSettings(self_play_prob=0.2, random_prob=0.8)
    with pytest.raises(ValueError, match="main: 'random' must be another id than 'random'"):
        LeagueSettings(main="random", random_prob=0.1)


def test_keep_best_takes_the_highest_win_rate_against_the_random_member_ties_to_the_later():
    from rlfleet.league.league import BEST_MIN_GAMES

    league = League(LeagueSettings(random_prob=0.2, keep_best=True))
    n = BEST_MIN_GAMES
    assert not league.offer_best({"win": n - 1, "loss": 0, "draw": 0}, 1)  # too few games to judge
    assert league.offer_best({"win": n, "loss": n, "draw": 0}, 2)
    assert not league.offer_best({"win": n - 1, "loss": n + 1, "draw": 0}, 3)
    assert league.offer_best({"win": n, "loss": n - 2, "draw": 2}, 4)  # draws count half
    assert league.offer_best({"win": 2 * n, "loss": 2 * n - 4, "draw": 4}, 5)  # a tie: the later main
    assert league.best == {"win_rate": pytest.approx(0.5 + 1 / (2 * n)), "games": 4 * n, "iteration": 5}
    other = League(LeagueSettings(random_prob=0.2, keep_best=True))
    other.load_state(league.to_state())
    assert other.best == league.best
    assert "best" not in League(LeagueSettings()).to_state()
    with pytest.raises(ValueError, match="keep_best: True must be a bool, True only with random_prob > 0"):
        LeagueSettings(keep_best=True)


def test_league_state_round_trips_and_bad_settings_name_the_key():
    league = _league()
    other = League(LeagueSettings())
    other.load_state(league.to_state())
    assert other.to_state() == league.to_state() and other.probabilities() == league.probabilities()
    with pytest.raises(ValueError, match="main policy 'main'.*LeagueSettings\\(main='main'\\)"):
        League(LeagueSettings(main="hero")).load_state(league.to_state())
    with pytest.raises(ValueError, match="pfsp_floor: 0.0 must be a number in \\(0, 1\\]"):
        LeagueSettings(pfsp_floor=0.0)
    with pytest.raises(ValueError, match="seats"):
        LeagueSettings(seats=("a", "a"))
    with pytest.raises(ValueError, match="self_play_prob"):
        LeagueSettings(self_play_prob=1.0)


class _Episode:
    def __init__(self, episode_id):
        self.episode_id, self.user_data = episode_id, {}


def test_mapping_gives_main_one_seat_alternating_and_draws_opponents_by_probability():
    probs = {"main": 0.2, "main_v1": 0.5, "main_v2": 0.3}
    mapping = LeagueMapping(main="main", seats=SEATS, probabilities=probs, seed=3)
    drawn, first_seat = [], 0
    for eid in range(4000):
        ep = _Episode(eid)
        pids = [mapping(a, ep) for a in SEATS]
        opponent = ep.user_data["league"]["opponent"]
        main_agent = ep.user_data["league"]["main_agent"]
        assert main_agent == SEATS[eid % 2] and pids[SEATS.index(main_agent)] == "main"
        assert pids[1 - SEATS.index(main_agent)] == opponent  # the other seat: the drawn opponent
        assert mapping(SEATS[0], _Episode(eid)) == pids[0]  # the same episode id, the same draw
        drawn.append(opponent)
        first_seat += main_agent == SEATS[0]
    assert first_seat == 2000
    for pid, p in probs.items():
        assert drawn.count(pid) / len(drawn) == pytest.approx(p, abs=0.03)
    with pytest.raises(ValueError, match="agent 'player_9' is none of the league's seats"):
        mapping("player_9", _Episode(0))


# --------------------------------------------------------------------------------------
# PPO on connect four
# --------------------------------------------------------------------------------------
class CountingConnectFour:
    """The AEC adapter on connect four, counting moves the board's mask forbids."""

    illegal = 0

    @staticmethod
    def make(ctx=None):
        from rlfleet.env.pettingzoo import PettingZooEnv

        class Counting(PettingZooEnv):
            def step(self, action_dict):
                agent = self.env.agent_selection
                if not self.env.observe(agent)["action_mask"][action_dict[agent]]:
                    CountingConnectFour.illegal += 1
                return super().step(action_dict)
        return Counting(connect_four_v3.env())


class SeatCheckingLeague(LeagueCallbacks):
    """Also checks every finished episode's seats (local worker: num_workers 0)."""

    settings = LeagueSettings(snapshot_every=2, self_play_prob=0.3)
    seatings: list = []

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        if "league" in episode.user_data:
            SeatCheckingLeague.seatings.append((list(episode.agent_rewards),
                                                dict(episode.user_data["league"])))
        super().on_episode_end(worker=worker, base_env=base_env, policies=policies, episode=episode,
                               env_index=env_index, **kwargs)


def _config(**overrides):
    config = {"seed": 0, "callbacks": SeatCheckingLeague, "num_envs_per_worker": 2,
              "multiagent": {"policies": {"main"}, "policies_to_train": ["main"],
                             "policy_mapping_fn": lambda agent_id, *args, **kwargs: "main",
                             "policy_map_capacity": 2},
              "model": {"fcnet_hiddens": [32]}, "rollout_fragment_length": 100, "train_batch_size": 200,
              "sgd_minibatch_size": 100, "num_sgd_iter": 1}
    config.update(overrides)
    return config


@pytest.fixture(scope="module")
def league_run(tmp_path_factory):
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.registry import register_env

    register_env("league_connect_four", CountingConnectFour.make)
    CountingConnectFour.illegal = 0
    SeatCheckingLeague.seatings = []
    logdir = tmp_path_factory.mktemp("league")
    trainer = PPOTrainer(env="league_connect_four", config=_config(), logdir=str(logdir / "run"))
    results = [trainer.train() for _ in range(5)]
    yield trainer, results, logdir
    trainer.stop()


def test_snapshots_on_schedule_and_spilled_beyond_the_policy_map_capacity(league_run):
    trainer, results, _ = league_run
    assert [sorted(r["league"]) for r in results] == [
        ["main"], ["main", "main_v1"], ["main", "main_v1"], ["main", "main_v1", "main_v2"],
        ["main", "main_v1", "main_v2"]]
    policy_map = trainer.workers.local_worker().policy_map
    assert list(policy_map) == ["main", "main_v1", "main_v2"]
    assert trainer.workers.local_worker().policies_to_train == ["main"]
    # capacity 2: a snapshot lives on disk until an episode draws it again
    assert len(policy_map.in_memory()) == 2 and len(policy_map.spilled()) == 1
    # snapshots are frozen copies of main at their iteration: v1 != v2, neither trained since
    v1, v2 = (trainer.get_policy(p).get_weights() for p in ("main_v1", "main_v2"))
    assert any(not np.array_equal(v1[k], v2[k]) for k in v1)


def test_the_table_counts_every_league_game_and_main_holds_exactly_one_seat(league_run):
    trainer, results, _ = league_run
    seatings = SeatCheckingLeague.seatings
    games = sum(row["games"] for row in results[-1]["league"].values())
    assert games == len(seatings) > 0
    assert results[-1]["episodes_total"] - 2 <= games <= results[-1]["episodes_total"]  # 2 envs began unmapped
    assert results[-1]["league"]["main_v1"]["games"] > 0
    firsts = 0
    for agent_policies, match in seatings:
        by_agent = dict(agent_policies)  # [(agent, policy)] -> {agent: policy}
        assert len(agent_policies) == 2 and set(by_agent) == set(SEATS)
        main_agent = match["main_agent"]
        other = SEATS[1 - SEATS.index(main_agent)]
        assert by_agent[main_agent] == "main" and by_agent[other] == match["opponent"]
        firsts += main_agent == SEATS[0]
    assert abs(firsts - len(seatings) / 2) <= 0.2 * len(seatings)
    assert sum(1 for _, m in seatings if m["opponent"] != "main") > 0
    table = results[-1]["league"]
    assert set(table["main"]) == {"win_rate", "games", "prob"}
    assert sum(row["prob"] for row in table.values()) == pytest.approx(1.0)


def test_the_league_table_reaches_tensorboard_and_no_move_was_illegal(league_run):
    trainer, results, logdir = league_run
    trainer.workers.local_worker().sample()  # a few more games, through the counting env
    assert CountingConnectFour.illegal == 0
    scalars = read_tb_scalars(str(logdir / "run"))
    for column in ("games", "win_rate", "prob"):
        step, value = scalars[f"league/main_v1/{column}"][-1]
        assert value == pytest.approx(results[-1]["league"]["main_v1"][column])


def test_checkpoint_round_trip_restores_snapshots_counts_and_mapping(league_run, tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer

    trainer, results, _ = league_run
    path = trainer.save(str(tmp_path))
    restored = PPOTrainer(env="league_connect_four", config=_config(), logdir=str(tmp_path / "restored"))
    try:
        early = restored.save(str(tmp_path / "early"))  # no snapshot yet
        restored.restore(path)
        assert restored.callbacks.league.to_state() == trainer.callbacks.league.to_state()
        assert list(restored.workers.local_worker().policy_map) == ["main", "main_v1", "main_v2"]
        for pid in ("main", "main_v1", "main_v2"):
            mine, theirs = restored.get_policy(pid).get_weights(), trainer.get_policy(pid).get_weights()
            assert all(np.array_equal(mine[k], theirs[k]) for k in mine)
        mapping = restored.workers.local_worker().policy_mapping_fn
        assert isinstance(mapping, LeagueMapping)
        assert mapping.match(7) == trainer.callbacks.mapping().match(7)
        result = restored.train()
        assert result["league"]["main_v1"]["games"] >= results[-1]["league"]["main_v1"]["games"]
        restored.restore(early)  # back before the snapshots: they leave every worker
        assert list(restored.workers.local_worker().policy_map) == ["main"]
        assert restored.callbacks.league.to_state() == {"main": "main", "snapshots": [], "games": {}}
    finally:
        restored.stop()


def test_head_to_head_games_against_a_random_legal_player(league_run):
    from rlfleet.league.matches import play_games, policy_player, random_legal_player

    trainer, _, _ = league_run
    counts = play_games(connect_four_v3.env, policy_player(trainer, "main"), random_legal_player(1), 10)
    assert counts["illegal"] == 0 and counts["win"] + counts["loss"] + counts["draw"] == 10


def test_a_league_without_its_main_policy_or_with_snapshots_training_is_refused(tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer

    with pytest.raises(ValueError, match="main policy 'main' is not in 'multiagent.policies'"):
        PPOTrainer(env="league_connect_four", logdir=str(tmp_path / "a"), config=_config(multiagent={
            "policies": {"hero"}, "policy_mapping_fn": lambda agent_id, *args, **kwargs: "hero"}))
    with pytest.raises(ValueError, match="set it to \\['main'\\]"):
        PPOTrainer(env="league_connect_four", logdir=str(tmp_path / "b"), config=_config(multiagent={
            "policies": {"main", "other"}, "policy_mapping_fn": lambda agent_id, *args, **kwargs: "main"}))


def test_the_random_member_plays_uniformly_among_legal_moves_and_stays_frozen(tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.registry import register_env

    register_env("league_connect_four", CountingConnectFour.make)
    league = functools.partial(LeagueCallbacks, LeagueSettings(snapshot_every=1, random_prob=0.4))
    trainer = PPOTrainer(env="league_connect_four", config=_config(callbacks=league), logdir=str(tmp_path / "run"))
    try:
        results = [trainer.train() for _ in range(2)]
        assert list(trainer.workers.local_worker().policy_map)[:2] == ["main", "random"]
        assert results[-1]["league"]["random"]["games"] > 0
        assert results[-1]["league"]["random"]["prob"] == pytest.approx(0.4)
        weights = trainer.get_policy("random").get_weights()
        assert all(not np.any(w) for w in weights.values())  # never trained
        env = connect_four_v3.env()
        env.reset(seed=0)
        for _ in range(6):  # column 0 full: its move is illegal
            env.step(0)
        obs = env.observe(env.agent_selection)
        moves = np.bincount([trainer.compute_single_action(obs, policy_id="random", explore=True)
                             for _ in range(600)], minlength=7)
        assert moves[0] == 0 and moves[1:].min() >= 60  # 100 expected for each legal column
        path = trainer.save(str(tmp_path / "ckpt"))
        restored = PPOTrainer(env="league_connect_four", config=_config(callbacks=league),
                              logdir=str(tmp_path / "restored"))
        try:
            restored.restore(path)
            assert list(restored.workers.local_worker().policy_map) == list(trainer.workers.local_worker().policy_map)
            assert restored.callbacks.mapping().match(5) == trainer.callbacks.mapping().match(5)
        finally:
            restored.stop()
    finally:
        trainer.stop()


def test_keep_best_copies_the_weights_that_played_the_best_iteration(tmp_path, monkeypatch):
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.registry import register_env

    monkeypatch.setattr("rlfleet.league.league.BEST_MIN_GAMES", 1)  # a few games per iteration here
    register_env("league_connect_four", CountingConnectFour.make)
    league = functools.partial(LeagueCallbacks, LeagueSettings(snapshot_every=1, random_prob=0.6, keep_best=True))
    trainer = PPOTrainer(env="league_connect_four", config=_config(callbacks=league), logdir=str(tmp_path / "run"))
    try:
        played_by = {}  # iteration -> the weights main played that iteration's games with
        weights = trainer.get_policy("main").get_weights()
        for _ in range(4):
            result = trainer.train()
            played_by[result["training_iteration"]] = weights
            weights = trainer.get_policy("main").get_weights()
        best = trainer.callbacks.league.best
        assert result["league_best"] == best and 2 <= best["iteration"] <= 4  # the first is not judged
        kept = trainer.get_policy("main_best").get_weights()
        assert all(np.array_equal(kept[k], played_by[best["iteration"]][k]) for k in kept)
        assert "main_best" not in result["league"]  # never an opponent
        path = trainer.save(str(tmp_path / "ckpt"))
        restored = PPOTrainer(env="league_connect_four", config=_config(callbacks=league),
                              logdir=str(tmp_path / "restored"))
        try:
            restored.restore(path)
            again = restored.get_policy("main_best").get_weights()
            assert restored.callbacks.league.best == best
            assert all(np.array_equal(again[k], kept[k]) for k in kept)
        finally:
            restored.stop()
    finally:
        trainer.stop()


def test_games_on_remote_workers_reach_the_table_and_snapshots_reach_the_workers(ray_session, tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.registry import register_env

    register_env("league_connect_four", CountingConnectFour.make)
    # Settings given to the class through a partial, not a subclass.
    league = functools.partial(LeagueCallbacks, LeagueSettings(snapshot_every=2, self_play_prob=0.5))
    config = _config(num_workers=1, callbacks=league, num_envs_per_worker=1)
    trainer = PPOTrainer(env="league_connect_four", config=config, logdir=str(tmp_path / "run"))
    try:
        results = [trainer.train() for _ in range(2)]
        remote_ids = trainer.workers.foreach_worker(lambda w: sorted(w.policy_map))
        assert remote_ids == [["main", "main_v1"]] * 2
        mine = trainer.get_policy("main_v1").get_weights()
        theirs = trainer.workers.foreach_worker(lambda w: w.get_policy("main_v1").get_weights())[1]
        assert all(np.array_equal(mine[k], theirs[k]) for k in mine)
        result = trainer.train()
        assert results[-1]["league"]["main"]["games"] > 0
        assert result["league"]["main_v1"]["games"] > 0  # drawn on the remote worker, counted here
    finally:
        trainer.stop()


def test_the_example_settings_build_a_league_trainer(tmp_path):
    # examples/league_connect_four.py's settings (measured in docs/guides/league.md)
    # are valid keys of a PPO league trainer.
    from examples.league_connect_four import ConnectFourLeague, config
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.registry import register_env

    register_env("league_connect_four", CountingConnectFour.make)
    trainer = PPOTrainer(env="league_connect_four", config=config(0), logdir=str(tmp_path))
    try:
        assert isinstance(trainer.callbacks, ConnectFourLeague)
        assert trainer.config["lambda"] == 0.95 and trainer.config["entropy_coeff_schedule"][-1] == [400_000, 0.0]
        assert trainer.workers.local_worker().policies_to_train == ["main"]
        settings = trainer.callbacks.settings
        assert settings.random_prob == 0.3 and settings.keep_best and settings.fixed_shares == {"heuristic": 0.3}
        assert {"random", "heuristic"} <= set(trainer.workers.local_worker().policy_map)
        convs = [m for m in trainer.get_policy("main").model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert convs and convs[0].in_channels == 2  # the [6, 7, 2] board, seen as an image
    finally:
        trainer.stop()


# --------------------------------------------------------------------------------------
# Fixed members and the scripted connect four player
# --------------------------------------------------------------------------------------
def test_fixed_members_keep_their_shares_and_bad_ones_name_the_key():
    league = _league(self_play_prob=0.2, random_prob=0.25, fixed_members={"heuristic": 0.15})
    probs = league.probabilities()
    plain = _league(self_play_prob=0.2).probabilities()
    assert probs["heuristic"] == pytest.approx(0.15) and probs["random"] == pytest.approx(0.25)
    for sid in ("main_v1", "main_v2", "main_v3", "main_v4"):  # PFSP over the rest: 0.4 of 0.8
        assert probs[sid] == pytest.approx(plain[sid] * 0.4 / 0.8)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert League(LeagueSettings(fixed_members={"a": 0.1, "b": 0.2})).probabilities() == pytest.approx(
        {"main": 0.7, "a": 0.1, "b": 0.2})
    settings = LeagueSettings(fixed_members={"heuristic": 0.3})
    assert settings.fixed_shares == {"heuristic": 0.3} and hash(settings)  # frozen: stored as pairs
    for bad in ({"main": 0.1}, {"random": 0.1}, {"main_v2": 0.1}, {"h": 0.0}, {"h": "0.1"}, "heuristic"):
        with pytest.raises(ValueError, match="fixed_members: .* must be a dict \\{policy id: share\\}"):
            LeagueSettings(fixed_members=bad)
    with pytest.raises(ValueError, match="random_prob: 0.5 .*fixed_members' shares, 0.4"):
        LeagueSettings(self_play_prob=0.2, random_prob=0.5, fixed_members={"h": 0.4})


def _board(mine=(), theirs=()):
    """A (6, 7, 2) connect four observation with pieces at (row, column); row 5 is the bottom."""
    board = np.zeros((6, 7, 2), np.int8)
    for plane, cells in ((0, mine), (1, theirs)):
        for r, c in cells:
            board[r, c, plane] = 1
    return board


def test_the_heuristic_wins_when_it_can_blocks_when_it_must_and_is_random_otherwise():
    from rlfleet.policy.examples.connect_four import heuristic_move

    rng = np.random.default_rng(0)
    legal = np.ones(7, np.int8)
    # Its own horizontal three on the bottom row and the opponent's vertical three: it wins.
    both = _board(mine=[(5, 1), (5, 2), (5, 3)], theirs=[(5, 6), (4, 6), (3, 6)])
    assert {heuristic_move(both, legal, rng) for _ in range(20)} <= {0, 4}
    # Only the opponent's three (a diagonal whose fourth cell is playable now): it blocks.
    diagonal = _board(mine=[(5, 1), (5, 2), (4, 2), (5, 3), (4, 3), (5, 5)],
                      theirs=[(5, 0), (4, 1), (3, 2), (3, 3), (4, 4), (5, 4)])
    assert heuristic_move(diagonal, legal, rng) == 3
    # A column's landing cell, not its top: the vertical three in column 6 is blocked at row 2.
    assert heuristic_move(_board(theirs=[(5, 6), (4, 6), (3, 6)]), legal, rng) == 6
    # Nothing to win or block: uniform over the legal columns only.
    moves = np.bincount([heuristic_move(_board(), np.array([0, 1, 1, 1, 1, 1, 1]), rng) for _ in range(600)],
                        minlength=7)
    assert moves[0] == 0 and moves[1:].min() >= 60


def test_loss_reasons_and_lost_games_replay():
    from rlfleet.policy.examples.connect_four import heuristic_player, loss_reason
    from rlfleet.league.matches import play_games, random_legal_player

    # Seat 0 stacks column 0 and seat 1 column 1: seat 1 never blocks, seat 0 wins on its fourth.
    assert loss_reason([0, 1, 0, 1, 0, 1, 0], seat=1) == "missed a block"
    # Seat 1 had three in column 1 at its last move and played elsewhere.
    assert loss_reason([0, 1, 0, 1, 0, 1, 2, 3, 0], seat=1) == "missed a win"
    # Seat 1 holds three on the bottom row with both ends open: no move of seat 0 saves it.
    assert loss_reason([6, 2, 6, 3, 0, 4, 0, 5], seat=0) == "double threat"
    # Seat 0's three on row 4 waits on (4, 3); seat 1 drops into column 3 beneath it.
    assert loss_reason([1, 0, 0, 2, 2, 6, 1, 6, 5, 3, 3], seat=1) == "opened a win"
    lost = []
    counts = play_games(connect_four_v3.env, random_legal_player(3), heuristic_player(4), 30, lost=lost)
    assert len(lost) == counts["loss"] > 0
    for game in lost:
        assert game["seat"] == ("player_0" if game["game"] % 2 == 0 else "player_1")
        loss_reason(game["moves"], game["game"] % 2)  # a replayable game


def test_a_scripted_fixed_member_plays_its_share_from_the_policy_map_and_never_trains(tmp_path):
    from rlfleet.algorithms.ppo import PPOTrainer
    from rlfleet.env.registry import register_env
    from rlfleet.policy.examples.connect_four import ConnectFourHeuristicPolicy
    from rlfleet.policy.policy_spec import PolicySpec

    register_env("league_connect_four", CountingConnectFour.make)
    league = functools.partial(LeagueCallbacks, LeagueSettings(snapshot_every=1, fixed_members={"heuristic": 0.5}))
    policies = {"main": PolicySpec(), "heuristic": PolicySpec(policy_class=ConnectFourHeuristicPolicy)}
    multiagent = {"policies": policies, "policies_to_train": ["main"], "policy_map_capacity": 2,
                  "policy_mapping_fn": lambda agent_id, *args, **kwargs: "main"}
    trainer = PPOTrainer(env="league_connect_four", config=_config(callbacks=league, multiagent=multiagent),
                         logdir=str(tmp_path / "run"))
    try:
        results = [trainer.train() for _ in range(2)]
        row = results[-1]["league"]["heuristic"]
        assert row["prob"] == pytest.approx(0.5) and row["games"] > 0
        # A barely trained main against a player that never misses a win (seeded).
        assert row["win_rate"] < 0.3
        assert trainer.get_policy("heuristic").get_weights() == {}
        # Through the trainer's preprocessor (the flattened Dict): it blocks the vertical three.
        env = connect_four_v3.env()
        env.reset(seed=0)
        for column in (0, 6, 1, 6, 2, 6):
            env.step(column)
        obs = env.observe(env.agent_selection)  # player_0 to move: it wins in column 3
        assert trainer.compute_single_action(obs, policy_id="heuristic") == 3
        env.step(5)
        obs = env.observe(env.agent_selection)  # player_1: it wins in column 6 (its fourth)
        assert trainer.compute_single_action(obs, policy_id="heuristic") == 6
    finally:
        trainer.stop()
    del multiagent["policies"]["heuristic"]
    with pytest.raises(ValueError, match="fixed_members \\['heuristic'\\] are not in 'multiagent.policies'"):
        PPOTrainer(env="league_connect_four", config=_config(callbacks=league, multiagent=multiagent),
                   logdir=str(tmp_path / "refused"))
