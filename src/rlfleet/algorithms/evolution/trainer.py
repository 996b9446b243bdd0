"""What ES and ARS share: the trainer around the perturbation workers.

Each `training_step` hands the current `theta` (the flat acting parameters) and the
observation filter to the perturbation workers, gathers the returns of `theta +/- noise_stdev
* eps` per direction `eps`, merges the workers' observation statistics into the trainer's
filter, lets the algorithm turn the returns into a new `theta` (`update`), and writes
`theta` into the policy's model, where acting, evaluation, export and checkpoints read it.

Results: every iteration runs at least `min_eval_episodes` unperturbed evaluation episodes of
the `theta` it starts from (default: one per perturbation worker, one with `num_workers: 0`),
plus one more per direction with probability `eval_prob`. `episode_reward_mean`, `_min`,
`_max`, `episode_len_mean` and `hist_stats` are all over the evaluation episodes of the last
`report_length` iterations (`EvalWindow`): the return of the current policy, acting on its
mode, averaged over recent iterations. (RLlib 1.x ran them with `eval_prob` alone, so at its
tuned batch sizes most iterations had none and the metric stayed NaN or stale.) Every env
step counts in `timesteps_total` (sampled steps), the evaluation episodes' included; only
the perturbed episodes' count as trained.
"""
from __future__ import annotations

import math
from typing import Any, Dict

import numpy as np

from rlfleet.algorithms.evolution.collection import Collection
from rlfleet.algorithms.evolution.eval_window import EvalWindow
from rlfleet.algorithms.evolution.flat_policy import flat_layout, get_flat, set_flat
from rlfleet.algorithms.evolution.noise_table import SharedNoiseTable, make_noise
from rlfleet.algorithms.evolution.policy import EvolutionPolicy
from rlfleet.algorithms.evolution.worker_pool import PerturbationPool
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.trainer import Trainer
from rlfleet.utils.filters import get_filter
from rlfleet.utils.seeding import derive_seed


class EvolutionTrainer(Trainer):
    """The shared loop; subclasses define `collection()` (what one iteration gathers) and
    `update(collection)` (the new `theta` from it), and keep their optimizer state in
    `get_state` / `set_state` through `_algorithm_state` / `_set_algorithm_state`."""

    _policy_class = EvolutionPolicy

    def _make_workers(self, *, env_creator, policy_class, config, num_workers):
        # `num_workers` are perturbation workers (the pool below); the rollout WorkerSet keeps
        # only its local worker, which acts for compute_single_action, export and checkpoints.
        # Evaluation workers (another config) are built as asked.
        return super()._make_workers(env_creator=env_creator, policy_class=policy_class, config=config,
                                     num_workers=0 if config is self.config else num_workers)

    def validate_algorithm_config(self, config: dict) -> None:
        if config.get("fast_path") == "off":
            raise ValueError(f"fast_path='off' asks for torch, but {self._name} acts and learns in NumPy only (its "
                             "perturbation workers run a NumPy copy of the policy); use 'auto' (the default) or "
                             "'require'")

    def setup(self, config: dict) -> None:
        policy = self.get_policy()
        self._layout = flat_layout(policy.model, policy.action_space, self._name)
        # float32, as the model holds it: a checkpoint restores exactly this theta.
        self.theta = get_flat(policy.model, self._name)
        noise = make_noise(config["noise_size"], config.get("seed"))
        self.noise = SharedNoiseTable(noise)
        self.noise.sample_indices(np.random.default_rng(0), self._layout.num_params, 0)  # raises if too small
        seed = config.get("seed")
        self._rng = np.random.default_rng(None if seed is None else derive_seed(seed, "evolution_driver"))
        self._eval_window = EvalWindow(int(config["report_length"]))
        self._episodes_total = 0
        self._episodes_this_iter = 0
        self._bytes_this_iter = 0
        self.pool = PerturbationPool(self.env_creator, config, noise, self._layout)
        self.noise = SharedNoiseTable(self.pool.noise)

    @property
    def num_params(self) -> int:
        """The number of parameters searched (the length of `theta`)."""
        return self._layout.num_params

    # --- what the algorithms define ---------------------------------------------------
    def collection(self) -> Collection:
        """An empty `Collection` that hands out this iteration's tasks."""
        raise NotImplementedError  # abstract

    def update(self, batch: Collection) -> Dict[str, float]:
        """Sets `self.theta` from the gathered returns; returns the learner stats."""
        raise NotImplementedError  # abstract

    def _new_collection(self, directions_per_task: int, enough, max_directions=None) -> Collection:
        return Collection(self.noise, self.num_params, self._rng, directions_per_task,
                          float(self.config["eval_prob"]), enough, max_directions,
                          step_budget=self.steps_left(), workers=self._workers_sharing(),
                          min_evals=self.min_eval_episodes(), spread=self._workers_sharing())

    def min_eval_episodes(self) -> int:
        """The evaluation episodes each iteration runs at least (`min_eval_episodes`; None:
        one per perturbation worker)."""
        value = self.config["min_eval_episodes"]
        return max(1, int(self.config["num_workers"])) if value is None else int(value)

    def _workers_sharing(self) -> int:
        return max(1, self.pool.num_healthy_workers())

    # --- the loop ------------------------------------------------------------------------
    def training_step(self) -> Dict[str, Any]:
        # === sample: the workers try theta +/- noise_stdev * eps per direction ===
        filt = self.workers.local_worker().filters[DEFAULT_POLICY_ID]
        batch = self.collection()
        bytes_before = self.pool.bytes_received
        self.pool.run(self.theta, filt.get_state(), batch.next_task, batch.add)
        self._bytes_this_iter += self.pool.bytes_received - bytes_before
        self._merge_observation_stats(filt, batch)
        self.count_sampled(batch.steps, batch.steps)
        self._record_episodes(batch)
        # === learn: the algorithm's update of theta ===
        stats = self.update(batch)
        self.theta = np.asarray(self.theta, np.float32)
        self.counters["num_env_steps_trained"] += batch.noisy_steps
        self.counters["num_agent_steps_trained"] += batch.noisy_steps
        # === sync: theta into the policy's model (acting, export, checkpoints) ===
        set_flat(self.get_policy().model, self.theta, self._name)
        evals = batch.eval_returns
        stats.update(weights_norm=float(np.linalg.norm(self.theta)), noisy_episodes=batch.noisy_episodes,
                     noisy_return_mean=float(batch.returns.mean()) if batch.returns.size else math.nan,
                     eval_episodes=int(evals.size), eval_return_mean=float(evals.mean()) if evals.size else math.nan)
        return {DEFAULT_POLICY_ID: {"learner_stats": stats}}

    def _merge_observation_stats(self, filt, batch: Collection) -> None:
        """Merges each answer's filter buffer (that task's observations) into the trainer's
        filter, which the next round sends out: RLlib 1.x's synchronised MeanStdFilter."""
        for result in batch.results:
            if result.filter_state:
                delta = get_filter(self.config["observation_filter"], filt.shape)
                delta.set_state(result.filter_state)
                filt.apply_changes(delta, with_buffer=False)

    def _record_episodes(self, batch: Collection) -> None:
        self._episodes_total += batch.noisy_episodes + len(batch.eval_returns)
        self._episodes_this_iter += batch.noisy_episodes + len(batch.eval_returns)
        self._eval_window.add(batch.eval_returns, batch.eval_lengths)

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        result.update(
            self._eval_window.metrics(),
            episodes_this_iter=int(self._episodes_this_iter),
            episodes_total=int(self._episodes_total),
            num_healthy_workers=self.pool.num_healthy_workers(),
        )
        result["info"]["bytes_received_this_iter"] = int(self._bytes_this_iter)
        result["info"]["num_params"] = self.num_params
        self._episodes_this_iter = 0
        self._bytes_this_iter = 0
        return result

    # --- state ---------------------------------------------------------------------------
    def _algorithm_state(self) -> Dict[str, Any]:
        return {}

    def _set_algorithm_state(self, state: Dict[str, Any]) -> None:
        """Applies `_algorithm_state()` output (nothing to apply by default)."""

    def get_state(self) -> Dict[str, Any]:
        return dict(super().get_state(), evolution={
            "rng": self._rng.bit_generator.state,
            **self._eval_window.get_state(),
            "episodes_total": int(self._episodes_total),
            "optimizer": self._algorithm_state(),
        })

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        self.theta = get_flat(self.get_policy().model, self._name)
        evolution = state.get("evolution") or {}
        if evolution:
            self._rng.bit_generator.state = evolution["rng"]
            self._eval_window.set_state(evolution)
            self._episodes_total = int(evolution["episodes_total"])
            self._set_algorithm_state(evolution["optimizer"])

    def stop(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.stop()
        super().stop()


__all__ = ["EvolutionTrainer"]
