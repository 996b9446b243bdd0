"""The result names an RLlib 2.x script reads, computed from rlfleet's (RLlib 1.x) names, in
this one place.

RLlib 2.x nests episode statistics under `env_runners`, learner statistics under
`learners/<policy id>`, and counts steps over the run's life at the top level (the names are
the constants of https://github.com/ray-project/ray/blob/master/rllib/utils/metrics/__init__.py:
ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN, NUM_ENV_STEPS_SAMPLED_LIFETIME, LEARNER_RESULTS, ...). `add_rllib2_keys(result)` adds
them beside the 1.x keys as nested dicts, as 2.x returns them: a loop reads
`result["env_runners"]["episode_return_mean"]`, and the flat name
"env_runners/episode_return_mean" works wherever results are addressed with "/"
(`rlfleet train --stop`, YAML `stop:`, Ray Tune's `stop` and
`get_best_result(metric=...)`, which flatten nested dicts with "/").

They are copies, so rlfleet's own progress.csv and TensorBoard writers leave them out
(`is_rllib2_copy`): each quantity is one column and one curve there, under its 1.x name;
result.json keeps them. Cheap to import: no NumPy, no torch.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, MutableMapping

# (2.x name under `env_runners`, 1.x name) for a training or an evaluation result.
EPISODE_KEYS = (
    ("episode_return_mean", "episode_reward_mean"),
    ("episode_return_min", "episode_reward_min"),
    ("episode_return_max", "episode_reward_max"),
    ("episode_len_mean", "episode_len_mean"),
    ("num_episodes", "episodes_this_iter"),
    ("module_episode_returns_mean", "policy_reward_mean"),
    ("module_episode_returns_min", "policy_reward_min"),
    ("module_episode_returns_max", "policy_reward_max"),
)
# (2.x top-level name, the trainer's counter): totals since the run began.
LIFETIME_KEYS = (
    ("num_env_steps_sampled_lifetime", "num_env_steps_sampled"),
    ("num_agent_steps_sampled_lifetime", "num_agent_steps_sampled"),
    ("num_env_steps_trained_lifetime", "num_env_steps_trained"),
    ("num_agent_steps_trained_lifetime", "num_agent_steps_trained"),
)
ENV_RUNNERS = "env_runners"
LEARNERS = "learners"
_TOP_LEVEL = frozenset([ENV_RUNNERS, LEARNERS] + [name for name, _ in LIFETIME_KEYS])


def add_rllib2_keys(result: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Adds the 2.x names to a train() result (and to its `evaluation` part, when there is
    one), in place; the 1.x keys stay. Calling it again recomputes the same values.

    Args:
        result: a result dict as `Trainer.train()` or `Trainer.evaluate()` compiles it.

    Returns:
        `result`.
    """
    _add_env_runners(result)
    evaluation = result.get("evaluation")
    if isinstance(evaluation, MutableMapping):
        _add_env_runners(evaluation)
    for name, counter in LIFETIME_KEYS:
        if counter in result:
            result[name] = result[counter]
    learner = (result.get("info") or {}).get("learner")
    if isinstance(learner, Mapping):
        result[LEARNERS] = {pid: _learner_stats(info) for pid, info in learner.items() if isinstance(info, Mapping)}
    return result


def _add_env_runners(result: MutableMapping[str, Any]) -> None:
    stats = {new: _copy(result[old]) for new, old in EPISODE_KEYS if old in result}
    if stats:
        result[ENV_RUNNERS] = stats


def _learner_stats(info: Mapping[str, Any]) -> Dict[str, Any]:
    """One policy's numbers: its loss statistics (1.x nests them under `learner_stats`) and
    the numbers beside them (e.g. `num_nonfinite_updates`), flat as 2.x's
    `learners/<policy id>/<stat>`; strings (the fast-path report) and arrays stay 1.x-only."""
    out = {k: v for k, v in info.items() if _is_scalar(v)}
    out.update({k: v for k, v in (info.get("learner_stats") or {}).items() if _is_scalar(v)})
    return out


def _is_scalar(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    # NumPy / torch scalars, recognised without importing either.
    return getattr(value, "ndim", None) == 0 and hasattr(value, "item")


def _copy(value: Any) -> Any:
    # Per-policy dicts are copied so that changing one name's dict leaves the other alone.
    return dict(value) if isinstance(value, Mapping) else value


def is_rllib2_copy(flat_key: str, sep: str = "/") -> bool:
    """Whether a flattened result key is one of the 2.x copies `add_rllib2_keys` adds."""
    parts = flat_key.split(sep)
    if parts[0] == "evaluation":
        return len(parts) > 1 and parts[1] == ENV_RUNNERS
    return parts[0] in _TOP_LEVEL
