"""Connect four as a turn-based rlfleet MultiAgentEnv whose position can be saved and restored
(`get_state()` / `set_state(state)`), for tree search (AlphaZero) and for leagues.

It plays by the rules, and shows each player the observation, of PettingZoo's
`connect_four_v3` (the league's test bed): agents `"player_0"` (moves first) and
`"player_1"`; each turn only the player to move gets an observation, a Dict of
`"observation"` (6, 7, 2) int8 (plane 0 the mover's pieces, plane 1 the opponent's, row 0 the
top row) and `"action_mask"` (7,) int8 (1 where a piece fits). The game ends when a move makes
four in a row (the mover gets +1, the other -1) or fills the board (0 each); then both players
get their last observation. A move into a full column is an error (the mask forbids it).

PettingZoo's AEC env cannot be copied cheaply (its wrappers and agent bookkeeping are
deep-copied whole); this env's state is the board and the player to move, so a search restores
a position in a few microseconds.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv

ROWS, COLUMNS = 6, 7
AGENTS = ("player_0", "player_1")
# Steps that walk a line of four: right, down, down-right, down-left.
_LINES = ((0, 1), (1, 0), (1, 1), (1, -1))


def _run_length(board: np.ndarray, who: int, row: int, col: int, dr: int, dc: int) -> int:
    """Pieces of `who` next to (row, col) walking (dr, dc), not counting (row, col)."""
    n, r, c = 0, row + dr, col + dc
    while 0 <= r < ROWS and 0 <= c < COLUMNS and board[r, c] == who:
        n, r, c = n + 1, r + dr, c + dc
    return n


def makes_four(board: np.ndarray, who: int, row: int, col: int) -> bool:
    """Whether the piece of `who` (1 or 2) at (row, col) of `board` lies on a line of four."""
    return any(1 + _run_length(board, who, row, col, dr, dc) + _run_length(board, who, row, col, -dr, -dc) >= 4
               for dr, dc in _LINES)


class ConnectFourEnv(MultiAgentEnv):
    """Connect four (see the module doc). `config` takes no options."""

    possible_agents = list(AGENTS)
    observation_space = gym.spaces.Dict({
        "observation": gym.spaces.Box(0, 1, (ROWS, COLUMNS, 2), np.int8),
        "action_mask": gym.spaces.Box(0, 1, (COLUMNS,), np.int8),
    })
    action_space = gym.spaces.Discrete(COLUMNS)

    def __init__(self, config: Optional[dict] = None) -> None:
        if config:
            raise ValueError(f"ConnectFourEnv takes no env_config options; got {sorted(config)}")
        # 0 empty, 1 player_0's piece, 2 player_1's; `heights[c]`: pieces in column c.
        self.board = np.zeros((ROWS, COLUMNS), np.int8)
        self.heights = np.zeros(COLUMNS, np.int64)
        self.to_move = 0
        self.done = False

    # --- search hooks ------------------------------------------------------------------
    def get_state(self) -> Tuple[bytes, int, bool]:
        """The position: the board, the player to move, whether the game is over."""
        return self.board.tobytes(), self.to_move, self.done

    def set_state(self, state: Tuple[bytes, int, bool]) -> Dict[str, Any]:
        """Restores a `get_state()` position; returns the observation of the player to move
        (both players' when the game is over)."""
        board, to_move, done = state
        self.board = np.frombuffer(board, np.int8).reshape(ROWS, COLUMNS).copy()
        self.heights = np.count_nonzero(self.board, axis=0).astype(np.int64)
        self.to_move, self.done = int(to_move), bool(done)
        return self._observations()

    # --- the game -----------------------------------------------------------------------
    def observe(self, seat: int) -> Dict[str, np.ndarray]:
        """The observation of player `seat` (0 or 1)."""
        planes = np.stack([self.board == seat + 1, self.board == 2 - seat], axis=-1).astype(np.int8)
        mask = (self.heights < ROWS).astype(np.int8) if not self.done else np.zeros(COLUMNS, np.int8)
        return {"observation": planes, "action_mask": mask}

    def _observations(self) -> Dict[str, Any]:
        seats = (0, 1) if self.done else (self.to_move,)
        return {AGENTS[s]: self.observe(s) for s in seats}

    def reset(self, *, seed=None, options=None):
        self.board[:] = 0
        self.heights[:] = 0
        self.to_move, self.done = 0, False
        return self._observations(), {}

    def step(self, action_dict):
        mover = AGENTS[self.to_move]
        if self.done:
            raise ValueError("ConnectFourEnv.step: the game is over; call reset()")
        if mover not in action_dict:
            raise ValueError(f"ConnectFourEnv.step: it is {mover!r}'s turn, got actions for {sorted(action_dict)}")
        col = int(action_dict[mover])
        if not 0 <= col < COLUMNS or self.heights[col] >= ROWS:
            where = "full" if 0 <= col < COLUMNS else "off the board"
            raise ValueError(f"ConnectFourEnv.step: {mover!r} played column {col}, which is {where}; the "
                             "action_mask lists the legal ones")
        row = ROWS - 1 - int(self.heights[col])
        who = self.to_move + 1
        self.board[row, col] = who
        self.heights[col] += 1
        won = makes_four(self.board, who, row, col)
        self.done = won or bool((self.heights >= ROWS).all())
        rewards = {a: 0.0 for a in AGENTS}
        if won:
            rewards[mover], rewards[AGENTS[1 - self.to_move]] = 1.0, -1.0
        self.to_move = 1 - self.to_move
        obs = self._observations()
        terminated = {a: self.done for a in obs}
        terminated[ALL] = self.done
        truncated = {a: False for a in obs}
        truncated[ALL] = False
        return obs, {a: rewards[a] for a in (AGENTS if self.done else (mover,))}, terminated, truncated, {}


__all__ = ["ConnectFourEnv", "makes_four", "AGENTS", "ROWS", "COLUMNS"]
