"""The league's state: the main policy's frozen snapshots, the games main played against
each opponent, and prioritised fictitious self-play (PFSP) matchmaking over them.

Matchmaking (AlphaStar's PFSP, Vinyals et al. 2019, "hard" weighting):

| opponent        | probability                                                             |
| --------------- | ----------------------------------------------------------------------- |
| main itself     | `self_play_prob` (`1 - random_prob - fixed` while there is no snapshot) |
| `random`        | `random_prob` (0 by default: no such member)                            |
| fixed member f  | `fixed_members[f]` (none by default)                                    |
| snapshot s      | `(1 - self_play_prob - random_prob - fixed) * w(s) / sum(w)`, `w(s) = max(loss(s) ** p, floor)` |

(`fixed`: the sum of `fixed_members`' shares.)

`loss(s)` is main's non-win rate against s, `1 - (wins + draws / 2) / games`; a snapshot
not played yet has `w = 1` (the largest weight), so each new snapshot gets tried. The floor
keeps every snapshot in play after main has learnt to beat it.

The `random` member plays uniformly among the legal moves, at a fixed share whatever main's
win rate against it: snapshots get stronger as main does, and self-play against them alone
drifts away from punishing weak moves (main's win rate against a random player fell with
longer training on connect four); a permanent weak member keeps that play in the games.
`fixed_members` are other permanent members the user puts in the policy map (e.g. a scripted
player, policy/examples/connect_four.py), each at its own fixed share.

State is plain JSON (`to_state` / `from_state`): it goes into trainer checkpoints as is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

WIN, LOSS, DRAW = "win", "loss", "draw"
OUTCOMES = (WIN, LOSS, DRAW)
# The policy id of the uniformly random member (LeagueSettings.random_prob).
RANDOM_MEMBER = "random"
# The fewest games against the random member in an iteration for keep_best to judge it: the
# win rate of fewer games is too noisy to rank (20 games: +/- 7 points at a 90 % rate).
BEST_MIN_GAMES = 20


@dataclass(frozen=True)
class LeagueSettings:
    """How a league runs.

    Args:
        main: the id of the policy that trains (PPO's `policies_to_train` stays `[main]`).
        seats: the two agent ids of the two-player game (e.g. `("player_0", "player_1")`);
            main takes the first seat in even-numbered episodes and the second in odd ones.
        snapshot_every: every this many training iterations, main's weights are frozen
            into a new snapshot policy `<main>_v<k>`.
        self_play_prob: the share of episodes played against main itself once snapshots exist.
        pfsp_p: the exponent p of the PFSP weighting `loss_rate ** p`.
        pfsp_floor: the least weight a snapshot gets (> 0: each stays in play).
        random_prob: the share of episodes against a permanent member `"random"` that
            picks uniformly among the legal moves (a frozen policy of main's class with all
            weights 0: every logit is 0, so after action masking each legal move is as likely);
            0: no such member. Keeps weak play in main's games (see the module docstring).
        keep_best: keeps a frozen copy `<main>_best` of main's weights from the iteration
            whose games against the random member main won most often (ties: the later
            one), judged on training games (at least `BEST_MIN_GAMES` in the iteration);
            needs `random_prob > 0`. The copy is never drawn as an opponent.
        fixed_members: `{policy id: share}` of permanent opponents that are already in
            `multiagent.policies` (e.g. a scripted player), each drawn for that share of the
            episodes whatever main's win rate against it; never trained or replaced.
        seed: seeds each episode's opponent draw (with the episode id); None: the trainer's seed.
    """

    main: str = "main"
    seats: Tuple[str, str] = ("player_0", "player_1")
    snapshot_every: int = 5
    self_play_prob: float = 0.2
    pfsp_p: float = 2.0
    pfsp_floor: float = 0.05
    random_prob: float = 0.0
    keep_best: bool = False
    # A dict is accepted and stored as (id, share) pairs: the settings stay frozen and hashable.
    fixed_members: Union[Mapping[str, float], Tuple[Tuple[str, float], ...]] = ()
    seed: Any = None

    def __post_init__(self):
        fixed = _fixed_pairs(self.fixed_members)
        taken = {self.main, RANDOM_MEMBER, self.best_id} if isinstance(self.main, str) else set()
        fixed_total = sum(share for _, share in fixed or ())
        checks = (
            ("fixed_members", fixed is not None and all(0.0 < share < 1.0 for _, share in fixed)
             and not taken & {pid for pid, _ in fixed}
             and not any(pid.startswith(f"{self.main}_v") for pid, _ in fixed),
             f"a dict {{policy id: share}} with shares in (0, 1), ids other than {sorted(taken)} and "
             f"'{self.main}_v<k>' (the league's own members), e.g. {{'heuristic': 0.25}}"),
            ("main", isinstance(self.main, str) and self.main, "a non-empty policy id (str)"),
            ("seats", isinstance(self.seats, (tuple, list)) and len(self.seats) == 2
             and self.seats[0] != self.seats[1], "two different agent ids, e.g. ('player_0', 'player_1')"),
            ("snapshot_every", isinstance(self.snapshot_every, int) and self.snapshot_every >= 1, "an int >= 1"),
            ("self_play_prob", _is_number(self.self_play_prob) and 0.0 <= self.self_play_prob < 1.0,
             "a number in [0, 1): below 1 so that snapshots get played"),
            ("pfsp_p", _is_number(self.pfsp_p) and self.pfsp_p >= 0, "a number >= 0"),
            ("pfsp_floor", _is_number(self.pfsp_floor) and 0.0 < self.pfsp_floor <= 1.0,
             "a number in (0, 1]: a snapshot with weight 0 would never be tried again"),
            ("random_prob", _is_number(self.random_prob) and 0.0 <= self.random_prob < 1.0
             and _is_number(self.self_play_prob) and self.self_play_prob + self.random_prob + fixed_total < 1.0,
             f"a number in [0, 1) with self_play_prob ({self.self_play_prob!r}) + random_prob below 1 "
             f"(after the fixed_members' shares, {fixed_total!r}), so that snapshots get played"),
            ("main", self.main != RANDOM_MEMBER or self.random_prob == 0,
             f"another id than {RANDOM_MEMBER!r} while random_prob > 0: that is the random member's id"),
            ("keep_best", isinstance(self.keep_best, bool) and (not self.keep_best or self.random_prob > 0),
             "a bool, True only with random_prob > 0: the best main is judged by its games against the "
             "random member"),
            ("seed", self.seed is None or isinstance(self.seed, int), "an int or None"),
        )
        for name, ok, wanted in checks:
            if not ok:
                raise ValueError(f"LeagueSettings.{name}: {getattr(self, name)!r} must be {wanted}")
        object.__setattr__(self, "seats", tuple(self.seats))
        object.__setattr__(self, "fixed_members", fixed)

    @property
    def fixed_shares(self) -> Dict[str, float]:
        """`{policy id: share}` of the fixed members."""
        return dict(self.fixed_members)

    @property
    def best_id(self) -> str:
        """The policy id of the best main's frozen copy (`keep_best`)."""
        return f"{self.main}_best"


def _score(row: Dict[str, int]) -> float:
    """`(wins + draws / 2) / games` of a `{"win", "loss", "draw"}` row; NaN without games."""
    played = sum(row.values())
    return (row.get(WIN, 0) + 0.5 * row.get(DRAW, 0)) / played if played else float("nan")


def _fixed_pairs(members: Any) -> Optional[Tuple[Tuple[str, float], ...]]:
    """`fixed_members` (a dict or pairs) as a tuple of `(policy id, share)`; None if malformed."""
    try:
        pairs = tuple((pid, share) for pid, share in (members.items() if isinstance(members, Mapping) else members))
    except (TypeError, ValueError):
        return None
    if any(not (isinstance(pid, str) and pid) or not _is_number(share) for pid, share in pairs):
        return None
    if len({pid for pid, _ in pairs}) != len(pairs):
        return None
    return tuple((pid, float(share)) for pid, share in pairs)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x)


@dataclass
class League:
    """Snapshots and game counts of one main policy, and the PFSP opponent distribution.

    Attributes:
        settings: the `LeagueSettings`.
        snapshots: snapshot policy ids, oldest first.
        games: `{opponent id: {"win": n, "loss": n, "draw": n}}` from main's side; the
            opponent id is main's own for self-play games.
        best: `{"win_rate", "games", "iteration"}` of the best main so far (`keep_best`):
            its win rate against the random member in that iteration's games; None before.
    """

    settings: LeagueSettings
    snapshots: List[str] = field(default_factory=list)
    games: Dict[str, Dict[str, int]] = field(default_factory=dict)
    best: Optional[Dict[str, Any]] = None

    # --- snapshots and results ---------------------------------------------------------
    def next_snapshot_id(self) -> str:
        return f"{self.settings.main}_v{len(self.snapshots) + 1}"

    def add_snapshot(self, policy_id: str) -> None:
        if policy_id in self.snapshots or policy_id == self.settings.main:
            raise ValueError(f"League: snapshot id {policy_id!r} is taken (main: {self.settings.main!r}, "
                             f"snapshots: {self.snapshots})")
        self.snapshots.append(policy_id)

    def record(self, opponent: str, outcome: str, count: int = 1) -> None:
        """Counts `count` games of main against `opponent` that ended in `outcome` (main's side)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"League.record: outcome {outcome!r} must be one of {OUTCOMES}")
        row = self.games.setdefault(opponent, {k: 0 for k in OUTCOMES})
        row[outcome] += int(count)

    def merge(self, games: Dict[str, Dict[str, int]]) -> None:
        """Adds counts in `record`'s layout (e.g. a worker's since the last merge)."""
        for opponent, row in games.items():
            for outcome, n in row.items():
                self.record(opponent, outcome, n)

    def win_rate(self, opponent: str) -> float:
        """Main's `(wins + draws / 2) / games` against `opponent`; NaN before any game."""
        return _score(self.games.get(opponent) or {})

    def offer_best(self, row: Dict[str, int], iteration: int) -> bool:
        """Whether the main that played `row` (one iteration's games against the random
        member, `record`'s layout) is the best so far; if so it becomes `best`."""
        played = int(sum(row.values()))
        if played < BEST_MIN_GAMES:
            return False
        rate = _score(row)
        if self.best is not None and rate < self.best["win_rate"]:
            return False
        self.best = {"win_rate": float(rate), "games": played, "iteration": int(iteration)}
        return True

    def table(self) -> Dict[str, Dict[str, float]]:
        """The league table: `{opponent: {"win_rate", "games"}}` for each opponent played."""
        return {opp: {"win_rate": self.win_rate(opp), "games": int(sum(row.values()))}
                for opp, row in self.games.items()}

    # --- matchmaking -------------------------------------------------------------------
    def probabilities(self) -> Dict[str, float]:
        """`{opponent: probability}` for the next episodes (see the module docstring)."""
        s = self.settings
        fixed = {RANDOM_MEMBER: float(s.random_prob)} if s.random_prob > 0 else {}
        fixed.update(s.fixed_shares)
        fixed_total = sum(fixed.values())
        if not self.snapshots:
            return {s.main: 1.0 - fixed_total, **fixed}
        weights = np.array([self._pfsp_weight(opp) for opp in self.snapshots], dtype=np.float64)
        shares = (1.0 - s.self_play_prob - fixed_total) * weights / weights.sum()
        probs = {s.main: float(s.self_play_prob), **fixed}
        probs.update({opp: float(p) for opp, p in zip(self.snapshots, shares)})
        return probs

    def _pfsp_weight(self, opponent: str) -> float:
        rate = self.win_rate(opponent)
        if np.isnan(rate):
            return 1.0
        return max((1.0 - rate) ** self.settings.pfsp_p, self.settings.pfsp_floor)

    # --- state (JSON) ------------------------------------------------------------------
    def to_state(self) -> Dict[str, Any]:
        state = {"main": self.settings.main, "snapshots": list(self.snapshots),
                 "games": {opp: dict(row) for opp, row in self.games.items()}}
        if self.best is not None:
            state["best"] = dict(self.best)
        return state

    def load_state(self, state: Dict[str, Any]) -> None:
        """Takes `to_state()` output (snapshots and counts) of a league of the same main policy."""
        if state.get("main") != self.settings.main:
            raise ValueError(f"League state is of main policy {state.get('main')!r}, but this league's main is "
                             f"{self.settings.main!r}; set LeagueSettings(main={state.get('main')!r})")
        self.snapshots = [str(x) for x in state["snapshots"]]
        self.games = {}
        self.merge(state.get("games") or {})
        self.best = dict(state["best"]) if state.get("best") is not None else None
