"""Whether an env is an Atari (ALE) game: Atari envs get DeepMind preprocessing and reward
clipping by default.

Apart from `wrappers/atari.py` because that module imports torch, and the remote-env actors
(`rollout/remote_vector_env.py`) ask too without it.
"""
from __future__ import annotations

from typing import Any


def is_atari(env: Any) -> bool:
    """An ALE env (by id, or by its unwrapped class)."""
    spec = getattr(env, "spec", None)
    env_id = getattr(spec, "id", "") or ""
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id or type(env.unwrapped).__name__ == "AtariEnv"
