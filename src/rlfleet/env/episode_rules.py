"""When an episode ends, and whether its end is terminal: the one place for these rules.

Gymnasium's `terminated` / `truncated` plus RLlib 1.x's `horizon`, `soft_horizon` and
`no_done_at_end` decide, after every env step, three things:

- `over`: the episode ends here (for metrics and for learning);
- `terminal`: its last transition does not bootstrap (False: bootstrap from V(final obs));
- `reset`: the env is reset (False only for a soft horizon: the env goes on and the next
  episode starts from the current observation).

| cause                         | over | terminal              | reset |
| ----------------------------- | ---- | --------------------- | ----- |
| env `terminated`              | yes  | not `no_done_at_end`  | yes   |
| env `truncated`               | yes  | no                    | yes   |
| `horizon` hit                 | yes  | not `no_done_at_end`  | yes   |
| `horizon` hit, `soft_horizon` | yes  | not `no_done_at_end`  | no    |

The `horizon` the config sets is RLlib 1.x's: its end is `done=True`, terminal (no
bootstrap) unless `no_done_at_end`, so that a time budget the policy cannot see still costs it
(RLlib 1.x's `rllib/tuned_examples/ppo/frozenlake-appo-vtrace.yaml` learns only so). The
env's own time limit (Gymnasium's `truncated`) is not terminal: it bootstraps, as Gymnasium
means it.

The single-agent vector env, the multi-agent sampler (per agent and for the whole
episode) and evaluation ask `end` one episode at a time; the batched ones (the vectorised
multi-agent sampler, the EnvPool env) ask `end_many` for a whole vector of envs at once. None
re-derives them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np


class EpisodeEnd(NamedTuple):
    over: bool
    terminal: bool
    reset: bool


NOT_OVER = EpisodeEnd(False, False, False)


class EpisodeEnds(NamedTuple):
    """`EpisodeEnd` for a vector of envs: one bool array `[num_envs]` per field."""

    over: np.ndarray
    terminal: np.ndarray
    reset: np.ndarray


@dataclass(frozen=True)
class EpisodeRules:
    """The episode-end settings of one worker.

    Attributes:
        horizon: end episodes after this many env steps (None: only the env decides).
        soft_horizon: at the horizon, end the episode without resetting the env.
        no_done_at_end: never mark an episode end as terminal (every end bootstraps).
    """

    horizon: Optional[int] = None
    soft_horizon: bool = False
    no_done_at_end: bool = False

    @classmethod
    def from_config(cls, config: dict) -> "EpisodeRules":
        horizon = config.get("horizon")
        return cls(None if horizon is None else int(horizon), bool(config.get("soft_horizon")),
                   bool(config.get("no_done_at_end")))

    def at_horizon(self, length: int) -> bool:
        """Whether an episode `length` env steps long has reached the horizon."""
        return self.horizon is not None and length >= self.horizon

    def terminal(self, terminated: bool) -> bool:
        """Whether an env-given `terminated` stays terminal (not under `no_done_at_end`)."""
        return bool(terminated) and not self.no_done_at_end

    def end(self, terminated: bool, truncated: bool, length: int) -> EpisodeEnd:
        """The outcome of a step after which the episode is `length` env steps long."""
        if terminated or truncated:
            return EpisodeEnd(True, self.terminal(terminated), True)
        if self.at_horizon(length):
            # RLlib 1.x's `done=True` at its horizon (soft: "pretend done", the env goes on).
            return EpisodeEnd(True, not self.no_done_at_end, not self.soft_horizon)
        return NOT_OVER

    def end_many(self, terminated: np.ndarray, truncated: np.ndarray, lengths: np.ndarray) -> EpisodeEnds:
        """`end` for every env of a vector at once (bool arrays `terminated`, `truncated` and
        int `lengths`, one entry per env); element `i` of each result is `end(terminated[i],
        truncated[i], lengths[i])`'s field.

        Per step of a batched sampler: without a horizon or `no_done_at_end` it costs one `|`,
        and the results may be the input arrays themselves (read them, never write them).
        """
        over = terminated | truncated
        if self.horizon is None:
            terminal = np.zeros_like(over) if self.no_done_at_end else terminated
            return EpisodeEnds(over, terminal, over)
        at_horizon = lengths >= self.horizon
        at_horizon &= ~over  # ended by the env: its own flags decide
        ended = over | at_horizon
        terminal = np.zeros_like(over) if self.no_done_at_end else terminated | at_horizon
        return EpisodeEnds(ended, terminal, over if self.soft_horizon else ended)
