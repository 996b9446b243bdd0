"""What every peer's PPO script shares: its arguments, the return window, the result line.

Each script runs in its peer's own venv (`benchmarks/peers.py --setup`), so this file imports
only the standard library. The parent (`benchmarks/peers.py`) passes the hyperparameters as
JSON (read from rlfleet's tuned example, see `hyperparameters()` there) and reads the last
line that starts with "RESULT ".
"""
from __future__ import annotations

import argparse
import collections
import json
import time
from typing import Any, Dict, Iterable, Optional


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hparams", required=True, help="JSON: the hyperparameters (see benchmarks/peers.py)")
    args = parser.parse_args()
    args.hp = json.loads(args.hparams)
    return args


def pin_one_thread() -> None:
    """One torch thread, as rlfleet's PPO learner uses (`num_cpus_for_driver: 1`)."""
    import torch

    torch.set_num_threads(1)


class Progress:
    """The last `window` episode returns, the env steps, and the clock from the first step.

    `done()` says whether the mean over a full window reached the threshold or the step budget
    is spent; `emit()` prints the result line the parent reads.
    """

    def __init__(self, hp: Dict[str, Any]) -> None:
        self.threshold, self.budget = float(hp["threshold"]), int(hp["budget"])
        self.returns: collections.deque = collections.deque(maxlen=int(hp["window"]))
        self.steps, self.episodes = 0, 0
        self.start: Optional[float] = None
        self.library_mean: Optional[float] = None  # set where the library keeps the window itself

    def begin(self) -> None:
        if self.start is None:
            self.start = time.perf_counter()

    def add_returns(self, returns: Iterable[float]) -> None:
        for r in returns:
            self.returns.append(float(r))
            self.episodes += 1

    def set_library_window(self, mean: float, episodes: int) -> None:
        """The library's own mean over its last `window` returns, after `episodes` in all."""
        self.library_mean, self.episodes = float(mean), int(episodes)

    def mean(self) -> float:
        if self.library_mean is not None:
            return self.library_mean
        return sum(self.returns) / len(self.returns) if self.returns else float("nan")

    def solved(self) -> bool:
        full = (self.episodes if self.library_mean is not None else len(self.returns)) >= self.returns.maxlen
        return full and self.mean() >= self.threshold

    def done(self) -> bool:
        return self.solved() or self.steps >= self.budget

    def emit(self, **extra: Any) -> None:
        train_s = time.perf_counter() - (self.start or time.perf_counter())
        out = {"steps": int(self.steps), "reward": self.mean(), "solved": self.solved(), "episodes": self.episodes,
               "train_s": train_s, **extra}
        print("RESULT " + json.dumps(out), flush=True)
