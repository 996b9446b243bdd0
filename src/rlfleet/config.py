"""Trainer configuration: every key declared once, merging, validation, deprecations.

Each key is declared exactly once below as ``ConfigKey(name, default, doc, check)``;
``COMMON_CONFIG``, ``MODEL_DEFAULTS``, the validation messages and the docs page
(``describe_keys()``) are all derived from those declarations.

How a trainer builds its config::

    config = merge_configs(AlgoTrainer.DEFAULT_CONFIG, user_config)   # unknown key -> error
    validate_config(config)                                           # normalizes in place

Deviations from the reference (RLlib 1.x) defaults:

- ``num_workers`` defaults to 0: rlfleet's default is one process with no cluster, which
  starts instantly; ask for remote workers explicitly.
- ``framework`` defaults to ``"torch"`` and accepts nothing else.
- ``sample_collector`` defaults to None, meaning rlfleet's built-in collector.
- ``tf_session_args``, ``local_tf_session_args`` and ``eager_tracing`` are accepted so old
  configs load, and ignored (a one-time log notice when set to a non-default value).
- ``recreate_failed_workers`` (default False) is new.
- Deprecated keys live in ``DEPRECATED_KEYS``, not as sentinel values in ``COMMON_CONFIG``.
- Features that later versions enable are listed in ``NOT_YET_AVAILABLE``; setting one of
  them to a non-default value is a clear error (see ``check_available``).
"""
from __future__ import annotations

import copy
import logging
import numbers
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.utils.deep_update import deep_update

logger = logging.getLogger(__name__)

DEFAULT_POLICY_ID = "default_policy"


# ---------------------------------------------------------------------------------------
# Value checks. A check takes the value and returns it (possibly normalized, e.g. a tuple
# made a list) or raises _Invalid("what is allowed"); validate_config turns that into a
# message naming the key and the value given.
# ---------------------------------------------------------------------------------------
class _Invalid(Exception):
    pass


Check = Callable[[Any], Any]


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _int(lo: int) -> Check:
    def check(v: Any) -> Any:
        # YAML/JSON tools often write whole numbers as floats (4000.0); accept those.
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not _is_int(v) or v < lo:
            raise _Invalid(f"an int >= {lo}")
        return v

    return check


def _num(lo: float, hi: Optional[float] = None) -> Check:
    def check(v: Any) -> Any:
        # Written as "not in range" so that NaN is rejected too.
        if not _is_num(v) or not (lo <= v and (hi is None or v <= hi)):
            raise _Invalid(f"a number in [{lo}, {hi}]" if hi is not None else f"a number >= {lo}")
        return v

    return check


def _optional(inner: Check, none_means: str) -> Check:
    def check(v: Any) -> Any:
        if v is None:
            return v
        try:
            return inner(v)
        except _Invalid as e:
            raise _Invalid(f"None ({none_means}) or {e}") from None

    return check


def _one_of(*choices: Any, or_callable: bool = False) -> Check:
    def check(v: Any) -> Any:
        if v in choices or (or_callable and callable(v)):
            return v
        raise _Invalid(f"one of {list(choices)}" + (" or a callable" if or_callable else ""))

    return check


def _dict(none_as_empty: bool = False) -> Check:
    def check(v: Any) -> Any:
        if v is None and none_as_empty:
            return {}
        if not isinstance(v, dict):
            raise _Invalid("a dict" + (" (or None)" if none_as_empty else ""))
        return v

    return check


def _int_list(v: Any) -> Any:
    if not isinstance(v, (list, tuple)) or not all(_is_int(x) and x > 0 for x in v):
        raise _Invalid("a list of ints > 0")
    return list(v)


def _framework(v: Any) -> Any:
    if v != "torch":
        raise ValueError(f"'framework': {v!r} is not supported; rlfleet supports only \"torch\"")
    return v


def _clip_rewards(v: Any) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if _is_num(v) and v > 0:
        return v
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_num(x) for x in v) and v[0] < v[1]:
        return v
    raise _Invalid("None (clip for Atari only), True (sign), False (never), a number > 0, "
                   "or a (low, high) pair with low < high")


def _record_env(v: Any) -> Any:
    if v == "":  # an empty folder name means "the default folder"
        return True
    if not isinstance(v, (bool, str)):
        raise _Invalid("False, True (default video folder) or a folder path")
    return v


def _exploration_type(v: Any) -> Any:
    # Imported here: the exploration package sits above config in the layers.
    from rlfleet.exploration.stochastic_sampling import resolve_exploration_class

    try:
        resolve_exploration_class(v)
    except ValueError as e:
        raise _Invalid(str(e).split("; ", 1)[-1].replace("use ", "", 1)) from None
    return v


def legacy_callbacks_factory(legacy: Dict[str, Callable]) -> Callable[[], DefaultCallbacks]:
    """Wraps the reference's older ``{hook_name: fn(info)}`` callbacks dict into a factory.

    Args:
        legacy: the dict given as ``callbacks``.

    Returns:
        A zero-argument callable returning ``DefaultCallbacks(legacy_callbacks_dict=legacy)``.
    """
    legacy = dict(legacy)  # later edits of the user's dict must not change the trainer
    return lambda: DefaultCallbacks(legacy_callbacks_dict=legacy)


def _callbacks(v: Any) -> Any:
    if v is None:
        return DefaultCallbacks
    if isinstance(v, dict):
        return legacy_callbacks_factory(v)
    if not callable(v):
        raise _Invalid("a DefaultCallbacks subclass (or any callable returning an instance), "
                       "a dict of legacy callback functions, or None")
    return v


def _input_evaluation(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    if not isinstance(v, list):
        raise _Invalid("a list of estimator names, e.g. ['is', 'wis'], or []")
    return v


def _policies(v: Any) -> Dict[str, Any]:
    # Imported here, not at the top: the policy package may come to import this module
    # (for DEFAULT_POLICY_ID), and a top-level import would then be circular.
    from rlfleet.policy.policy_spec import PolicySpec

    if not v:
        v = {DEFAULT_POLICY_ID}
    if isinstance(v, (set, frozenset, list, tuple)):
        v = {pid: PolicySpec() for pid in v}
    if not isinstance(v, dict):
        raise _Invalid("a dict {policy_id: PolicySpec or (cls, obs_space, act_space, config)} "
                       "or a set of policy ids")
    out: Dict[str, Any] = {}
    for pid, spec in v.items():
        if not isinstance(pid, str):
            raise ValueError(f"'multiagent.policies': policy id {pid!r} is a {type(pid).__name__}; "
                             "policy ids must be str")
        if not isinstance(spec, PolicySpec):
            if not isinstance(spec, (list, tuple)) or len(spec) != 4:
                raise ValueError(f"'multiagent.policies': the spec of policy {pid!r} is {spec!r}; "
                                 "expected a PolicySpec or a 4-tuple/list (policy_class or None, "
                                 "observation_space, action_space, config)")
            spec = PolicySpec(*spec)
        if spec.config is None:
            spec = spec._replace(config={})
        elif not isinstance(spec.config, dict):
            raise ValueError(f"'multiagent.policies': the config of policy {pid!r} is "
                             f"{spec.config!r}; expected a dict or None")
        out[pid] = spec
    return out


def _callable_or_none(signature: str) -> Check:
    def check(v: Any) -> Any:
        if v is None or callable(v):
            return v
        raise _Invalid(f"None or a function {signature}")

    return check


def _policy_ids(v: Any) -> Any:
    if v is None:
        return v
    if isinstance(v, (list, tuple, set, frozenset)) and all(isinstance(p, str) for p in v):
        return list(v)
    raise _Invalid("None (train all policies) or a list of policy ids (str)")


# ---------------------------------------------------------------------------------------
# Declarations.
# ---------------------------------------------------------------------------------------
class ConfigKey(NamedTuple):
    """One config key: dotted ``name`` for nested keys, its default, one line of meaning."""

    name: str
    default: Any
    doc: str
    check: Optional[Check] = None


K = ConfigKey

MODEL_KEYS: List[ConfigKey] = [
    K("fcnet_hiddens", [256, 256], "Hidden layer sizes of the fully connected network.", _int_list),
    K("fcnet_activation", "tanh", "Activation of the fully connected layers."),
    K("conv_filters", None, "CNN layers as [out_channels, kernel, stride] triples; None picks by image size."),
    K("conv_activation", "relu", "Activation of the CNN layers."),
    K("post_fcnet_hiddens", [], "Extra dense layers after the conv/LSTM stack.", _int_list),
    K("post_fcnet_activation", "relu", "Activation of the post_fcnet layers."),
    K("free_log_std", False, "Learn Gaussian log-std as free parameters, not as network outputs."),
    K("no_final_linear", False, "Let the last hidden layer emit the action outputs directly."),
    K("vf_share_layers", True, "Value head shares the policy's hidden layers."),
    K("use_lstm", False, "Wrap the model with an LSTM."),
    K("max_seq_len", 20, "Longest sequence an RNN is trained on.", _int(1)),
    K("lstm_cell_size", 256, "LSTM state size.", _int(1)),
    K("lstm_use_prev_action", False, "Feed the previous action into the LSTM."),
    K("lstm_use_prev_reward", False, "Feed the previous reward into the LSTM."),
    K("_time_major", False, "RNN tensors are [time, batch, ...] instead of [batch, time, ...]."),
    K("use_attention", False, "Wrap the model with a GTrXL attention net."),
    K("attention_num_transformer_units", 1, "Number of transformer blocks."),
    K("attention_dim", 64, "Input/output size of each transformer block."),
    K("attention_num_heads", 1, "Attention heads per block."),
    K("attention_head_dim", 32, "Size of each attention head."),
    K("attention_memory_inference", 50, "Past timesteps attended to when acting."),
    K("attention_memory_training", 50, "Past timesteps attended to when learning."),
    K("attention_position_wise_mlp_dim", 32, "Hidden size of the position-wise MLP."),
    K("attention_init_gru_gate_bias", 2.0, "Initial bias of the GRU gates."),
    K("attention_use_n_prev_actions", 0, "Previous actions fed to the attention net."),
    K("attention_use_n_prev_rewards", 0, "Previous rewards fed to the attention net."),
    K("framestack", True, "Stack the last 4 frames in the deepmind Atari preprocessing."),
    K("dim", 84, "Side length images are resized to.", _int(1)),
    K("grayscale", False, "Convert images to grayscale (deepmind preprocessing)."),
    K("zero_mean", True, "Scale image pixels to [-1, 1] instead of [0, 1]."),
    K("custom_model", None, "Registered name or class of a user model."),
    K("custom_model_config", {}, "Keyword arguments passed to the custom model."),
    K("custom_action_dist", None, "Registered name or class of a user action distribution."),
    K("custom_preprocessor", None, "Registered name of a user preprocessor."),
]


def _build(keys: List[ConfigKey]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key in keys:
        *parents, leaf = key.name.split(".")
        node = out
        for p in parents:  # a parent is declared (as {}) before its children
            node = node[p]
        node[leaf] = copy.deepcopy(key.default)
    return out


MODEL_DEFAULTS: Dict[str, Any] = _build(MODEL_KEYS)

_TF_SESSION_ARGS = {
    "intra_op_parallelism_threads": 2,
    "inter_op_parallelism_threads": 2,
    "gpu_options": {"allow_growth": True},
    "log_device_placement": False,
    "device_count": {"CPU": 1},
    "allow_soft_placement": True,
}
_LOCAL_TF_SESSION_ARGS = {"intra_op_parallelism_threads": 8, "inter_op_parallelism_threads": 8}

COMMON_KEYS: Dict[str, List[ConfigKey]] = {
    "Rollout workers": [
        K("num_workers", 0, "Remote sampling workers; 0 samples in the trainer's own process.", _int(0)),
        K("num_envs_per_worker", 1, "Envs each worker steps together as one batched vector.", _int(1)),
        K("create_env_on_driver", False, "Give the local worker an env even when remote workers sample."),
        K("rollout_fragment_length", 200, "Steps per sampled fragment, per env of a worker.", _int(1)),
        K("batch_mode", "truncate_episodes", "truncate_episodes: fixed-size fragments; "
          "complete_episodes: fragments end only at episode ends.",
          _one_of("truncate_episodes", "complete_episodes")),
    ],
    "Learning": [
        K("gamma", 0.99, "Discount factor.", _num(0, 1)),
        K("lr", 0.0001, "Learning rate.", _num(0)),
        K("train_batch_size", 200, "Steps per learning batch (fragments are concatenated up to it).", _int(1)),
        K("model", MODEL_DEFAULTS, "Model options; see the model.* keys.", _dict(none_as_empty=True)),
        K("optimizer", {}, "Optimizer options; algorithm-specific.", _dict()),
    ],
    "Environment": [
        K("horizon", None, "Force an episode end after this many steps; None uses the env's time limit.",
          _optional(_int(1), "the env's own limit")),
        K("soft_horizon", False, "At the horizon, end the episode for learning but do not reset the env."),
        K("no_done_at_end", False, "Never mark the last step of an episode as done."),
        K("env", None, "Env name (registered or Gymnasium id), class, or 'module.Class' path."),
        K("observation_space", None, "Policies' observation space; None infers it from the env."),
        K("action_space", None, "Policies' action space; None infers it from the env."),
        K("env_config", {}, "Dict given to the env creator (as an EnvContext).", _dict(none_as_empty=True)),
        K("env_task_fn", None, "fn(train_result, env, env_context) -> new task, for TaskSettableEnv."),
        K("render_env", False, "Render the env of the local worker (or of worker 1)."),
        K("record_env", False, "Record videos: True for the results folder, or a folder path.", _record_env),
        K("clip_rewards", None, "None: sign-clip on Atari only; True: sign; False: never; "
          "x: clip to [-x, x]; (lo, hi): clip to [lo, hi].", _clip_rewards),
        K("normalize_actions", True, "Learn in a normalized action space; unsquash to the env's bounds."),
        K("clip_actions", False, "Clip actions to the env's bounds before stepping."),
        K("preprocessor_pref", "deepmind", "Default observation preprocessors: 'deepmind' or 'rllib'.",
          _one_of("deepmind", "rllib", None)),
    ],
    "Debugging and fault tolerance": [
        K("log_level", "WARN", "Log level of rlfleet's loggers.",
          _one_of("DEBUG", "INFO", "WARN", "WARNING", "ERROR")),
        K("callbacks", DefaultCallbacks, "DefaultCallbacks subclass whose hooks run during training.",
          _callbacks),
        K("ignore_worker_failures", False, "Keep training when a remote worker dies."),
        K("recreate_failed_workers", False, "Restart a dead remote worker and give it the current weights."),
        K("log_sys_usage", True, "Add CPU/memory (and GPU) usage to the results."),
        K("fake_sampler", False, "Replay one sampled batch forever (throughput testing only)."),
    ],
    "Framework": [
        K("framework", "torch", "Deep-learning framework; only 'torch'.", _framework),
        K("eager_tracing", False, "TensorFlow only; accepted and ignored."),
    ],
    "Exploration": [
        K("explore", True, "Explore when computing actions, unless a call says otherwise."),
        K("exploration_config", {}, "Exploration object config: 'type' plus its constructor arguments.",
          _dict()),
        K("exploration_config.type", "StochasticSampling", "Exploration class or its name "
          "(StochasticSampling, EpsilonGreedy, GaussianNoise, OrnsteinUhlenbeckNoise) or a "
          "'package.module.Class' path.", _exploration_type),
    ],
    "Evaluation": [
        K("evaluation_interval", None, "Evaluate every this many train() calls; None never.",
          _optional(_int(1), "no evaluation")),
        K("evaluation_num_episodes", 10, "Episodes per evaluation (at least).", _int(1)),
        K("evaluation_parallel_to_training", False, "Evaluate in a thread while train() runs."),
        K("in_evaluation", False, "Set internally on evaluation workers."),
        K("evaluation_config", {}, "Overrides of this config for evaluation (e.g. explore False).",
          _dict(none_as_empty=True)),
        K("evaluation_num_workers", 0, "Remote evaluation workers; 0 evaluates in the trainer.", _int(0)),
        K("custom_eval_function", None, "fn(trainer, eval_workers) -> metrics dict, replacing evaluate()."),
    ],
    "Advanced rollout settings": [
        K("sample_async", False, "Sample in a background thread (slightly off-policy)."),
        K("sample_collector", None, "Sample collector class; None is the built-in one."),
        K("observation_filter", "NoFilter", "Per-element observation filter: 'NoFilter' or 'MeanStdFilter'.",
          _one_of("NoFilter", "MeanStdFilter", or_callable=True)),
        K("synchronize_filters", True, "Sync filter statistics across workers each iteration."),
        K("tf_session_args", _TF_SESSION_ARGS, "TensorFlow only; accepted and ignored."),
        K("local_tf_session_args", _LOCAL_TF_SESSION_ARGS, "TensorFlow only; accepted and ignored."),
        K("compress_observations", False, "LZ4-compress each observation in sample batches."),
        K("collect_metrics_timeout", 180, "Seconds to wait for workers' metrics; late ones count next time.",
          _num(0)),
        K("metrics_smoothing_episodes", 100, "Episodes that reported metrics are averaged over.", _int(1)),
        K("remote_worker_envs", False, "Run each of a worker's vector envs in its own process."),
        K("remote_env_batch_wait_ms", 0, "Milliseconds to wait for remote envs when polling.", _num(0)),
        K("min_iter_time_s", 0, "Least seconds one train() call takes.", _num(0)),
        K("timesteps_per_iteration", 0, "Least env steps one train() call samples.", _int(0)),
        K("seed", None, "Seed for envs, workers and policies; None is nondeterministic.",
          _optional(_int(0), "unseeded")),
        K("extra_python_environs_for_driver", {}, "Env variables set in the trainer process.", _dict()),
        K("extra_python_environs_for_worker", {}, "Env variables set in worker processes.", _dict()),
    ],
    "Resources": [
        K("num_gpus", 0, "GPUs for the trainer process (may be fractional).", _num(0)),
        K("_fake_gpus", False, "Simulate num_gpus GPUs on the CPU (debugging)."),
        K("num_cpus_per_worker", 1, "CPUs per remote worker.", _num(0)),
        K("num_gpus_per_worker", 0, "GPUs per remote worker (may be fractional).", _num(0)),
        K("custom_resources_per_worker", {}, "Custom Ray resources per remote worker.", _dict()),
        K("num_cpus_for_driver", 1, "CPUs for the trainer process: reserved under Tune, and the cap on torch's threads (unless OMP_NUM_THREADS is set).", _num(0)),
        K("placement_strategy", "PACK", "Ray placement-group strategy for trainer and workers.",
          _one_of("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")),
    ],
    "Offline data": [
        K("input", "sampler", "Where experience comes from: 'sampler' (the env), files, or a mix."),
        K("input_config", {}, "Options for a custom input reader.", _dict()),
        K("actions_in_input_normalized", False, "Offline actions are already normalized to [-1, 1]."),
        K("input_evaluation", ["is", "wis"], "Off-policy estimators run on offline input.", _input_evaluation),
        K("postprocess_inputs", False, "Run postprocess_trajectory on offline batches."),
        K("shuffle_buffer_size", 0, "Shuffle offline batches through a buffer of this many.", _int(0)),
        K("output", None, "Where to write sampled experience: None, 'logdir', or a folder path."),
        K("output_compress_columns", ["obs", "new_obs"], "Sample batch columns LZ4-compressed in output."),
        K("output_max_file_size", 64 * 1024 * 1024, "Bytes per output file before a new one starts.", _int(1)),
    ],
    "Multi-agent": [
        K("multiagent", {}, "Multi-agent settings; see the multiagent.* keys.", _dict()),
        K("multiagent.policies", {}, "{policy_id: PolicySpec} or a set of ids; empty: one default policy.",
          _policies),
        K("multiagent.policy_map_capacity", 100, "Policies kept in memory before spilling the LRU ones.",
          _int(1)),
        K("multiagent.policy_map_cache", None, "Folder for spilled policies; None is the results folder."),
        K("multiagent.policy_mapping_fn", None, "fn(agent_id, episode, worker, **kwargs) -> policy_id; "
          "None maps every agent to 'default_policy' (or to the only policy).",
          _callable_or_none("(agent_id, episode, worker, **kwargs) -> policy_id")),
        K("multiagent.policies_to_train", None, "Ids of the policies to train; None trains all.", _policy_ids),
        K("multiagent.observation_fn", None, "fn(agent_obs, worker, base_env, policies, episode) -> new "
          "{agent_id: obs}, applied before the policies see the observations.",
          _callable_or_none("(agent_obs, worker, base_env, policies, episode) -> {agent_id: obs}")),
        K("multiagent.replay_mode", "independent", "Replay transitions per policy ('independent') or "
          "all agents of a timestep together ('lockstep').", _one_of("independent", "lockstep")),
        K("multiagent.count_steps_by", "env_steps", "Batch size counts env steps or agent steps.",
          _one_of("env_steps", "agent_steps")),
    ],
    "Logging": [
        K("logger_config", None, "Options for the result loggers (e.g. 'type')."),
    ],
}

COMMON_CONFIG: Dict[str, Any] = _build([k for keys in COMMON_KEYS.values() for k in keys])

# Every declared key by dotted path, the model's under "model.".
KEY_INDEX: Dict[str, ConfigKey] = {
    **{k.name: k for keys in COMMON_KEYS.values() for k in keys},
    **{f"model.{k.name}": k._replace(name=f"model.{k.name}") for k in MODEL_KEYS},
}

# Top-level keys whose dict values may take sub-keys that are not declared.
ALLOW_UNKNOWN_SUBKEYS: List[str] = [
    "tf_session_args", "local_tf_session_args", "env_config", "model", "optimizer",
    "multiagent", "custom_resources_per_worker", "evaluation_config", "exploration_config",
    "extra_python_environs_for_driver", "extra_python_environs_for_worker", "input_config",
]

# Top-level keys whose dict value is replaced whole when its "type" changes.
OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES: List[str] = ["exploration_config"]

# Keys kept only so TensorFlow-era configs still load.
IGNORED_KEYS: Tuple[str, ...] = ("tf_session_args", "local_tf_session_args", "eager_tracing")


# ---------------------------------------------------------------------------------------
# Deprecated keys: accepted by merging, translated (and removed) by validation.
# ---------------------------------------------------------------------------------------
class DeprecatedKey(NamedTuple):
    """A key the reference deprecated: what replaces it, and how its value carries over."""

    replacement: Optional[str]
    translate: Callable[[dict, Any], None]


def _to_record_env(config: dict, value: Any) -> None:
    config["record_env"] = value


def _to_lstm_prev(config: dict, value: Any) -> None:
    config["model"]["lstm_use_prev_action"] = value
    config["model"]["lstm_use_prev_reward"] = value


DEPRECATED_KEYS: Dict[str, DeprecatedKey] = {
    # rlfleet picks the learning path itself, so the value has nothing to set.
    "simple_optimizer": DeprecatedKey(None, lambda config, value: None),
    "monitor": DeprecatedKey("record_env", _to_record_env),
    "model.lstm_use_prev_action_reward": DeprecatedKey(
        "model.lstm_use_prev_action and model.lstm_use_prev_reward", _to_lstm_prev),
}


# ---------------------------------------------------------------------------------------
# Features not in this version yet: a non-default value is an error. To enable a feature,
# delete its row.
# ---------------------------------------------------------------------------------------
NOT_YET_AVAILABLE: Dict[str, str] = {
    "num_gpus": "needs GPU learning",
    "_fake_gpus": "needs multi-GPU learning",
    "input": "needs offline input readers",
    "output": "needs offline output writers",
    "model.use_attention": "needs attention models",
    "record_env": "needs video recording",
    "render_env": "needs env rendering",
    "env_task_fn": "needs TaskSettableEnv curricula",
    "fake_sampler": "needs the fake sampler",
    "sample_collector": "needs pluggable sample collectors",
    "logger_config": "needs configurable loggers",
}
# The offline sub-keys (input_config, input_evaluation, shuffle_buffer_size,
# output_compress_columns, ...) are not listed: they do nothing unless `input` or `output`
# is set, and those two are listed.

# Where "non-default" is not plain inequality with the declared default.
_IN_USE: Dict[str, Callable[[Any], bool]] = {}

_MISSING = object()


def _lookup(config: dict, path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def check_available(config: dict) -> None:
    """Raises if the config asks for a feature this version of rlfleet does not have yet.

    Args:
        config: a merged config.

    Raises:
        ValueError: naming each such key, its value, what it needs, and the default to use.
    """
    problems = []
    for path, needs in NOT_YET_AVAILABLE.items():
        value = _lookup(config, path)
        if value is _MISSING:
            continue
        default = KEY_INDEX[path].default
        in_use = _IN_USE[path](value) if path in _IN_USE else value != default
        if in_use:
            problems.append(f"'{path}': {value!r} is not available yet in this version of rlfleet "
                            f"({needs}); use the default {default!r}")
    if problems:
        raise ValueError("\n".join(problems))


# ---------------------------------------------------------------------------------------
# Merging.
# ---------------------------------------------------------------------------------------
def _split_deprecated(config: dict) -> Tuple[dict, Dict[str, Any]]:
    # Take deprecated keys out of a (copied) config so the unknown-key check never sees
    # them; parents on their path are shallow-copied so the caller's dicts stay intact.
    rest = dict(config)
    found: Dict[str, Any] = {}
    for path in DEPRECATED_KEYS:
        *parents, leaf = path.split(".")
        node = rest
        for p in parents:
            if not isinstance(node.get(p), dict):
                break
            node[p] = dict(node[p])
            node = node[p]
        else:
            if leaf in node:
                found[path] = node.pop(leaf)
    return rest, found


def merge_configs(
    config1: dict,
    config2: Optional[dict],
    allow_unknown_configs: bool = False,
    allow_unknown_subkeys: List[str] = ALLOW_UNKNOWN_SUBKEYS,
    override_all_subkeys_if_type_changes: List[str] = OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
) -> dict:
    """Returns a deep copy of `config1` updated with `config2` (neither is mutated).

    A dict given as ``callbacks`` becomes a factory of ``DefaultCallbacks`` running those
    legacy functions. Deprecated keys pass through untouched (``validate_config``
    translates them).

    Args:
        config1: the defaults, e.g. an algorithm's ``DEFAULT_CONFIG``.
        config2: the overrides, e.g. the user's partial config (None means none).
        allow_unknown_configs: whether top-level keys unknown to `config1` may be added.
        allow_unknown_subkeys: top-level keys whose dicts accept unknown sub-keys.
        override_all_subkeys_if_type_changes: top-level keys whose dict is replaced whole
            when its ``"type"`` changes.

    Returns:
        The merged config.

    Raises:
        ValueError: for an unknown key, naming it and the closest valid one.
    """
    merged = copy.deepcopy(config1)
    rest, deprecated = _split_deprecated(config2 or {})
    if isinstance(rest.get("callbacks"), dict):
        rest["callbacks"] = legacy_callbacks_factory(rest["callbacks"])
    deep_update(merged, rest, allow_unknown_configs, allow_unknown_subkeys,
                override_all_subkeys_if_type_changes)
    for path, value in deprecated.items():
        *parents, leaf = path.split(".")
        node = merged
        for p in parents:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[leaf] = value
    return merged


def with_common_config(extra_config: dict) -> dict:
    """Returns ``COMMON_CONFIG`` updated with an algorithm's own keys (new keys allowed).

    Args:
        extra_config: the algorithm's keys and overridden defaults.

    Returns:
        The algorithm's full default config.
    """
    return merge_configs(COMMON_CONFIG, extra_config, allow_unknown_configs=True)


# ---------------------------------------------------------------------------------------
# Validation.
# ---------------------------------------------------------------------------------------
_NOTICES_GIVEN: Set[str] = set()  # keys already noticed, once per process


def _notice_once(key: str, message: str) -> None:
    if key not in _NOTICES_GIVEN:
        _NOTICES_GIVEN.add(key)
        logger.warning(message)


def _translate_deprecated(config: dict) -> None:
    for path, dep in DEPRECATED_KEYS.items():
        *parents, leaf = path.split(".")
        parent = _lookup(config, ".".join(parents)) if parents else config
        if not isinstance(parent, dict) or leaf not in parent:
            continue
        value = parent.pop(leaf)
        if dep.replacement is None:
            logger.warning("Config key '%s' is deprecated and ignored; remove it.", path)
        else:
            logger.warning("Config key '%s' is deprecated; use '%s' instead (its value %r was "
                           "carried over).", path, dep.replacement, value)
            dep.translate(config, value)


def _iter_checks() -> Iterator[Tuple[str, Check]]:
    for path, key in KEY_INDEX.items():  # parents come before their children
        if key.check is not None:
            yield path, key.check


def validate_config(config: dict) -> None:
    """Checks a merged config and normalizes it in place.

    Translates deprecated keys (logging a warning), fills in defaults for None where the
    reference does (``model``, ``callbacks``, ``multiagent.policies``), converts policy
    tuples to ``PolicySpec``, checks each value, then calls ``check_available``.

    Args:
        config: a merged config (the output of ``merge_configs``); mutated.

    Raises:
        ValueError: naming the key, the value given and what is allowed.
    """
    if config.get("model", {}) is None:  # before translating model.* deprecations
        config["model"] = {}
    _translate_deprecated(config)

    for key in IGNORED_KEYS:
        if key in config and config[key] != KEY_INDEX[key].default:
            _notice_once(key, f"Config key '{key}' only applies to TensorFlow; rlfleet ignores it.")

    # Cross-key fixes of the reference, done before the value checks so that e.g. an
    # evaluation_interval of 0 with evaluation workers becomes 1 rather than an error.
    n_eval = config.get("evaluation_num_workers", 0)
    if _is_int(n_eval) and n_eval > 0 and not config.get("evaluation_interval"):
        logger.warning("%d evaluation workers but no evaluation_interval: evaluating after every "
                       "train() call (set evaluation_interval to evaluate less often).", n_eval)
        config["evaluation_interval"] = 1
    elif n_eval == 0 and config.get("evaluation_parallel_to_training"):
        logger.warning("evaluation_parallel_to_training needs evaluation_num_workers > 0; "
                       "setting it to False.")
        config["evaluation_parallel_to_training"] = False

    for path, check in _iter_checks():
        *parents, leaf = path.split(".")
        parent = _lookup(config, ".".join(parents)) if parents else config
        if not isinstance(parent, dict) or leaf not in parent:
            continue
        value = parent[leaf]
        try:
            parent[leaf] = check(value)
        except _Invalid as e:
            raise ValueError(f"'{path}': {value!r} is invalid; expected {e}") from None

    check_available(config)


# ---------------------------------------------------------------------------------------
# Docs.
# ---------------------------------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default_text(path: str, default: Any) -> str:
    if isinstance(default, dict) and any(p.startswith(path + ".") for p in KEY_INDEX):
        return f"see `{path}.*`"
    if isinstance(default, type):
        return f"`{default.__module__}.{default.__qualname__}`"
    return f"`{default!r}`"


def describe_keys() -> str:
    """Returns Markdown tables of every config key (name, default, meaning), by section.

    Returns:
        The Markdown text, generated from the declarations.
    """
    sections = list(COMMON_KEYS.items()) + [
        ("Model (model.*)", [KEY_INDEX[f"model.{k.name}"] for k in MODEL_KEYS])]
    lines: List[str] = []
    for title, keys in sections:
        lines += [f"### {title}", "", "| key | default | meaning |", "| --- | --- | --- |"]
        for k in keys:
            lines.append(f"| `{k.name}` | {_cell(_default_text(k.name, k.default))} | {_cell(k.doc)} |")
        lines.append("")
    lines += ["### Deprecated keys", "", "| key | replaced by |", "| --- | --- |"]
    for path, dep in DEPRECATED_KEYS.items():
        lines.append(f"| `{path}` | {_cell(dep.replacement or '(ignored)')} |")
    return "\n".join(lines) + "\n"
