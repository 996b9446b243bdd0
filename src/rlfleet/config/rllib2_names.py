"""RLlib 2.x's names of rlfleet's keys, accepted in any config dict with no warning.

RLlib 2.x renamed many 1.x settings (``num_workers`` became ``num_rollout_workers`` in 2.0 and
``num_env_runners`` in 2.10; ``num_sgd_iter`` became ``num_epochs``; see the 2.x
``AlgorithmConfig`` docs, https://github.com/ray-project/ray/blob/master/rllib/algorithms/algorithm_config.py).
Both spellings are current, so a 2.x name is translated silently (unlike ``DEPRECATED_KEYS``),
before the unknown-key check; the 1.x key is the one stored in the merged config, checkpoints
and results. A 2.x name that has no rlfleet meaning for some values (``num_learners``) is
accepted where it changes nothing and refused by name, with what to write, otherwise.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional

from rlfleet.policy.policy_spec import PolicySpec


class Rllib2Name(NamedTuple):
    """One RLlib 2.x key: the rlfleet key it sets (None: it sets nothing); `refuse`, which
    returns what to write instead when rlfleet cannot honour a value (None when it can); and a
    note for the config reference."""

    key: Optional[str]
    refuse: Optional[Callable[[Any], Optional[str]]] = None
    note: str = ""


def _learners(value: Any) -> Optional[str]:
    # 2.x's num_learners=0 is one learner in the main process: rlfleet's only kind.
    if value == 0:
        return None
    return ("rlfleet learns in the trainer process (RLlib 2.x's num_learners=0); to learn on several GPUs set "
            "'num_gpus' to their number (one model copy per GPU, each minibatch split across them), or use "
            "DDPPO to learn on the remote workers; remove 'num_learners'")


R = Rllib2Name

RLLIB2_NAMES: Dict[str, Rllib2Name] = {
    "num_env_runners": R("num_workers"),
    "num_rollout_workers": R("num_workers"),  # RLlib 2.0-2.6
    "num_envs_per_env_runner": R("num_envs_per_worker"),
    "num_cpus_per_env_runner": R("num_cpus_per_worker"),
    "num_gpus_per_env_runner": R("num_gpus_per_worker"),
    "custom_resources_per_env_runner": R("custom_resources_per_worker"),
    "create_env_on_local_worker": R("create_env_on_driver"),
    "evaluation_num_env_runners": R("evaluation_num_workers"),
    "ignore_env_runner_failures": R("ignore_worker_failures"),
    "recreate_failed_env_runners": R("recreate_failed_workers"),
    "metrics_num_episodes_for_smoothing": R("metrics_smoothing_episodes"),
    "metrics_episode_collection_timeout_s": R("collect_metrics_timeout"),
    "min_time_s_per_iteration": R("min_iter_time_s"),
    "min_sample_timesteps_per_iteration": R("timesteps_per_iteration"),
    "num_cpus_for_main_process": R("num_cpus_for_driver"),
    "minibatch_size": R("sgd_minibatch_size", note="in the algorithms that have it (PPO, DDPPO)"),
    "num_epochs": R("num_sgd_iter", note="in the algorithms that have it (PPO, IMPALA, ...)"),
    # With the one learner of the trainer process, the learner's batch is the train batch
    # and its GPUs are the trainer's.
    "train_batch_size_per_learner": R("train_batch_size"),
    "num_gpus_per_learner": R("num_gpus"),
    "num_learners": R(None, _learners, "(none): only 0, the one learner in the trainer process; for more GPUs "
                                       "set `num_gpus` (one model copy per GPU)"),
}


def _differ(a: Any, b: Any) -> bool:
    try:
        return bool(a != b)
    except Exception:  # e.g. arrays or objects without a plain truth value: compare identity
        return a is not b


def rename_rllib2_keys(config: Mapping[str, Any], known: Optional[Mapping[str, Any]] = None, *,
                       prefix: str = "") -> Dict[str, Any]:
    """Returns a shallow copy of `config` with RLlib 2.x's names replaced by rlfleet's (also
    inside ``evaluation_config`` and each ``multiagent.policies`` entry's config overlay);
    `config` is not changed.

    Args:
        config: a user's (partial) config.
        known: the algorithm's full default config: a 2.x name of a key it lacks is an error
            (``minibatch_size`` for DQN); None renames every 2.x name.
        prefix: put before the keys' names in errors (``"evaluation_config."`` for an overlay).

    Returns:
        The config with rlfleet's keys only.

    Raises:
        ValueError: when both spellings of a key are given with different values (naming both), for a
            2.x name of a key the algorithm does not have, and for a value rlfleet cannot honour.
    """
    out = dict(config)
    source: Dict[str, str] = {}  # rlfleet key -> the 2.x name that set it
    for name, entry in RLLIB2_NAMES.items():
        if name not in config or (known is not None and name in known):
            continue
        value = out.pop(name)
        if entry.refuse is not None and entry.refuse(value) is not None:
            raise ValueError(f"'{prefix}{name}': {value!r} cannot be honoured: {entry.refuse(value)}")
        if entry.key is None:
            continue
        if known is not None and entry.key not in known:
            raise ValueError(f"Unknown config key '{prefix}{name}': it is RLlib 2.x's name of '{entry.key}', which "
                             "this algorithm does not have")
        if entry.key in out and _differ(out[entry.key], value):
            other = source.get(entry.key, entry.key)
            raise ValueError(f"'{prefix}{name}': {value!r} and '{prefix}{other}': {out[entry.key]!r} set the same "
                             f"key ('{entry.key}'; '{name}' is RLlib 2.x's name of it) to different values; give "
                             "only one of them")
        out[entry.key] = value
        source[entry.key] = name
    overlay = out.get("evaluation_config")
    if isinstance(overlay, Mapping):
        out["evaluation_config"] = rename_rllib2_keys(overlay, known, prefix=f"{prefix}evaluation_config.")
    multiagent = out.get("multiagent")
    if isinstance(multiagent, Mapping) and isinstance(multiagent.get("policies"), Mapping):
        policies = {pid: _renamed_spec(spec, known, f"{prefix}multiagent.policies.{pid}.config.")
                    for pid, spec in multiagent["policies"].items()}
        out["multiagent"] = {**multiagent, "policies": policies}
    return out


def _renamed_spec(spec: Any, known: Optional[Mapping[str, Any]], prefix: str) -> Any:
    """A policy's spec (a `PolicySpec` or a 4-tuple/list) with 2.x's names in its config
    overlay (2.x's `PolicySpec(config={"num_epochs": ...})`) replaced, as the top level's are.
    A policy of its own class may read keys rlfleet does not know: its overlay is renamed
    with no unknown-key check, as ``nested_keys`` checks only the trainer's policies'."""
    if not isinstance(spec, (list, tuple)) or len(spec) != 4 or not isinstance(spec[3], Mapping):
        return spec  # no overlay (or a malformed spec, which the policies check reports)
    renamed = rename_rllib2_keys(spec[3], known if spec[0] is None else None, prefix=prefix)
    if isinstance(spec, PolicySpec):
        return spec._replace(config=renamed)
    return type(spec)((*spec[:3], renamed))
