"""OfflineSampler: a worker's `Sampler` when `input` is not "sampler".

`sample()` returns the next batch of the input reader (`rlfleet.offline.readers`), postprocessed by the
policies when `postprocess_inputs`, after the `input_evaluation` estimators have seen it.
The worker's env sampler (made on first need) serves `"sampler"` sources of a mixture,
`"simulation"` (it runs one fragment in the env beside each offline batch, for episode
metrics only), and `sample_episodes` (evaluation runs episodes in the env).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional

from rlfleet.offline.estimators import make_estimators
from rlfleet.offline.io_context import ClosableReader, IOContext, ReportsEpisodes
from rlfleet.offline.off_policy_estimate import OffPolicyEstimate
from rlfleet.offline.readers import ShuffledInput, make_input_reader
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.postprocessing import postprocess_for_learning
from rlfleet.rollout.sampler_api import Sampler, SamplerSettings
from rlfleet.utils.seeding import derive_seed

logger = logging.getLogger(__name__)
SB = SampleBatch


class OfflineSampler:
    """Reads batches instead of stepping envs (see the module docstring).

    Args:
        worker: the RolloutWorker.
        settings: its SamplerSettings.
        make_env_sampler: `() -> Sampler` for the worker's env (raises without one).
        log_dir: the trainer's results folder (for the IOContext).
    """

    def __init__(self, *, worker, settings: SamplerSettings, make_env_sampler: Callable[[], Optional[Sampler]],
                 log_dir: Optional[str] = None):
        self.worker = worker
        self.settings = settings
        self.steps_since_sync = 0
        config = worker.config
        self.config = config
        self._make_env_sampler = make_env_sampler
        self._env_sampler: Optional[Sampler] = None
        self.ioctx = IOContext(log_dir, config, worker.worker_index, worker)
        self._reader = None
        names = list(config.get("input_evaluation") or [])
        self.simulation = "simulation" in names
        self._estimator_names = [n for n in names if n != "simulation"]
        self._estimators: Dict[str, list] = {}
        self._estimates: List[OffPolicyEstimate] = []
        self._warned_no_probs = False
        self._postprocess = bool(config.get("postprocess_inputs"))
        spec = config.get("input")
        if isinstance(spec, (list, str)):
            self.reader  # files, datasets: a missing one (or an empty glob) fails when the trainer is built

    # --- the env sampler -----------------------------------------------------------------
    def env_sampler(self) -> Sampler:
        """The worker's env sampler, made on first use."""
        if self._env_sampler is None:
            sampler = self._make_env_sampler()
            if sampler is None:
                raise ValueError(
                    f"'input': {self.config.get('input')!r} needs the env here (a 'sampler' source, "
                    "'input_evaluation': ['simulation'], or evaluation episodes), but this worker has no env; "
                    "configure `env` (or `create_env_on_driver: True`), or evaluate with "
                    "'evaluation_config': {'input': 'sampler'}")
            self._env_sampler = sampler
        return self._env_sampler

    @property
    def reader(self):
        if self._reader is None:
            reader = make_input_reader(self.config.get("input"), self.ioctx)
            size = int(self.config.get("shuffle_buffer_size") or 0)
            if size > 0:
                seed = self.config.get("seed")
                reader = ShuffledInput(reader, size, None if seed is None else derive_seed(
                    seed, self.worker.worker_index, "shuffle_input"))
            self._reader = reader
        return self._reader

    # --- Sampler -------------------------------------------------------------------------
    def sample(self):
        batch = self.reader.next()
        if not isinstance(batch, (SampleBatch, MultiAgentBatch)):
            raise ValueError(f"the input reader {type(self.reader).__name__} returned a {type(batch).__name__}; "
                             "next() must return a SampleBatch or MultiAgentBatch")
        parts = batch.policy_batches if isinstance(batch, MultiAgentBatch) else {None: batch}
        policy_map = self.worker.policy_map
        for pid, part in list(parts.items()):
            policy = policy_map[pid] if pid is not None else _only_policy(policy_map)
            if self._estimator_names and part.count:
                self._estimate(pid, policy, part)
            if self._postprocess and part.count:
                parts[pid] = postprocess_for_learning(policy, part)
        if isinstance(batch, MultiAgentBatch):
            batch = MultiAgentBatch(parts, batch.count)
        else:
            batch = parts[None]
        if self.simulation:
            self.env_sampler().sample()  # episodes for the metrics; the samples are not used
        self.steps_since_sync += batch.count
        return batch

    def _estimate(self, pid, policy, batch: SampleBatch) -> None:
        if self._estimator_names and SB.ACTION_PROB not in batch and SB.ACTION_LOGP not in batch:
            # Datasets written by other tools (e.g. Minari) often lack the behaviour policy's
            # probabilities: IS/WIS cannot run on them, training can.
            if not self._warned_no_probs:
                logger.warning("input_evaluation %s skipped: the offline data has no 'action_prob' / 'action_logp' "
                               "column (set 'input_evaluation': [] to silence this)", self._estimator_names)
                self._warned_no_probs = True
            return
        if pid not in self._estimators:
            self._estimators[pid] = make_estimators(self._estimator_names, policy, policy.config.get("gamma", 0.99))
        for estimator in self._estimators[pid]:
            self._estimates.extend(estimator.estimate(batch))

    def sample_episodes(self, num_episodes: int) -> List[RolloutMetrics]:
        return self.env_sampler().sample_episodes(num_episodes)

    def pop_metrics(self) -> list:
        out: list = self._env_sampler.pop_metrics() if self._env_sampler is not None else []
        if isinstance(self._reader, ReportsEpisodes):  # e.g. a policy server: its clients' episodes
            out.extend(self._reader.pop_metrics())
        out.extend(self._estimates)
        self._estimates = []
        return out

    @property
    def metrics(self) -> list:  # what RolloutWorker._use_general_sampler carries over
        return self._env_sampler.metrics if self._env_sampler is not None else []

    @metrics.setter
    def metrics(self, value: list) -> None:
        if value:
            self.env_sampler().metrics = value

    def perf_stats(self) -> Dict[str, float]:
        return self._env_sampler.perf_stats() if self._env_sampler is not None else {}

    def restart(self) -> None:
        if self._env_sampler is not None:
            self._env_sampler.restart()

    def close(self) -> None:
        """Releases the reader when it holds something (e.g. a policy server's socket)."""
        if isinstance(self._reader, ClosableReader):
            self._reader.close()

    def get_state(self) -> Dict[str, Any]:
        return self._env_sampler.get_state() if self._env_sampler is not None else {}

    def set_state(self, state: Dict[str, Any]) -> None:
        if state and self._env_sampler is None:
            self._env_sampler = self._make_env_sampler()  # None without an env: nothing to restore
        if state and self._env_sampler is not None:
            self._env_sampler.set_state(state)


def _only_policy(policy_map):
    from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID

    if DEFAULT_POLICY_ID in policy_map:
        return policy_map[DEFAULT_POLICY_ID]
    return next(iter(policy_map.values()))
