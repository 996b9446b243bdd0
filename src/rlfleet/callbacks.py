"""User hooks into training: subclass `DefaultCallbacks` and override what you need.

Every hook takes keyword arguments only, so new arguments can be added later without
breaking user code (always accept `**kwargs`).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

_LEGACY_KEYS = (
    "on_episode_start",
    "on_episode_step",
    "on_episode_end",
    "on_sample_end",
    "on_postprocess_traj",
    "on_train_result",
)


class DefaultCallbacks:
    """No-op hooks; the sampler calls only the ones a subclass overrides.

    Args:
        legacy_callbacks_dict: RLlib 1.x's older form, a dict of
            ``{hook_name: fn(info_dict)}``; each function receives the hook's keyword
            arguments as one dict.
    """

    def __init__(self, legacy_callbacks_dict: Optional[Dict[str, Callable]] = None):
        legacy = dict(legacy_callbacks_dict or {})
        unknown = sorted(set(legacy) - set(_LEGACY_KEYS))
        if unknown:
            raise ValueError(
                f"Unknown callback name(s) {unknown} in the `callbacks` dict; "
                f"valid names are {list(_LEGACY_KEYS)}. Better: subclass DefaultCallbacks."
            )
        self.legacy_callbacks = legacy

    # --- helpers -----------------------------------------------------------------
    def overrides(self, name: str) -> bool:
        """True when `name` does something: overridden by a subclass or given as legacy."""
        legacy_name = "on_postprocess_traj" if name == "on_postprocess_trajectory" else name
        if legacy_name in self.legacy_callbacks:
            return True
        return getattr(type(self), name) is not getattr(DefaultCallbacks, name)

    def _legacy(self, name: str, info: Dict[str, Any]) -> None:
        fn = self.legacy_callbacks.get(name)
        if fn is not None:
            fn(info)

    # --- state (in trainer checkpoints) ---------------------------------------------------
    def get_state(self) -> Dict[str, Any]:
        """The trainer's callbacks' state for checkpoints (JSON data and NumPy arrays); `{}`: none."""
        return {}

    def set_state(self, *, trainer, state: Dict[str, Any]) -> None:
        """Takes `get_state()` output back, before the trainer's own state is applied."""

    # --- hooks -------------------------------------------------------------------
    def on_trainer_init(self, *, trainer, **kwargs) -> None:
        """Called once at the end of `Trainer.__init__`."""

    def on_episode_start(self, *, worker, base_env, policies, episode, env_index=None, **kwargs) -> None:
        """Called right after an episode's first observation (after reset)."""
        self._legacy("on_episode_start", dict(env=base_env, policy=policies, episode=episode))

    def on_episode_step(self, *, worker, base_env, episode, env_index=None, **kwargs) -> None:
        """Called after each env step of an episode (not after the reset)."""
        self._legacy("on_episode_step", dict(env=base_env, episode=episode))

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs) -> None:
        """Called when an episode is done (terminated, truncated or hit the horizon)."""
        self._legacy("on_episode_end", dict(env=base_env, policy=policies, episode=episode))

    def on_postprocess_trajectory(
        self, *, worker, episode, agent_id, policy_id, policies, postprocessed_batch, original_batches, **kwargs
    ) -> None:
        """Called after the policy's `postprocess_trajectory` on one trajectory; may mutate it."""
        self._legacy(
            "on_postprocess_traj",
            dict(
                episode=episode,
                agent_id=agent_id,
                pre_batch=original_batches,
                post_batch=postprocessed_batch,
                all_pre_batches=original_batches,
            ),
        )

    def on_sample_end(self, *, worker, samples, **kwargs) -> None:
        """Called at the end of `RolloutWorker.sample()` with the batch it returns."""
        self._legacy("on_sample_end", dict(worker=worker, samples=samples))

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs) -> None:
        """Called before a policy learns on `train_batch`; `result` is its stats dict."""

    def on_train_result(self, *, trainer, result: dict, **kwargs) -> None:
        """Called at the end of `Trainer.train()`; may mutate `result` before it is logged."""
        self._legacy("on_train_result", dict(trainer=trainer, result=result))
