"""The perturbation worker: evaluates `theta + noise_stdev * eps` and `theta - noise_stdev *
eps` for each direction `eps` it is given (by noise-table index), plus unperturbed
evaluation episodes, and answers with the returns only.

The same class runs in the trainer's process (`num_workers: 0`) and, wrapped as a Ray
actor, as a remote worker: one code path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from rlfleet.algorithms.evolution.flat_policy import FlatLayout, FlatMLPActor
from rlfleet.algorithms.evolution.noise_table import SharedNoiseTable
from rlfleet.env.env_context import EnvContext
from rlfleet.models.preprocessors import get_preprocessor
from rlfleet.utils.filters import get_filter
from rlfleet.utils.seeding import derive_seed
from rlfleet.utils.spaces import env_action


@dataclass
class RolloutTask:
    """What the driver asks of a worker: the directions (noise-table start indices) to try in
    both signs, and how many unperturbed evaluation episodes to run."""

    task_id: int
    indices: np.ndarray
    num_evals: int


@dataclass
class RolloutResult:
    """A worker's answer: per direction the returns and lengths of `(+eps, -eps)`, the
    evaluation episodes', the observation statistics it gathered (its filter's buffer,
    merged by the driver) and the env steps it took. No weights and no noise travel back.
    """

    task_id: int
    indices: np.ndarray
    returns: np.ndarray  # [k, 2] float64
    lengths: np.ndarray  # [k, 2] int64
    eval_returns: np.ndarray  # [m] float64
    eval_lengths: np.ndarray  # [m] int64
    filter_state: Dict[str, Any] = field(default_factory=dict)

    def payload_bytes(self) -> int:
        """The bytes of the arrays this answer carries."""
        arrays = [self.indices, self.returns, self.lengths, self.eval_returns, self.eval_lengths]
        arrays += [np.asarray(v) for v in self.filter_state.values()]
        return int(sum(a.nbytes for a in arrays))

    @property
    def steps(self) -> int:
        return int(self.lengths.sum() + self.eval_lengths.sum())


class PerturbationWorker:
    """Runs episodes with perturbed copies of `theta` on one env.

    Args:
        env_creator: the trainer's env creator (`EnvContext -> env`).
        config: the trainer config (`env_config`, `observation_filter`, `noise_stdev`,
            `action_noise_std`, `horizon`, `normalize_actions`, `clip_actions`, `seed`, `model`).
        worker_index: 0 for the in-process worker, 1..N for remote ones.
        num_workers: the number of remote workers.
        noise: the shared noise block (with Ray, the object store's read-only copy).
        layout: the layout of `theta`.
    """

    def __init__(self, env_creator: Callable, config: dict, worker_index: int, num_workers: int,
                 noise: np.ndarray, layout: FlatLayout):
        self.config = config
        self.env = env_creator(EnvContext(config.get("env_config") or {}, worker_index=worker_index,
                                          num_workers=num_workers))
        self.preprocessor = get_preprocessor(self.env.observation_space, config.get("model"))
        self.filter = get_filter(config["observation_filter"], self.preprocessor.shape)
        self.noise = SharedNoiseTable(noise)
        self.layout = layout
        seed = config.get("seed")
        self._rng = np.random.default_rng(None if seed is None else derive_seed(seed, worker_index, "perturbations"))
        # The first reset is seeded; later ones continue the env's own generator.
        self._reset_seed: Optional[int] = None if seed is None else derive_seed(seed, worker_index, "env") & 0xFFFFFFFF
        self._horizon = config.get("horizon")

    def run(self, theta: np.ndarray, filter_state: Dict[str, Any], task: RolloutTask) -> RolloutResult:
        """Evaluates `task`'s directions around `theta`, with the observation filter set to
        `filter_state` first (its buffer then holds exactly this task's observations)."""
        self.filter.set_state(filter_state)
        self.filter.clear_buffer()
        dim, sigma = self.layout.num_params, float(self.config["noise_stdev"])
        returns = np.zeros((len(task.indices), 2))
        lengths = np.zeros((len(task.indices), 2), np.int64)
        for row, index in enumerate(task.indices):
            eps = self.noise.get(int(index), dim)
            for col, sign in enumerate((1.0, -1.0)):
                returns[row, col], lengths[row, col] = self.episode(theta + sign * sigma * eps, add_noise=True)
        evals = [self.episode(theta, add_noise=False) for _ in range(task.num_evals)]
        return RolloutResult(task.task_id, np.asarray(task.indices, np.int64), returns, lengths,
                             np.array([r for r, _ in evals], np.float64), np.array([n for _, n in evals], np.int64),
                             self.filter.get_state())

    def episode(self, theta: np.ndarray, add_noise: bool) -> Tuple[float, int]:
        """One episode acting on the mode of `theta`'s distribution (plus `action_noise_std`
        Gaussian noise on Box actions when `add_noise`); returns `(return, length)`."""
        actor = FlatMLPActor(self.layout, theta)
        env, space, cfg = self.env, self.env.action_space, self.config
        noise_std = float(cfg.get("action_noise_std") or 0.0) if add_noise and not self.layout.discrete else 0.0
        normalize, clip = bool(cfg.get("normalize_actions", True)), bool(cfg.get("clip_actions", False))
        obs, _ = env.reset(seed=self._reset_seed)
        self._reset_seed = None
        total, steps = 0.0, 0
        while True:
            action = actor(self.filter(self.preprocessor.transform(obs)))
            if noise_std:
                action = action + noise_std * self._rng.standard_normal(action.shape).astype(np.float32)
            obs, reward, terminated, truncated, _ = env.step(env_action(np.asarray(action), space, normalize, clip))
            total += float(reward)
            steps += 1
            if terminated or truncated or (self._horizon and steps >= self._horizon):
                return total, steps

    def stop(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


__all__ = ["PerturbationWorker", "RolloutResult", "RolloutTask"]
