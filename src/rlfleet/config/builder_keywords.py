"""The keywords of each ``AlgorithmConfig`` builder method and the config key each one sets.

The methods and their keywords are RLlib 2.x's (its ``AlgorithmConfig``,
https://github.com/ray-project/ray/blob/master/rllib/algorithms/algorithm_config.py), the keys rlfleet's:
a keyword sets a declared key, or an RLlib 2.x name of one (``RLLIB2_NAMES``, translated the
way a dict config's is). ``training()`` also takes every key the algorithm declares itself
(``training_keywords``). A keyword that sets no key (``ACCEPTED_DEFAULTS``) is accepted only
with the value that changes nothing for rlfleet.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterable, NamedTuple, Tuple


def _identity(*names: str) -> Dict[str, str]:
    return {name: name for name in names}


BUILDER_METHODS: Dict[str, Dict[str, str]] = {
    "environment": {
        **_identity("env", "env_config", "observation_space", "action_space", "clip_rewards", "normalize_actions",
                    "clip_actions", "disable_env_checking", "render_env", "env_task_fn", "horizon", "soft_horizon",
                    "no_done_at_end", "record_env", "preprocessor_pref"),
    },
    "env_runners": {
        **_identity("num_env_runners", "num_envs_per_env_runner", "num_cpus_per_env_runner",
                    "num_gpus_per_env_runner", "custom_resources_per_env_runner", "create_env_on_local_worker",
                    "rollout_fragment_length", "batch_mode", "explore", "observation_filter", "synchronize_filters",
                    "compress_observations", "remote_worker_envs", "remote_env_batch_wait_ms", "sample_async",
                    "sample_collector", "gym_env_vectorize_mode"),
    },
    # RLlib 2.0-2.9's spelling of env_runners().
    "rollouts": {
        **_identity("num_rollout_workers", "num_envs_per_worker", "create_env_on_local_worker",
                    "rollout_fragment_length", "batch_mode", "observation_filter", "synchronize_filters",
                    "compress_observations", "remote_worker_envs", "remote_env_batch_wait_ms", "sample_async",
                    "sample_collector", "ignore_worker_failures", "recreate_failed_workers"),
    },
    "training": _identity("gamma", "lr", "train_batch_size", "model", "optimizer", "train_batch_size_per_learner"),
    "evaluation": {
        **_identity("evaluation_interval", "evaluation_duration", "evaluation_duration_unit",
                    "evaluation_num_env_runners", "evaluation_num_workers", "evaluation_config",
                    "evaluation_parallel_to_training", "always_attach_evaluation_results", "evaluation_num_episodes"),
        "custom_evaluation_function": "custom_eval_function",
    },
    "resources": _identity("num_gpus", "_fake_gpus", "num_cpus_per_worker", "num_gpus_per_worker",
                           "custom_resources_per_worker", "num_cpus_for_driver", "num_cpus_for_main_process",
                           "placement_strategy"),
    "learners": _identity("num_learners", "num_gpus_per_learner"),
    "multi_agent": {name: f"multiagent.{name}" for name in (
        "policies", "policy_mapping_fn", "policies_to_train", "count_steps_by", "observation_fn", "replay_mode",
        "policy_map_capacity", "policy_map_cache")},
    "offline_data": {
        "input_": "input",
        **_identity("input_config", "actions_in_input_normalized", "input_evaluation", "postprocess_inputs",
                    "shuffle_buffer_size", "output", "output_compress_columns", "output_max_file_size"),
    },
    "callbacks": {"callbacks_class": "callbacks"},
    "debugging": _identity("seed", "log_level", "logger_config", "log_sys_usage", "fake_sampler", "fast_path",
                           "max_nonfinite_updates"),
    "fault_tolerance": _identity("ignore_env_runner_failures", "recreate_failed_env_runners",
                                 "ignore_worker_failures", "recreate_failed_workers"),
    "reporting": _identity("metrics_num_episodes_for_smoothing", "metrics_episode_collection_timeout_s",
                           "min_time_s_per_iteration", "min_sample_timesteps_per_iteration",
                           "keep_per_episode_custom_metrics"),
    "checkpointing": {},
    "framework": _identity("framework", "eager_tracing"),
    "exploration": _identity("explore", "exploration_config"),
    # RLlib 2.x's new stack configures the model here; rlfleet's `model` dict takes its entries.
    "rl_module": {"model_config": "model", "model_config_dict": "model"},
    "api_stack": {},
    "python_environment": _identity("extra_python_environs_for_driver", "extra_python_environs_for_worker"),
    "experimental": _identity("_disable_preprocessor_api"),
}

# The first positional argument a method takes, as RLlib 2.x's do: environment("CartPole-v1").
POSITIONAL: Dict[str, str] = {"environment": "env", "callbacks": "callbacks_class", "framework": "framework",
                              "offline_data": "input_"}


# RLlib 2.x's spellings of algorithms' own keys, accepted by training() where the algorithm has the key.
TRAINING_SPELLINGS: Dict[str, str] = {
    "lambda_": "lambda",
    "minibatch_size": "sgd_minibatch_size",
    "num_epochs": "num_sgd_iter",
    "num_steps_sampled_before_learning_starts": "learning_starts",
    "q_model_config": "Q_model",
    "policy_model_config": "policy_model",
    # SAC: 2.0-2.9's optimizer dict and 2.10+'s separate learning rates.
    "optimization_config": "optimization",
    "actor_lr": "optimization.actor_learning_rate",
    "critic_lr": "optimization.critic_learning_rate",
    "alpha_lr": "optimization.entropy_learning_rate",
}


class AcceptedDefault(NamedTuple):
    """A 2.x keyword with no rlfleet key: `accepts(value)` says whether it changes nothing; `fix`
    says what to write instead when it would."""

    accepts: Callable[[Any], bool]
    fix: str


def _is(*values: Any) -> Callable[[Any], bool]:
    return lambda v: any(v is x or (type(v) is type(x) and v == x) for x in values)


ACCEPTED_DEFAULTS: Dict[Tuple[str, str], AcceptedDefault] = {
    # rlfleet writes one checkpoint format (torch state dicts); every policy is saved.
    ("checkpointing", "export_native_model_files"): AcceptedDefault(
        _is(False), "use trainer.export_policy_model(folder) to export a policy's torch model"),
    ("checkpointing", "checkpoint_trainable_policies_only"): AcceptedDefault(
        _is(False), "rlfleet checkpoints every policy; remove it"),
    # rlfleet has one stack (RLlib 1.x's policies, on torch), so either answer runs the same code.
    ("api_stack", "enable_rl_module_and_learner"): AcceptedDefault(_is(True, False), ""),
    ("api_stack", "enable_env_runner_and_connector_v2"): AcceptedDefault(_is(True, False), ""),
    # The torch models run eagerly.
    ("framework", "torch_compile_learner"): AcceptedDefault(_is(False), "remove it (models run eagerly)"),
    ("framework", "torch_compile_worker"): AcceptedDefault(_is(False), "remove it (models run eagerly)"),
    # rlfleet has no RLModule classes: a custom network is a torch model registered by name.
    ("rl_module", "rl_module_spec"): AcceptedDefault(
        _is(None), "register your torch model with ModelCatalog.register_custom_model(name, cls) and pass "
        "rl_module(model_config={'custom_model': name}) (or training(model=...))"),
    ("rl_module", "algorithm_config_overrides_per_module"): AcceptedDefault(
        _is(None), "give each policy its own settings with multi_agent(policies={pid: PolicySpec(config={...})})"),
}


# Keyword -> the function turning its value into the key's.
def model_dict(value: Any) -> Any:
    """RLlib 2.x's `DefaultModelConfig` is a dataclass: its fields become `model` entries (the
    model check then refuses any name rlfleet's `model` does not have)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


CONVERTERS: Dict[str, Callable[[Any], Any]] = {"model_config": model_dict,
                                               "model_config_dict": model_dict}


def training_keywords(algo_keys: Iterable[str], common: Iterable[str]) -> Dict[str, str]:
    """training()'s keywords for an algorithm: the common learning keys, the algorithm's own
    top-level keys, and RLlib 2.x's spellings of those.

    Args:
        algo_keys: the dotted names of the keys the algorithm declares (its ``ALGO_KEYS``).
        common: the common keys' dotted names (an override of one is not training()'s).
    """
    common = set(common)
    own = {name.split(".")[0] for name in algo_keys if name not in common and name.split(".")[0] not in common}
    out = dict(BUILDER_METHODS["training"])
    out.update({name: name for name in sorted(own)})
    out.update({spelling: key for spelling, key in TRAINING_SPELLINGS.items() if key.split(".")[0] in own})
    return out
