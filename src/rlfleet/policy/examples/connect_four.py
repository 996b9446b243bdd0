"""A scripted connect four player for leagues: it wins when it can, blocks when it must, and
otherwise plays uniformly among the legal moves.

Against a uniformly random player a policy loses the games where it leaves an open three
and the random player happens to drop the fourth piece (about 1 in 7 per turn); this player
takes that piece every time, so as a permanent league member (`LeagueSettings.fixed_members`)
it makes every unblocked three cost main the game, and every three main builds that can be
blocked at once worth nothing.

Boards are PettingZoo's `connect_four_v3` observations: `"observation"` of shape (6, 7, 2),
plane 0 the pieces of the player to move and plane 1 its opponent's, row 0 the top row;
`"action_mask"` the 7 columns, 1 where a piece fits.
"""
from __future__ import annotations

from typing import Any, Optional

import gymnasium as gym
import numpy as np

from rlfleet.models.preprocessors import DictFlatteningPreprocessor
from rlfleet.policy.policy import Policy
from rlfleet.utils.seeding import derive_seed

ROWS, COLUMNS = 6, 7
# The four directions a line of four can run in (row step, column step).
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


def _landing_row(occupied: np.ndarray, column: int) -> int:
    """The row a piece dropped in `column` comes to rest in (-1: the column is full)."""
    empty = np.flatnonzero(~occupied[:, column])
    return int(empty[-1]) if empty.size else -1


def _completes_four(pieces: np.ndarray, row: int, column: int) -> bool:
    """Whether a piece at (row, column) makes four in a line with `pieces` (a bool board)."""
    for dr, dc in _DIRECTIONS:
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLUMNS and pieces[r, c]:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        if run >= 4:
            return True
    return False


def heuristic_move(board: np.ndarray, legal: np.ndarray, rng: np.random.Generator) -> int:
    """The scripted player's column for one position.

    Args:
        board: (6, 7, 2), plane 0 the mover's pieces, plane 1 the opponent's.
        legal: the 7-column action mask (1: a piece fits).
        rng: draws among the legal columns when no move wins or blocks.
    """
    mine, theirs = board[..., 0] > 0.5, board[..., 1] > 0.5
    occupied = mine | theirs
    columns = [c for c in np.flatnonzero(np.asarray(legal) > 0.5) if _landing_row(occupied, c) >= 0]
    if not columns:
        return 0  # a finished game's last observation: the move is never played
    for pieces in (mine, theirs):  # win first, then block
        for column in columns:
            if _completes_four(pieces, _landing_row(occupied, column), column):
                return int(column)
    return int(rng.choice(columns))


def heuristic_player(seed: int = 0):
    """`fn(observation) -> action` of the scripted player, for `matches.play_games`."""
    rng = np.random.default_rng(seed)

    def act(observation):
        return heuristic_move(np.asarray(observation["observation"]), observation["action_mask"], rng)
    return act


class ConnectFourHeuristicPolicy(Policy):
    """The scripted player as a policy of the policy map (never trained, no weights), for a
    league's `fixed_members`:

        "policies": {"main": PolicySpec(), "heuristic": PolicySpec(policy_class=ConnectFourHeuristicPolicy)}

    It reads the flattened Dict observation through the preprocessor's `original_space`;
    its random choices are seeded from the config's seed and worker index.
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict):
        super().__init__(observation_space, action_space, config)
        original = getattr(observation_space, "original_space", None)
        if not isinstance(original, gym.spaces.Dict) or not {"observation", "action_mask"} <= set(original.spaces):
            raise ValueError(f"ConnectFourHeuristicPolicy: the observation space must be connect four's Dict with "
                             f"'observation' and 'action_mask' (pettingzoo.classic.connect_four_v3), got "
                             f"{original if original is not None else observation_space}")
        if tuple(original["observation"].shape) != (ROWS, COLUMNS, 2):
            raise ValueError(f"ConnectFourHeuristicPolicy: 'observation' has shape {original['observation'].shape}, "
                             f"not connect four's {(ROWS, COLUMNS, 2)}")
        columns = DictFlatteningPreprocessor(original).column_slices()
        self._board, self._mask = columns["observation"], columns["action_mask"]
        seed = config.get("seed")
        self.rng = np.random.default_rng(
            derive_seed(seed, config.get("worker_index", 0), "connect_four_heuristic") if seed is not None else None)

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore: Optional[bool] = None,
                        timestep: Optional[int] = None, **kwargs: Any):
        obs = np.asarray(obs_batch, dtype=np.float32).reshape(len(obs_batch), -1)
        boards = obs[:, self._board].reshape(-1, ROWS, COLUMNS, 2)
        actions = [heuristic_move(board, mask, self.rng) for board, mask in zip(boards, obs[:, self._mask])]
        return np.asarray(actions, dtype=np.int64), [], {}

    def learn_on_batch(self, samples):
        raise ValueError("ConnectFourHeuristicPolicy is scripted and never trains: leave it out of "
                         "'multiagent.policies_to_train'")

    def get_weights(self):
        return {}

    def set_weights(self, weights) -> None:
        if weights:
            raise ValueError(f"ConnectFourHeuristicPolicy has no weights, got {sorted(weights)}")


def _winning_columns(pieces: np.ndarray, occupied: np.ndarray) -> list:
    return [c for c in range(COLUMNS)
            if _landing_row(occupied, c) >= 0 and _completes_four(pieces, _landing_row(occupied, c), c)]


def loss_reason(moves: list, seat: int) -> str:
    """Why the player in `seat` (0: moved first) lost a game of `moves` (columns in order),
    judged at its last move: `"missed a win"` (it had one), `"missed a block"` (the opponent
    had one winning column), `"double threat"` (two: no move saves it), or `"opened a win"`
    (there was no threat: its move let the opponent win on top of it)."""
    boards = np.zeros((2, ROWS, COLUMNS), bool)
    last = max(i for i in range(len(moves)) if i % 2 == seat)
    for i, column in enumerate(moves):
        mover = i % 2
        occupied = boards[0] | boards[1]
        if i == last:
            if _winning_columns(boards[mover], occupied):
                return "missed a win"
            threats = _winning_columns(boards[1 - mover], occupied)
            if len(threats) == 1:
                return "missed a block"
            if len(threats) > 1:
                return "double threat"
            return "opened a win"
        boards[mover, _landing_row(occupied, column), column] = True
    raise ValueError("loss_reason: the seat never moved")
