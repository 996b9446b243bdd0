"""`rlfleet evaluate`: run a checkpoint's policy greedily for some episodes (the reference
era's `rllib rollout`)."""
from __future__ import annotations

import shutil
import tempfile
from typing import Any, Callable, Dict, Optional


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
    on_episode: Optional[Callable[[int, float, int], None]] = None,
) -> Dict[str, Any]:
    """Restores `checkpoint_path` (`Trainer.from_checkpoint`) and runs its default policy
    without exploration in one env, episode after episode.

    Observations go through the restored preprocessor and filter (not updated), actions are
    unsquashed / clipped as in training; the env's first reset is seeded from the config's
    `seed` when there is one.

    Args:
        checkpoint_path: a checkpoint folder.
        num_episodes: how many episodes to run.
        env: an env to use instead of the checkpoint's (its spaces must fit the policy).
        render: render each step (Gymnasium ids are made with `render_mode="human"`).
        on_episode: called as `(index, return, length)` after each episode.

    Returns:
        `{"checkpoint", "algorithm", "env", "episodes": [{"return", "length"}], "mean_return"}`.
    """
    from rlfleet.env.env_context import EnvContext
    from rlfleet.policy.torch_policy import derive_seed
    from rlfleet.trainer import Trainer

    overrides: Dict[str, Any] = {"num_workers": 0, "evaluation_interval": None, "evaluation_num_workers": 0,
                                 "num_envs_per_worker": 1}
    if env is not None:
        overrides["env"] = env
    logdir = tempfile.mkdtemp(prefix="rlfleet-evaluate-")
    trainer = None
    try:
        trainer = Trainer.from_checkpoint(checkpoint_path, overrides, logdir=logdir,
                                          logger_creator=lambda cfg: _NoLogger())
        env_config = dict(trainer.config.get("env_config") or {})
        if render:
            env_config["render_mode"] = "human"
        the_env = trainer.env_creator(EnvContext(env_config, worker_index=0))
        seed = trainer.config.get("seed")
        horizon = trainer.config.get("horizon")
        policy = trainer.get_policy()
        episodes = []
        obs, _ = the_env.reset(seed=None if seed is None else derive_seed(seed, "evaluate") & 0xFFFFFFFF)
        for index in range(int(num_episodes)):
            if index:
                obs, _ = the_env.reset()
            state = policy.get_initial_state()
            prev_action, prev_reward = None, None
            total, length, done = 0.0, 0, False
            while not done:
                if state:
                    action, state, _ = trainer.compute_single_action(
                        obs, state=state, prev_action=prev_action, prev_reward=prev_reward, explore=False)
                else:
                    action = trainer.compute_single_action(obs, explore=False)
                obs, reward, terminated, truncated, _ = the_env.step(action)
                if render and getattr(the_env, "render_mode", None) != "human":
                    the_env.render()
                prev_action, prev_reward = action, float(reward)
                total += float(reward)
                length += 1
                done = bool(terminated or truncated) or (horizon is not None and length >= horizon)
            episodes.append({"return": total, "length": length})
            if on_episode is not None:
                on_episode(index, total, length)
        the_env.close()
        return {
            "checkpoint": str(checkpoint_path),
            "algorithm": trainer._name,
            "env": trainer.config.get("env") if isinstance(trainer.config.get("env"), str) else repr(trainer.config.get("env")),
            "episodes": episodes,
            "mean_return": sum(e["return"] for e in episodes) / len(episodes),
        }
    finally:
        if trainer is not None:
            trainer.stop()
        shutil.rmtree(logdir, ignore_errors=True)


__all__ = ["evaluate_checkpoint"]
