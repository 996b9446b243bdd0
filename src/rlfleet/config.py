"""Trainer configuration: every key declared once, merging, validation, deprecations.

Each key is declared exactly once below as ``ConfigKey(name, default, doc, check)``;
``COMMON_CONFIG``, ``MODEL_DEFAULTS``, the validation messages and the docs page
(``describe_keys()``) are all derived from those declarations. Each algorithm declares its
own keys the same way (its ``ALGO_KEYS``, with ``override`` for the common keys it gives
another default); its ``DEFAULT_CONFIG`` is ``algorithm_config(ALGO_KEYS)`` and
``describe_keys("PPO")`` documents every key it takes.

How a trainer builds its config::

    config = merge_configs(AlgoTrainer.DEFAULT_CONFIG, user_config)   # unknown key -> error
    validate_config(config, ALGO_KEYS)                                # normalizes in place

Deviations from the reference (RLlib 1.x) defaults:

- ``num_workers`` defaults to 0: rlfleet's default is one process with no cluster, which
  starts instantly; ask for remote workers explicitly.
- ``framework`` defaults to ``"torch"`` and accepts nothing else.
- ``sample_collector`` defaults to None, meaning rlfleet's built-in collector.
- ``tf_session_args``, ``local_tf_session_args`` and ``eager_tracing`` are accepted so old
  configs load, and ignored (a one-time log notice when set to a non-default value).
- ``recreate_failed_workers`` (default False) is new.
- ``disable_env_checking`` (default False; later RLlib versions have it) and
  ``max_nonfinite_updates`` (default 5) are new: see ``rlfleet.env.checks`` and
  ``TorchPolicy._step``.
- Deprecated keys live in ``DEPRECATED_KEYS``, not as sentinel values in ``COMMON_CONFIG``.
- Features that later versions enable are listed in ``NOT_YET_AVAILABLE``; setting one of
  them to a non-default value is a clear error (see ``check_available``).
"""
from __future__ import annotations

import copy
import logging
import math
import numbers
import os
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.utils.deep_update import deep_update

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------
# Value checks. A check takes the value and returns it (possibly normalized, e.g. a tuple
# made a list) or raises InvalidValue("what is allowed"); validate_config turns that into a
# message naming the key and the value given. The public ones are for algorithms' keys too.
# ---------------------------------------------------------------------------------------
class InvalidValue(Exception):
    """Raised by a check with what is allowed, e.g. ``InvalidValue("an int >= 1")``."""

    def message(self, path: str, value: Any) -> str:
        return f"'{path}': {value!r} is invalid; expected {self}"


class _NotAvailableYet(InvalidValue):
    def __init__(self, needs: str, default: Any):
        super().__init__(needs)
        self.needs, self.default = needs, default

    def message(self, path: str, value: Any) -> str:
        return (f"'{path}': {value!r} is not available yet in this version of rlfleet ({self.needs}); "
                f"use the default {self.default!r}")


Check = Callable[[Any], Any]


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def int_at_least(lo: int) -> Check:
    def check(v: Any) -> Any:
        # YAML/JSON tools often write whole numbers as floats (4000.0); accept those.
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not _is_int(v) or v < lo:
            raise InvalidValue(f"an int >= {lo}")
        return v

    return check


def number_in(lo: float, hi: Optional[float] = None) -> Check:
    def check(v: Any) -> Any:
        # Written as "not in range" so that NaN is rejected too.
        if not _is_num(v) or not (lo <= v and (hi is None or v <= hi)):
            raise InvalidValue(f"a number in [{lo}, {hi}]" if hi is not None else f"a number >= {lo}")
        return v

    return check


def number_above(lo: float, hi: Optional[float] = None) -> Check:
    """A number > `lo` (and <= `hi` when given): for sizes that must not be zero."""
    def check(v: Any) -> Any:
        if not _is_num(v) or not (lo < v and (hi is None or v <= hi)):
            raise InvalidValue(f"a number in ({lo}, {hi}]" if hi is not None else f"a number > {lo}")
        return v

    return check


def finite_number(v: Any) -> Any:
    if not _is_num(v) or not math.isfinite(v):
        raise InvalidValue("a finite number")
    return v


def optional(inner: Check, none_means: str) -> Check:
    def check(v: Any) -> Any:
        if v is None:
            return v
        try:
            return inner(v)
        except InvalidValue as e:
            raise InvalidValue(f"None ({none_means}) or {e}") from None

    return check


def one_of(*choices: Any, or_callable: bool = False) -> Check:
    def check(v: Any) -> Any:
        if v in choices or (or_callable and callable(v)):
            return v
        raise InvalidValue(f"one of {list(choices)}" + (" or a callable" if or_callable else ""))

    return check


def dict_value(none_as_empty: bool = False) -> Check:
    def check(v: Any) -> Any:
        if v is None and none_as_empty:
            return {}
        if not isinstance(v, dict):
            raise InvalidValue("a dict" + (" (or None)" if none_as_empty else ""))
        return v

    return check


def positive_int_list(v: Any) -> Any:
    if not isinstance(v, (list, tuple)) or not all(_is_int(x) and x > 0 for x in v):
        raise InvalidValue("a list of ints > 0")
    return list(v)


def boolean(v: Any) -> Any:
    """True or False (NumPy bools and the ints 0 / 1 that YAML tools write are taken as such)."""
    if isinstance(v, bool):
        return v
    if type(v).__name__ == "bool_" or (_is_int(v) and v in (0, 1)):
        return bool(v)
    raise InvalidValue("True or False")


def activation(v: Any) -> Any:
    """An activation name the built-in networks know."""
    # Imported here: the models package sits above config in the layers.
    from rlfleet.models.fcnet import activation_class

    if v is not None and not isinstance(v, str):
        raise InvalidValue("an activation name (a str) or None")
    try:
        activation_class(v)
    except ValueError as e:
        raise InvalidValue(str(e).split("; use ", 1)[-1]) from None
    return v


def schedule(key: str) -> Check:
    """None (a constant value), `[[timestep, value], ...]`, or a schedule spec dict."""
    def check(v: Any) -> Any:
        if v is None:
            return v
        from rlfleet.utils.schedules import make_schedule

        try:
            make_schedule(0.0, v, key)
        except (ValueError, TypeError, KeyError, AttributeError):
            raise InvalidValue("None, a list of [timestep, value] pairs with increasing timesteps, or a "
                               "dict {'type': 'PolynomialSchedule' | 'ExponentialSchedule' | ..., ...}") from None
        return v

    return check


def _conv_filters(v: Any) -> Any:
    if v is None:
        return v

    def size(x: Any) -> bool:
        if isinstance(x, (list, tuple)):
            return len(x) == 2 and all(_is_int(i) and i > 0 for i in x)
        return _is_int(x) and x > 0

    if (isinstance(v, (list, tuple)) and v and all(
            isinstance(f, (list, tuple)) and len(f) == 3 and _is_int(f[0]) and f[0] > 0 and size(f[1]) and size(f[2])
            for f in v)):
        return [list(f) for f in v]
    raise InvalidValue("None (picked by image size) or a non-empty list of [out_channels, kernel, stride] "
                       "(kernel and stride an int > 0 or a pair [h, w]), e.g. [[16, 8, 4], [32, 4, 2]]")


def _name_or_class(what: str) -> Check:
    def check(v: Any) -> Any:
        if v is None or isinstance(v, (str, type)):
            return v
        raise InvalidValue(f"None, the registered name (a str) or the class of a {what}")

    return check


def _space_or_none(v: Any) -> Any:
    import gymnasium as gym

    if v is None or isinstance(v, gym.spaces.Space):
        return v
    raise InvalidValue("None (inferred from the env) or a gymnasium.spaces.Space")


def _path_or_none(v: Any) -> Any:
    if v is None or isinstance(v, (str, os.PathLike)):
        return v
    raise InvalidValue("None or a folder path (a str)")


def _key_name(v: Any) -> Any:
    if isinstance(v, str) and v:
        return v
    raise InvalidValue("a non-empty str (a key of the Dict observation)")


def _str_list(v: Any) -> Any:
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return list(v)
    raise InvalidValue("a list of column names (str)")


def _environ(v: Any) -> Any:
    if not isinstance(v, dict):
        raise InvalidValue("a dict {VARIABLE_NAME: value}")
    for name, value in v.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise InvalidValue(f"a dict {{VARIABLE_NAME: value}}; {name!r} is not an environment variable name")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or "\0" in str(value):
            raise InvalidValue(f"a dict {{VARIABLE_NAME: str or number}}; the value of {name!r} is {value!r}")
        if name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") and not (str(value).strip().isdigit() and int(value) >= 1):
            raise InvalidValue(f"a dict {{VARIABLE_NAME: value}} with {name} an int >= 1, not {value!r}")
    return v


# `betas` is checked here (torch would index a short list: IndexError); the other entries
# are checked by torch.optim.Adam when the policy builds it (`build_adam`, naming the key).
def _optimizer(v: Any) -> Any:
    if not isinstance(v, dict):
        raise InvalidValue("a dict of torch.optim.Adam arguments, e.g. {'eps': 1e-5, 'betas': [0.9, 0.99]}")
    if "betas" in v:
        betas = v["betas"]
        if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(_is_num(b) and 0 <= b < 1 for b in betas)):
            raise InvalidValue(f"'betas' to be a pair of numbers in [0, 1), e.g. [0.9, 0.999], not {betas!r}")
    if "amsgrad" in v and not isinstance(v["amsgrad"], bool):
        raise InvalidValue(f"'amsgrad' to be True or False, not {v['amsgrad']!r}")
    return v


def not_available(needs: str, default: Any) -> Check:
    """For a key whose feature this version lacks (`needs` says what is missing): any value
    but `default` is an error."""
    def check(v: Any) -> Any:
        if v != default:
            raise _NotAvailableYet(needs, default)
        return v

    return check


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
    raise InvalidValue("None (clip for Atari only), True (sign), False (never), a number > 0, "
                       "or a (low, high) pair with low < high")


def _batch_wait_ms(v: Any) -> Any:
    # The sampler steps its sub-envs in lockstep (see env/remote_vector_env.py), so a wait
    # that lets a step go on with only the sub-envs that answered cannot be honoured.
    if not _is_num(v) or v != 0:
        raise InvalidValue("0: remote sub-envs step in lockstep (every step waits for all of them, which "
                           "run in parallel), so a partial wait cannot be honoured; remove the key")
    return v


def _record_env(v: Any) -> Any:
    if v == "":  # an empty folder name means "the default folder"
        return True
    if not isinstance(v, (bool, str)):
        raise InvalidValue("False, True (default video folder) or a folder path")
    return v


def _logger_config(v: Any) -> Any:
    if v is None:
        return v
    if not isinstance(v, dict):
        raise InvalidValue("None or a dict {'type': a logger class, its 'package.module.Class' path or a list of "
                           "them, **options}")
    kind = v.get("type")
    kinds = kind if isinstance(kind, (list, tuple)) else [kind]
    if "type" in v and (not kinds or not all(isinstance(k, (type, str)) for k in kinds)):
        raise InvalidValue("a dict whose 'type' is a logger class (with on_result(result) and close()), its "
                           "'package.module.Class' path, or a non-empty list of them")
    return v


def _exploration_type(v: Any) -> Any:
    # Imported here: the exploration package sits above config in the layers.
    from rlfleet.exploration.stochastic_sampling import resolve_exploration_class

    try:
        resolve_exploration_class(v)
    except ValueError as e:
        raise InvalidValue(str(e).split("; ", 1)[-1].replace("use ", "", 1)) from None
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
        raise InvalidValue("a DefaultCallbacks subclass (or any callable returning an instance), "
                           "a dict of legacy callback functions, or None")
    return v


def _input_evaluation(v: Any) -> Any:
    if isinstance(v, tuple):
        v = list(v)
    if not isinstance(v, list) or not all(x in ("is", "wis", "simulation") for x in v):
        raise InvalidValue("a list of estimator names ('is', 'wis', 'simulation'), e.g. ['is', 'wis'], or []")
    return v


def _input(v: Any) -> Any:
    # Imported here: the offline package's readers say what an input may be.
    from rlfleet.offline.readers import check_input_spec

    return check_input_spec(v)


def _output(v: Any) -> Any:
    if v is None or callable(v) or (isinstance(v, str) and v):
        return v
    raise InvalidValue("None (no output), 'logdir' (the results folder), a folder path, or a callable "
                       "IOContext -> writer")


def _policies(v: Any) -> Dict[str, Any]:
    if not v:
        v = {DEFAULT_POLICY_ID}
    if isinstance(v, (set, frozenset, list, tuple)):
        v = {pid: PolicySpec() for pid in v}
    if not isinstance(v, dict):
        raise InvalidValue("a dict {policy_id: PolicySpec or (cls, obs_space, act_space, config)} "
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


def _sampler_class_or_none(v: Any) -> Any:
    if v is None or isinstance(v, type) or (isinstance(v, str) and ":" in v):
        return v
    raise InvalidValue("None (the built-in samplers), a class implementing rlfleet.rollout.sampler_api.Sampler, "
                       "or its 'module:Class' path")


def _callable_or_none(signature: str) -> Check:
    def check(v: Any) -> Any:
        if v is None or callable(v):
            return v
        raise InvalidValue(f"None or a function {signature}")

    return check


def _policy_ids(v: Any) -> Any:
    if v is None:
        return v
    if isinstance(v, (list, tuple, set, frozenset)) and all(isinstance(p, str) for p in v):
        return list(v)
    raise InvalidValue("None (train all policies) or a list of policy ids (str)")


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
    K("fcnet_hiddens", [256, 256], "Hidden layer sizes of the fully connected network.", positive_int_list),
    K("fcnet_activation", "tanh", "Activation of the fully connected layers.", activation),
    K("conv_filters", None, "CNN layers as [out_channels, kernel, stride] triples; None picks by image size.",
      _conv_filters),
    K("conv_activation", "relu", "Activation of the CNN layers.", activation),
    K("post_fcnet_hiddens", [], "Extra dense layers after the conv/LSTM stack.", positive_int_list),
    K("post_fcnet_activation", "relu", "Activation of the post_fcnet layers.", activation),
    K("free_log_std", False, "Learn Gaussian log-std as free parameters, not as network outputs.", boolean),
    K("no_final_linear", False, "Let the last hidden layer emit the action outputs directly.", boolean),
    K("vf_share_layers", True, "Value head shares the policy's hidden layers.", boolean),
    K("use_lstm", False, "Wrap the model with an LSTM.", boolean),
    K("max_seq_len", 20, "Longest sequence an RNN is trained on.", int_at_least(1)),
    K("lstm_cell_size", 256, "LSTM state size.", int_at_least(1)),
    K("lstm_use_prev_action", False, "Feed the previous action into the LSTM.", boolean),
    K("lstm_use_prev_reward", False, "Feed the previous reward into the LSTM.", boolean),
    K("_time_major", False, "RNN tensors are [time, batch, ...] instead of [batch, time, ...].", boolean),
    K("use_attention", False, "Wrap the model with a GTrXL attention net."),
    K("attention_num_transformer_units", 1, "Number of transformer blocks.", int_at_least(1)),
    K("attention_dim", 64, "Input/output size of each transformer block.", int_at_least(1)),
    K("attention_num_heads", 1, "Attention heads per block.", int_at_least(1)),
    K("attention_head_dim", 32, "Size of each attention head.", int_at_least(1)),
    K("attention_memory_inference", 50, "Past timesteps attended to when acting.", int_at_least(1)),
    K("attention_memory_training", 50, "Past timesteps attended to when learning.", int_at_least(1)),
    K("attention_position_wise_mlp_dim", 32, "Hidden size of the position-wise MLP.", int_at_least(1)),
    K("attention_init_gru_gate_bias", 2.0, "Initial bias of the GRU gates."),
    K("attention_use_n_prev_actions", 0, "Previous actions fed to the attention net.", int_at_least(0)),
    K("attention_use_n_prev_rewards", 0, "Previous rewards fed to the attention net.", int_at_least(0)),
    K("framestack", True, "Stack the last 4 frames in the deepmind Atari preprocessing.", boolean),
    K("dim", 84, "Side length images are resized to.", int_at_least(1)),
    K("grayscale", False, "Convert images to grayscale (deepmind preprocessing).", boolean),
    K("zero_mean", True, "Models scale uint8 image pixels to [-1, 1] (True) or to [0, 1] (False).", boolean),
    K("action_mask_key", "action_mask", "Key of the action mask in a Dict observation (1 legal, 0 illegal): "
      "the model sees the rest and illegal actions are never taken.", _key_name),
    K("custom_model", None, "Registered name or class of a user model.", _name_or_class("custom model")),
    K("custom_model_config", {}, "Keyword arguments passed to the custom model.", dict_value(none_as_empty=True)),
    K("custom_action_dist", None, "Registered name or class of a user action distribution.",
      _name_or_class("custom action distribution")),
    K("custom_preprocessor", None, "Registered name of a user preprocessor.", _name_or_class("custom preprocessor")),
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
        K("num_workers", 0, "Remote sampling workers; 0 samples in the trainer's own process.", int_at_least(0)),
        K("num_envs_per_worker", 1, "Envs each worker steps together as one batched vector.", int_at_least(1)),
        K("create_env_on_driver", False, "Give the local worker an env even when remote workers sample.", boolean),
        K("rollout_fragment_length", 200, "Steps per sampled fragment, per env of a worker.", int_at_least(1)),
        K("batch_mode", "truncate_episodes", "truncate_episodes: fixed-size fragments; "
          "complete_episodes: fragments end only at episode ends.",
          one_of("truncate_episodes", "complete_episodes")),
    ],
    "Learning": [
        K("gamma", 0.99, "Discount factor.", number_in(0, 1)),
        K("lr", 0.0001, "Learning rate.", number_in(0)),
        K("train_batch_size", 200, "Steps per learning batch (fragments are concatenated up to it).", int_at_least(1)),
        K("model", MODEL_DEFAULTS, "Model options; see the model.* keys.", dict_value(none_as_empty=True)),
        K("optimizer", {}, "Extra torch.optim.Adam arguments (eps, betas, weight_decay, amsgrad, ...) for every "
          "optimizer of a policy; they override the algorithm's own (SAC's eps, DQN's adam_epsilon). Learning "
          "rates have their own keys.", _optimizer),
    ],
    "Environment": [
        K("horizon", None, "Force an episode end after this many steps; None uses the env's time limit.",
          optional(int_at_least(1), "the env's own limit")),
        K("soft_horizon", False, "At the horizon, end the episode for learning but do not reset the env.", boolean),
        K("no_done_at_end", False, "Never mark the last step of an episode as done.", boolean),
        K("env", None, "Env name (registered or Gymnasium id), class, 'module.Class' path, or "
          "'envpool:<id>' (num_envs_per_worker envs stepped as one batch by EnvPool's C++ threads)."),
        K("observation_space", None, "Policies' observation space; None infers it from the env.", _space_or_none),
        K("action_space", None, "Policies' action space; None infers it from the env.", _space_or_none),
        K("env_config", {}, "Dict given to the env creator (as an EnvContext).", dict_value(none_as_empty=True)),
        K("env_task_fn", None, "fn(train_result, env, env_context) -> new task, for TaskSettableEnv.",
          _callable_or_none("(train_results, task_settable_env, env_ctx) -> new_task")),
        K("render_env", False, "Render the env of the local worker (or of worker 1)."),
        K("record_env", False, "Record videos: True for the results folder, or a folder path.", _record_env),
        K("clip_rewards", None, "None: sign-clip on Atari only; True: sign; False: never; "
          "x: clip to [-x, x]; (lo, hi): clip to [lo, hi].", _clip_rewards),
        K("normalize_actions", True, "Learn in a normalized action space; unsquash to the env's bounds.", boolean),
        K("clip_actions", False, "Clip actions to the env's bounds before stepping.", boolean),
        K("preprocessor_pref", "deepmind", "Default observation preprocessors: 'deepmind' or 'rllib'.",
          one_of("deepmind", "rllib", None)),
    ],
    "Debugging and fault tolerance": [
        K("log_level", "WARN", "Log level of rlfleet's loggers.",
          one_of("DEBUG", "INFO", "WARN", "WARNING", "ERROR")),
        K("callbacks", DefaultCallbacks, "DefaultCallbacks subclass whose hooks run during training.",
          _callbacks),
        K("ignore_worker_failures", False, "Keep training when a remote worker dies.", boolean),
        K("recreate_failed_workers", False, "Restart a dead remote worker and give it the current weights.", boolean),
        K("disable_env_checking", False, "Skip the per-step checks of observations (space, NaN) and rewards "
          "(finite) after the first episode; env errors still say where they happened.", boolean),
        K("max_nonfinite_updates", 5, "Gradient updates with a NaN/inf loss or gradient are skipped (counted as "
          "info/learner/<policy>/num_nonfinite_updates); more than this many in a row raise.", int_at_least(0)),
        K("fast_path", "auto", "The NumPy fast paths for acting and learning (PPO, SAC, DDPG/TD3, DQN on small fully "
          "connected nets): 'auto' where they compute the same update as torch, 'off' torch everywhere, 'require' "
          "raise where the learner cannot take it; reported as info/learner/<policy>/fast_path and "
          "fast_path_reason.", one_of("auto", "off", "require")),
        K("log_sys_usage", True, "Add CPU/memory (and GPU) usage to the results.", boolean),
        K("fake_sampler", False, "Replay one sampled batch forever (throughput testing only)."),
    ],
    "Framework": [
        K("framework", "torch", "Deep-learning framework; only 'torch'.", _framework),
        K("eager_tracing", False, "TensorFlow only; accepted and ignored."),
    ],
    "Exploration": [
        K("explore", True, "Explore when computing actions, unless a call says otherwise.", boolean),
        K("exploration_config", {}, "Exploration object config: 'type' plus its constructor arguments.",
          dict_value()),
        K("exploration_config.type", "StochasticSampling", "Exploration class or its name "
          "(StochasticSampling, EpsilonGreedy, GaussianNoise, OrnsteinUhlenbeckNoise) or a "
          "'package.module.Class' path.", _exploration_type),
    ],
    "Evaluation": [
        K("evaluation_interval", None, "Evaluate every this many train() calls; None never.",
          optional(int_at_least(1), "no evaluation")),
        K("evaluation_num_episodes", 10, "Episodes per evaluation (at least).", int_at_least(1)),
        K("evaluation_parallel_to_training", False, "Evaluate in a thread while train() runs.", boolean),
        K("in_evaluation", False, "Set internally on evaluation workers.", boolean),
        K("evaluation_config", {}, "Overrides of this config for evaluation (e.g. explore False).",
          dict_value(none_as_empty=True)),
        K("evaluation_num_workers", 0, "Remote evaluation workers; 0 evaluates in the trainer.", int_at_least(0)),
        K("custom_eval_function", None, "fn(trainer, eval_workers) -> metrics dict, replacing evaluate().",
          _callable_or_none("(trainer, eval_workers) -> metrics dict")),
    ],
    "Advanced rollout settings": [
        K("sample_async", False, "Sample in a background thread (slightly off-policy).", boolean),
        K("sample_collector", None, "A class (or 'module:Class') implementing rollout.sampler_api.Sampler, "
          "built as cls(worker=, settings=); None: the built-in samplers.", _sampler_class_or_none),
        K("observation_filter", "NoFilter", "Per-element observation filter: 'NoFilter' or 'MeanStdFilter'.",
          one_of("NoFilter", "MeanStdFilter", or_callable=True)),
        K("synchronize_filters", True, "Sync filter statistics across workers each iteration.", boolean),
        K("tf_session_args", _TF_SESSION_ARGS, "TensorFlow only; accepted and ignored."),
        K("local_tf_session_args", _LOCAL_TF_SESSION_ARGS, "TensorFlow only; accepted and ignored."),
        K("compress_observations", False, "LZ4-compress each observation in sample batches.", boolean),
        K("collect_metrics_timeout", 180, "Seconds to wait for workers' metrics; late ones count next time.",
          number_in(0)),
        K("metrics_smoothing_episodes", 100, "Episodes that reported metrics are averaged over.", int_at_least(1)),
        K("remote_worker_envs", False, "Run each of a worker's vector envs in its own process.", boolean),
        K("remote_env_batch_wait_ms", 0, "Milliseconds to wait for remote envs when polling; only 0: remote "
          "sub-envs step in lockstep, each step waits for all of them.", _batch_wait_ms),
        K("min_iter_time_s", 0, "Least seconds one train() call takes.", number_in(0)),
        K("timesteps_per_iteration", 0, "Least env steps one train() call samples.", int_at_least(0)),
        K("seed", None, "Seed for envs, workers and policies; None is nondeterministic.",
          optional(int_at_least(0), "unseeded")),
        K("extra_python_environs_for_driver", {}, "Env variables set in the trainer process.", _environ),
        K("extra_python_environs_for_worker", {}, "Env variables set in worker processes.", _environ),
    ],
    "Resources": [
        K("num_gpus", 0, "GPUs the trainer's policies learn on (may be fractional: 0.5 is one GPU shared; 2 or "
          "more: one model copy (tower) per GPU, each minibatch split across them).", number_in(0, 256)),
        K("_fake_gpus", False, "Simulate the GPUs of num_gpus / num_gpus_per_worker with CPU towers (testing "
          "multi-GPU code on a machine without one).", boolean),
        K("num_cpus_per_worker", 1, "CPUs per remote worker.", number_in(0)),
        K("num_gpus_per_worker", 0, "GPUs per remote worker (may be fractional); its policies act and learn "
          "there.", number_in(0, 256)),
        K("custom_resources_per_worker", {}, "Custom Ray resources per remote worker.", dict_value()),
        K("num_cpus_for_driver", 1, "CPUs for the trainer process: reserved under Tune, and the cap on torch's "
          "threads (unless OMP_NUM_THREADS is set).", number_in(0)),
        K("placement_strategy", "PACK", "Ray placement-group strategy for trainer and workers.",
          one_of("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")),
    ],
    "Offline data": [
        K("input", "sampler", "Where experience comes from: 'sampler' (the env); a JSON-lines file, folder, glob "
          "or list of them; a mixture {source: probability}; a name given to register_input; "
          "'minari:<dataset id>'; or a callable IOContext -> reader.", _input),
        K("input_config", {}, "Options for a custom input reader.", dict_value()),
        K("actions_in_input_normalized", False, "Offline actions are already normalized to [-1, 1].", boolean),
        K("input_evaluation", ["is", "wis"], "Off-policy estimators run on offline input.", _input_evaluation),
        K("postprocess_inputs", False, "Run postprocess_trajectory on offline batches.", boolean),
        K("shuffle_buffer_size", 0, "Shuffle offline batches through a buffer of this many.", int_at_least(0)),
        K("output", None, "Where to write sampled experience (JSON lines): None, 'logdir', a folder path, or a "
          "callable IOContext -> writer.", _output),
        K("output_compress_columns", ["obs", "new_obs"], "Sample batch columns LZ4-compressed in output.", _str_list),
        K("output_max_file_size", 64 * 1024 * 1024, "Bytes per output file before a new one starts.", int_at_least(1)),
    ],
    "Multi-agent": [
        K("multiagent", {}, "Multi-agent settings; see the multiagent.* keys.", dict_value()),
        K("multiagent.policies", {}, "{policy_id: PolicySpec} or a set of ids; empty: one default policy.",
          _policies),
        K("multiagent.policy_map_capacity", 100, "Policies kept in memory before spilling the LRU ones.",
          int_at_least(1)),
        K("multiagent.policy_map_cache", None, "Folder for spilled policies; None is the results folder.",
          _path_or_none),
        K("multiagent.policy_mapping_fn", None, "fn(agent_id, episode, worker, **kwargs) -> policy_id; "
          "None maps every agent to 'default_policy' (or to the only policy).",
          _callable_or_none("(agent_id, episode, worker, **kwargs) -> policy_id")),
        K("multiagent.policies_to_train", None, "Ids of the policies to train; None trains all.", _policy_ids),
        K("multiagent.observation_fn", None, "fn(agent_obs, worker, base_env, policies, episode) -> new "
          "{agent_id: obs}, applied before the policies see the observations.",
          _callable_or_none("(agent_obs, worker, base_env, policies, episode) -> {agent_id: obs}")),
        K("multiagent.replay_mode", "independent", "Replay transitions per policy ('independent') or "
          "all agents of a timestep together ('lockstep').", one_of("independent", "lockstep")),
        K("multiagent.count_steps_by", "env_steps", "Batch size counts env steps or agent steps.",
          one_of("env_steps", "agent_steps")),
    ],
    "Logging": [
        K("logger_config", None, "Result loggers: {'type': a logger class or a list of them (default: result.json, "
                                 "progress.csv and TensorBoard events), **their options}.", _logger_config),
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
NOT_YET_AVAILABLE: Dict[str, str] = {}

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
# Algorithm keys. Each algorithm declares the keys it adds, and the common keys whose
# default it changes (``override``), as one list of ``ConfigKey``; its ``DEFAULT_CONFIG``
# (``algorithm_config``), the checks of its values (``validate_config(config, keys)``) and
# its docs page (``describe_keys("PPO")``) all come from that list.
# ---------------------------------------------------------------------------------------
def override(name: str, default: Any, doc: Optional[str] = None) -> ConfigKey:
    """A common key with an algorithm's own default; its check (and meaning) stay.

    Args:
        name: the common key's dotted path, e.g. ``"lr"`` or ``"model.vf_share_layers"``.
        default: the algorithm's default.
        doc: the meaning, where the algorithm gives the key a narrower one.

    Raises:
        ValueError: if `name` is not a common key.
    """
    if name not in KEY_INDEX:
        raise ValueError(f"override({name!r}): not a common key; declare an algorithm's own key "
                         "with ConfigKey(name, default, doc, check)")
    key = KEY_INDEX[name]
    return key._replace(default=default, doc=doc or key.doc)


def with_defaults(keys: List[ConfigKey], defaults: Dict[str, Any]) -> List[ConfigKey]:
    """`keys` with other defaults: a variant of an algorithm (TD3 of DDPG, SimpleQ of DQN).

    Args:
        keys: the base algorithm's keys.
        defaults: ``{dotted name: new default}``; a common key not in `keys` is added as an
            ``override``.

    Returns:
        A new list; `keys` is not changed.
    """
    out = list(keys)
    index = {k.name: i for i, k in enumerate(out)}
    for name, default in defaults.items():
        if name in index:
            out[index[name]] = out[index[name]]._replace(default=default)
        else:
            out.append(override(name, default))
    return out


def algorithm_config(keys: List[ConfigKey]) -> Dict[str, Any]:
    """An algorithm's ``DEFAULT_CONFIG``: ``COMMON_CONFIG`` updated with `keys`' defaults.

    Merged as ``with_common_config`` merges: a dict default of a common key updates the
    common dict (``model``), except an ``exploration_config`` of another ``type``, which
    replaces it whole. A parent key (``Q_model``) must come before its children
    (``Q_model.fcnet_hiddens``).

    Args:
        keys: the algorithm's keys (its own ones and its overrides of common keys).
    """
    defaults: Dict[str, Any] = {}
    for key in keys:
        *parents, leaf = key.name.split(".")
        node = defaults
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = copy.deepcopy(key.default)
    return with_common_config(defaults)


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


def check_keys(config: dict, keys: Iterable[ConfigKey]) -> None:
    """Runs the checks of `keys` on `config`, normalizing values in place.

    Keys absent from `config` are skipped; a parent is checked before its children when
    declared first.

    Args:
        config: a merged config; mutated.
        keys: the keys whose checks to run, e.g. an algorithm's ``ALGO_KEYS``.

    Raises:
        ValueError: naming the key, the value given and what is allowed.
    """
    for key in keys:
        if key.check is None:
            continue
        *parents, leaf = key.name.split(".")
        parent = _lookup(config, ".".join(parents)) if parents else config
        if not isinstance(parent, dict) or leaf not in parent:
            continue
        value = parent[leaf]
        try:
            parent[leaf] = key.check(value)
        except InvalidValue as e:
            raise ValueError(e.message(key.name, value)) from None
        except (TypeError, AttributeError, KeyError, IndexError) as e:
            # A check that could not even read the value: still the user's value at fault.
            raise ValueError(f"'{key.name}': {value!r} is invalid ({type(e).__name__}: {e}); "
                             f"see describe_keys() for what it takes") from e


def _not_common_checks(algo_keys: Iterable[ConfigKey]) -> List[ConfigKey]:
    # An override keeps the common key's check, which validate_config runs already.
    return [k for k in algo_keys if k.name not in KEY_INDEX or k.check is not KEY_INDEX[k.name].check]


def validate_config(config: dict, algo_keys: Sequence[ConfigKey] = ()) -> None:
    """Checks a merged config and normalizes it in place.

    Translates deprecated keys (logging a warning), fills in defaults for None where the
    reference does (``model``, ``callbacks``, ``multiagent.policies``), converts policy
    tuples to ``PolicySpec``, checks each value (the common keys', then the algorithm's),
    then calls ``check_available``.

    Args:
        config: a merged config (the output of ``merge_configs``); mutated.
        algo_keys: the algorithm's keys (its ``ALGO_KEYS``), whose checks run too.

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

    check_keys(config, KEY_INDEX.values())  # parents come before their children
    check_keys(config, _not_common_checks(algo_keys))
    check_available(config)
    _check_gpus(config)


def _check_gpus(config: dict) -> None:
    """`num_gpus` (the trainer's own learner) needs CUDA here, unless `_fake_gpus`. (Remote
    workers' `num_gpus_per_worker` is checked where they run: Ray reserves the GPUs, and the
    worker's policy refuses to start without CUDA.)"""
    num_gpus = config.get("num_gpus") or 0
    if num_gpus > 0 and not config.get("_fake_gpus"):
        import torch  # only when GPUs are asked for: the config layer stays light

        if not torch.cuda.is_available():
            raise ValueError(f"'num_gpus': {num_gpus!r} asks for GPUs, but torch sees no CUDA device on this "
                             "machine; set '_fake_gpus': True to simulate them on the CPU (towers), or "
                             "'num_gpus': 0 to learn on the CPU")


# ---------------------------------------------------------------------------------------
# Docs.
# ---------------------------------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default_text(path: str, default: Any, declared: Set[str]) -> str:
    if isinstance(default, dict):
        children = {p[len(path) + 1:] for p in declared if p.startswith(path + ".")}
        # "see path.*" only where those rows show every entry of the dict.
        if children and set(default) <= {c.split(".")[0] for c in children}:
            return f"see `{path}.*`"
    if isinstance(default, type):
        return f"`{default.__module__}.{default.__qualname__}`"
    return f"`{default!r}`"


def _algorithm_keys(algorithm: str) -> Tuple[List[ConfigKey], dict]:
    # Imported here: the registry imports each algorithm on demand, and the algorithms
    # sit above config in the layers.
    from rlfleet.registry import get_trainer_class

    trainer_class = get_trainer_class(algorithm)
    return list(trainer_class._algo_keys), trainer_class._default_config


def describe_keys(algorithm: Optional[str] = None) -> str:
    """Returns Markdown tables of every config key (name, default, meaning), by section.

    Args:
        algorithm: a registered algorithm's name (e.g. ``"PPO"``): its keys come first (its
            own and the common keys it sets differently, with its defaults), then the other
            common keys. None: the common keys with their common defaults.

    Returns:
        The Markdown text, generated from the declarations.

    Raises:
        ValueError: for an unknown algorithm, listing the known ones.
    """
    sections: List[Tuple[str, List[ConfigKey]]] = list(COMMON_KEYS.items()) + [
        ("Model (model.*)", [KEY_INDEX[f"model.{k.name}"] for k in MODEL_KEYS])]
    declared = set(KEY_INDEX)
    defaults: Dict[str, Any] = {}
    if algorithm is not None:
        algo_keys, algo_config = _algorithm_keys(algorithm)
        own = {k.name for k in algo_keys}
        sections = [(f"{algorithm}: its keys and its defaults of common keys", algo_keys)] + [
            (title, [k for k in keys if k.name not in own]) for title, keys in sections]
        declared |= own
        defaults = {path: _lookup(algo_config, path) for path in declared}
    lines: List[str] = []
    for title, keys in sections:
        lines += [f"### {title}", "", "| key | default | meaning |", "| --- | --- | --- |"]
        for k in keys:
            default = defaults.get(k.name, _MISSING)
            default = k.default if default is _MISSING else default
            lines.append(f"| `{k.name}` | {_cell(_default_text(k.name, default, declared))} | {_cell(k.doc)} |")
        lines.append("")
    lines += ["### Deprecated keys", "", "| key | replaced by |", "| --- | --- |"]
    for path, dep in DEPRECATED_KEYS.items():
        lines.append(f"| `{path}` | {_cell(dep.replacement or '(ignored)')} |")
    return "\n".join(lines) + "\n"


def config_reference() -> str:
    """The whole config reference (docs/config.md): every common key, then each registered
    algorithm's own keys and its defaults of common keys. Generated, never edited by hand."""
    from rlfleet.registry import list_algorithms

    parts = ["# rlfleet config reference", "",
             "Generated by `rlfleet config --markdown` from the declared keys; `rlfleet config ALGO` "
             "prints one algorithm's view.", "", "## Common keys", "", describe_keys()]
    for name in list_algorithms():
        own = describe_keys(name).split("\n### ", 2)[0]  # the algorithm's section comes first
        parts += [f"## {name}", "", own.replace("### ", "", 1).split("\n", 1)[1].strip(), ""]
    return "\n".join(parts).rstrip("\n") + "\n"
