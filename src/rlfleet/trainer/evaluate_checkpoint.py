"""`rlfleet evaluate`: a checkpoint's policies run for whole episodes without exploration.

Apart from `evaluation.py` because it builds a `Trainer` (`Trainer.from_checkpoint`), and the
trainer builds its `Evaluator`: one module holding both would import the trainer that
imports it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from rlfleet.trainer import Trainer


class _NoLogger:
    def on_result(self, result: Any) -> None:
        pass

    def close(self) -> None:
        pass


def evaluate_checkpoint(
    checkpoint_path: str,
    num_episodes: int,
    *,
    env: Optional[str] = None,
    render: bool = False,
    video: Optional[str] = None,
    trusted_modules: Optional[Sequence[str]] = None,
    on_episode: Optional[Callable[[int, float, int], None]] = None,
) -> Dict[str, Any]:
    """Restores `checkpoint_path` (`Trainer.from_checkpoint`) and runs its policies without
    exploration in one env, episode after episode (what RLlib 1.x's `rllib rollout` command does).

    The episodes run on an evaluation worker (the checkpoint's `evaluation_config` applies,
    with `explore=False` and one env), through the same sampler as training: the restored
    preprocessors and filters, actions unsquashed / clipped as in training, the episode-end
    rules of the config, envs seeded from the config's `seed` when there is one. Each
    episode starts from the checkpoint's filter statistics.

    Args:
        checkpoint_path: a checkpoint folder.
        num_episodes: how many episodes to run.
        env: an env to use instead of the checkpoint's (its spaces must fit the policy).
        render: render each step (Gymnasium ids are made with `render_mode="human"`).
        video: a folder to record every episode into as MP4 files (`record_env`; relative to the
            current folder).
        trusted_modules: modules the checkpoint's classes and functions may be imported
            from (see `Trainer.from_checkpoint`).
        on_episode: called as `(index, return, length)` after each episode.

    Returns:
        `{"checkpoint", "algorithm", "env", "episodes": [{"return", "length"}], "mean_return"}`.
    """
    overrides: Dict[str, Any] = {"num_workers": 0, "evaluation_interval": None, "evaluation_num_workers": 0}
    if env is not None:
        overrides["env"] = env
    logdir = tempfile.mkdtemp(prefix="rlfleet-evaluate-")
    trainer = workers = None
    try:
        trainer = Trainer.from_checkpoint(checkpoint_path, overrides, trusted_modules=trusted_modules,
                                          logdir=logdir, logger_creator=lambda cfg: _NoLogger())
        run_config: Dict[str, Any] = {"explore": False, "num_envs_per_worker": 1}
        if render:
            env_config = dict(trainer.config.get("env_config") or {}, render_mode="human")
            run_config.update(render_env=True, env_config=env_config)
        if video:
            # Resolved here: a relative folder would land in the temporary run folder, deleted below.
            run_config.update(record_env=os.path.abspath(os.path.expanduser(video)), _record_env_episodes=int(num_episodes))
        workers = trainer.evaluator.build_workers(run_config, num_workers=0)
        episodes: List[Dict[str, Any]] = []
        for index in range(int(num_episodes)):
            trainer.evaluator.sync(workers)
            (metrics,) = workers.sample_episodes(1)
            episodes.append({"return": float(metrics.episode_reward), "length": int(metrics.episode_length)})
            if on_episode is not None:
                on_episode(index, episodes[-1]["return"], episodes[-1]["length"])
        env_name = trainer.config.get("env")
        return {
            "checkpoint": str(checkpoint_path),
            "algorithm": repr(trainer),
            "env": env_name if isinstance(env_name, str) else repr(env_name),
            "episodes": episodes,
            "mean_return": sum(e["return"] for e in episodes) / len(episodes),
        }
    finally:
        if workers is not None:
            workers.stop()
        if trainer is not None:
            trainer.stop()
        shutil.rmtree(logdir, ignore_errors=True)


__all__ = ["evaluate_checkpoint"]
