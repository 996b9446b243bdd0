"""What every env sampler keeps besides its step loop (`SamplerBookkeeping`).

The vectorised single-agent, the general multi-agent, the vectorised multi-agent and the
external-env sampler all count episodes (ids unique across workers), collect the metrics of
finished episodes, time env waits / inference / processing, count the steps since the
policies' global timestep was last set, and remember an env failure so that every later
collection raises it again (the envs are mid-step, in an unknown state) until `restart()`.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from rlfleet.env.checks import EnvError
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.metrics import summarize_perf
from rlfleet.rollout.sampler_api import SamplerSettings


class SamplerBookkeeping:
    """The `Sampler` protocol's bookkeeping half; a sampler subclasses it and writes the loop.

    Args:
        settings: the per-run settings (see `SamplerSettings`).

    Attributes:
        settings: as given.
        steps_since_sync: env steps since the policies' global timestep was last set.
        metrics: the metrics rows of the episodes finished since `pop_metrics`.
    """

    def __init__(self, settings: SamplerSettings):
        self.settings = settings
        self.steps_since_sync = 0
        self.metrics: List[RolloutMetrics] = []
        # Seconds waited on the env, spent acting and in the sampler's own work; steps taken.
        self._perf = {"env_wait": 0.0, "inference": 0.0, "processing": 0.0, "steps": 0}
        self._eps_base = settings.episode_id_base
        self._eps_counter = 0  # episodes started (ids are `_eps_base + _eps_counter`)
        self._failed: Optional[EnvError] = None

    def pop_metrics(self) -> List[RolloutMetrics]:
        """Metrics of the episodes finished since the last call."""
        out, self.metrics = self.metrics, []
        return out

    def perf_stats(self) -> Dict[str, float]:
        """Mean time per step in env, inference and processing (ms)."""
        return summarize_perf(self._perf)

    def get_state(self) -> Dict[str, Any]:
        """The episode counter: episode ids keep counting across a checkpoint restore (they key
        offline data)."""
        return {"episodes_started": int(self._eps_counter)}

    def set_state(self, state: Dict[str, Any]) -> None:
        """Applies `get_state()` output."""
        self._eps_counter = int(state.get("episodes_started", self._eps_counter))

    def _forget(self) -> None:
        """What every `restart()` drops: an env failure, the metrics, the steps since a sync."""
        self._failed = None
        self.metrics = []
        self.steps_since_sync = 0

    def _raise_if_failed(self) -> None:
        """Raises the remembered env failure again (see the module docstring)."""
        if self._failed is not None:
            raise self._failed.with_context()

    def _next_episode_id(self) -> int:
        """The id the next episode to start gets."""
        return self._eps_base + self._eps_counter + 1

    def _env_label(self) -> str:
        """The env's name in an error when the config's `env` gives none."""
        return type(self).__name__

    def _locate(self, error: EnvError, *, sub_env_index: Optional[int], episode_id: Optional[int],
                step: Optional[int], agent_id: Any = None) -> EnvError:
        """`error` with the env, this worker and the place given; remembered (see the module
        docstring) until `restart()`."""
        error = error.with_context(env_id=self.settings.env_id or self._env_label(),
                                   worker_index=self.settings.worker_index, sub_env_index=sub_env_index,
                                   episode_id=episode_id, step=step, agent_id=agent_id)
        self._failed = error
        return error
