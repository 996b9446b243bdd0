"""Checks a Trainer makes once its workers exist and before the algorithm's setup: settings
that only the built policies can judge fail at once, naming the key."""
from __future__ import annotations

from typing import Any

from rlfleet.models.action_mask import MaskLayout


def check_models_fit_spaces(worker: Any) -> None:
    """`model.conv_filters` needs image observations: on a flat one the built-in models would
    silently ignore it (RLlib 1.x did), so say so."""
    trained = set(worker.policies_to_train)

    def check(policy: Any, pid: str) -> None:
        model = policy.model
        if model is None and pid not in trained:  # a scripted opponent: it reads no model settings
            return
        model_config = (policy.config or {}).get("model") or {}
        shape = policy.observation_space.shape
        for layout in (getattr(model, "layout", None), getattr(model, "mask_layout", None)):  # PG family / DQN
            if isinstance(layout, MaskLayout):  # an action mask: the model sees the rest (an image when it is one)
                shape = layout.rest_space.shape
        if model_config.get("conv_filters") and not model_config.get("custom_model") \
                and shape is not None and len(shape) not in (2, 3):
            raise ValueError(
                f"'model.conv_filters': {model_config['conv_filters']!r} is set, but policy {pid!r} sees "
                f"observations of shape {tuple(shape)}, not images ([H, W] or [H, W, C]); remove "
                "conv_filters (a fully connected net is used, see fcnet_hiddens) or give image observations "
                "(beside an action mask, one [H, W] or [H, W, C] entry)")

    worker.foreach_policy(check)


def check_required_fast_paths(config: dict, worker: Any) -> None:
    """`fast_path: "require"` fails when the trainer is built, not after the first sampling:
    every trained policy's plan (policy/fast_plan.py) is made now, and raises naming the
    reason where the NumPy learner cannot serve it."""
    if config.get("fast_path") != "require":
        return
    for pid in worker.policies_to_train:
        policy = worker.policy_map[pid]
        _ = policy.fast_plan  # made and cached (raises where the learner cannot take it); None: no plan


__all__ = ["check_models_fit_spaces", "check_required_fast_paths"]
