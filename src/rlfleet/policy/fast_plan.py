"""Where a policy acts and learns: the NumPy fast paths (`rlfleet.fast`) or torch — ONE
selection point, computed once per policy (`TorchPolicy.fast_plan`) and again after a
structural change (weights or state set, optimizers rebuilt), never per update.

The `fast_path` config key drives it: "auto" (the fast path wherever it computes the same
update), "off" (torch everywhere) or "require" (a ValueError naming the reason where the
learner cannot take the fast path). The actor's path is reported, not required: only the
fully connected Categorical / Gaussian policies (PG family) have a NumPy actor at all, and
acting falls back per call (random exploration steps), so a requirement on it could only
ever be met by some algorithms.

`FAST_PATH_KEYS` classifies, per fast learner family and for the `model` dict, every config
key as handled by the NumPy maths, making the learner fall back to torch (with a reason), or
not read by the loss; tests/policy/test_fast_path_coverage.py fails on an unclassified key, so a new
option cannot be silently ignored by the default path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Union

import torch

from rlfleet.policy.numpy_learner import numpy_learner_reason

NUMPY = "numpy"
TORCH = "torch"
FAST_PATH_MODES = ("auto", "off", "require")


@dataclass(frozen=True)
class FastPathPlan:
    """Which implementation serves a policy's acting and its learning, and why."""

    actor: str
    actor_reason: str
    learner: str
    learner_reason: str

    def report(self) -> Dict[str, str]:
        """What every `train()` result shows per policy (`info/learner/<pid>/...`)."""
        return {"fast_path": self.learner, "fast_path_reason": self.learner_reason,
                "fast_path_actor": self.actor, "fast_path_actor_reason": self.actor_reason}


# --- the key table -------------------------------------------------------------------------
HANDLED = "handled"
NOT_USED = "not used by the loss"


@dataclass(frozen=True)
class FallsBack:
    """A key the NumPy learner does not compute: with a value `allowed` rejects, the learner
    falls back to torch, naming the key (`allowed` None: the value changes the networks'
    structure, and the structural gate of the family's learner falls back on it)."""

    allowed: Optional[Callable[[Any], bool]] = None
    needs: str = ""


Classification = Union[str, FallsBack]


def _is(value: Any) -> FallsBack:
    return FallsBack(lambda v: v == value, f"{value!r}")


_STRUCTURE = FallsBack()  # the nets must stay stacks of Linear + tanh / ReLU

_REPLAY_KEYS: Dict[str, Classification] = {k: NOT_USED for k in (
    "timesteps_per_iteration", "buffer_size", "replay_buffer_config", "store_buffer_in_checkpoints",
    "prioritized_replay", "prioritized_replay_alpha", "prioritized_replay_beta", "final_prioritized_replay_beta",
    "prioritized_replay_beta_annealing_timesteps", "prioritized_replay_eps", "learning_starts",
    "training_intensity", "target_network_update_freq", "worker_side_prioritization", "rollout_fragment_length",
    "train_batch_size", "num_workers", "min_iter_time_s", "evaluation_config", "exploration_config",
    # APEX: how replay shards and the learner queue are laid out
    "num_replay_buffer_shards", "max_weight_sync_delay", "learner_queue_size",
    "max_requests_in_flight_per_replay_shard", "max_sample_requests_in_flight_per_worker")}
# Keys every family's learner reads: the discount (n-step columns), clipping, the optimizer.
_COMMON_LOSS_KEYS: Dict[str, Classification] = {
    "gamma": HANDLED, "n_step": HANDLED, "grad_clip": HANDLED, "clip_rewards": NOT_USED,
    "optimizer": HANDLED,  # weight decay / AMSGrad / maximize: FlatAdam.supported falls back
}

FAST_PATH_KEYS: Dict[str, Dict[str, Classification]] = {
    "PPO": {
        **_COMMON_LOSS_KEYS,
        "use_critic": _is(True),
        "use_gae": NOT_USED, "lambda": NOT_USED,  # postprocessing
        "kl_coeff": HANDLED, "kl_target": NOT_USED,  # the KL target adapts kl_coeff between updates
        "rollout_fragment_length": NOT_USED, "train_batch_size": NOT_USED, "batch_mode": NOT_USED,
        "observation_filter": NOT_USED,
        "sgd_minibatch_size": HANDLED, "num_sgd_iter": HANDLED, "shuffle_sequences": HANDLED,
        "lr": HANDLED, "lr_schedule": HANDLED, "vf_loss_coeff": HANDLED, "model.vf_share_layers": HANDLED,
        "entropy_coeff": HANDLED, "entropy_coeff_schedule": HANDLED, "clip_param": HANDLED,
        "vf_clip_param": HANDLED,
    },
    "SAC": {
        **_REPLAY_KEYS, **_COMMON_LOSS_KEYS,
        "twin_q": HANDLED, "Q_model": HANDLED, "Q_model.fcnet_hiddens": HANDLED,
        "Q_model.fcnet_activation": _STRUCTURE, "policy_model": HANDLED, "policy_model.fcnet_hiddens": HANDLED,
        "policy_model.fcnet_activation": _STRUCTURE, "clip_actions": NOT_USED, "normalize_actions": HANDLED,
        "tau": NOT_USED,  # target updates run outside the loss
        "initial_alpha": HANDLED, "target_entropy": HANDLED, "optimization": HANDLED,
        "optimization.actor_learning_rate": HANDLED, "optimization.critic_learning_rate": HANDLED,
        "optimization.entropy_learning_rate": HANDLED,
        "_deterministic_loss": _is(False),
        "_use_beta_distribution": _is(False),
    },
    "DDPG": {
        **_REPLAY_KEYS, **_COMMON_LOSS_KEYS,
        "twin_q": HANDLED, "policy_delay": HANDLED, "smooth_target_policy": HANDLED, "target_noise": HANDLED,
        "target_noise_clip": HANDLED, "actor_hiddens": HANDLED, "actor_hidden_activation": _STRUCTURE,
        "critic_hiddens": HANDLED, "critic_hidden_activation": _STRUCTURE, "critic_lr": HANDLED,
        "actor_lr": HANDLED, "tau": NOT_USED, "use_huber": HANDLED, "huber_threshold": HANDLED, "l2_reg": HANDLED,
    },
    "DQN": {
        **_REPLAY_KEYS, **_COMMON_LOSS_KEYS,
        "lr": HANDLED, "lr_schedule": HANDLED, "adam_epsilon": HANDLED,
        "num_atoms": _is(1), "noisy": _is(False),
        # read only by a distributional head / noisy layers, which fall back above
        "v_min": NOT_USED, "v_max": NOT_USED, "sigma0": NOT_USED,
        "dueling": HANDLED, "hiddens": HANDLED, "double_q": HANDLED,
    },
    # The `model` dict (MODEL_DEFAULTS), as each family's nets read it.
    "model": {
        "fcnet_hiddens": HANDLED, "fcnet_activation": _STRUCTURE, "free_log_std": HANDLED,
        "no_final_linear": HANDLED, "vf_share_layers": HANDLED,
        # image inputs: a convolutional model, which is no linear stack
        "conv_filters": _STRUCTURE, "conv_activation": _STRUCTURE, "post_fcnet_hiddens": _STRUCTURE,
        "post_fcnet_activation": _STRUCTURE,
        "use_lstm": _is(False), "use_attention": _is(False),
        # read only by recurrent / attention wrappers, which fall back above
        "max_seq_len": NOT_USED, "lstm_cell_size": NOT_USED, "lstm_use_prev_action": NOT_USED,
        "lstm_use_prev_reward": NOT_USED, "_time_major": NOT_USED, "attention_num_transformer_units": NOT_USED,
        "attention_dim": NOT_USED, "attention_num_heads": NOT_USED, "attention_head_dim": NOT_USED,
        "attention_memory_inference": NOT_USED, "attention_memory_training": NOT_USED,
        "attention_position_wise_mlp_dim": NOT_USED, "attention_init_gru_gate_bias": NOT_USED,
        "attention_use_n_prev_actions": NOT_USED, "attention_use_n_prev_rewards": NOT_USED,
        # preprocessing, before the model
        "framestack": NOT_USED, "dim": NOT_USED, "grayscale": NOT_USED, "zero_mean": NOT_USED,
        "custom_preprocessor": NOT_USED,
        "action_mask_key": _STRUCTURE,  # a Dict observation with the mask: a masking model
        "custom_model": _is(None), "custom_action_dist": _is(None),
        "custom_model_config": NOT_USED,  # read only by a custom model, which falls back above
    },
}


def unclassified_keys(family: str, keys) -> list:
    """The names among `keys` that `FAST_PATH_KEYS[family]` does not classify."""
    table = FAST_PATH_KEYS[family]
    return sorted(k for k in keys if k not in table)


_MISSING = object()


def _lookup(config: Mapping[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING  # not set: the default, which the learner serves
        value = value[part]
    return value


def key_fallback_reason(family: str, config: Mapping[str, Any]) -> Optional[str]:
    """The first key of `config` (or of its `model` dict) whose value the NumPy learner of
    `family` does not compute, as a reason; None: every value is served."""
    for table, scope, prefix in ((FAST_PATH_KEYS[family], config, ""),
                                 (FAST_PATH_KEYS["model"], config.get("model") or {}, "model.")):
        for key, how in table.items():
            if isinstance(how, FallsBack) and how.allowed is not None:
                value = _lookup(scope, key)
                if value is not _MISSING and not how.allowed(value):
                    return f"{prefix}{key}={value!r} (the NumPy learner computes only {how.needs})"
    return None


# --- the selection -------------------------------------------------------------------------
def supports_fast_path(policy) -> bool:
    """Whether `policy`'s acting can run on a NumPy snapshot of its model (see `actor_reason`)."""
    return actor_reason(policy) is None


def actor_reason(policy) -> Optional[str]:
    """Why `policy` cannot act through the NumPy snapshot (None: it can): it needs a plain
    FullyConnectedNetwork without pixel scaling, a Categorical or DiagGaussian distribution
    and StochasticSampling exploration (itself, or the sub-exploration of one that only
    reshapes rewards, `acting_exploration`)."""
    from rlfleet.exploration.stochastic_sampling import StochasticSampling
    from rlfleet.models.distributions import Categorical, DiagGaussian
    from rlfleet.models.fcnet import FullyConnectedNetwork

    if type(policy.model) is not FullyConnectedNetwork:
        return f"the model is {type(policy.model).__name__}, not a FullyConnectedNetwork"
    # uint8 inputs: the torch path scales them (`pixels`; `scale` in older models)
    if getattr(policy.model, "pixels", None) is not None or getattr(policy.model, "scale", None) is not None:
        return "the model scales pixel inputs"
    if policy.dist_class not in (Categorical, DiagGaussian):
        return f"the action distribution is {getattr(policy.dist_class, '__name__', policy.dist_class)}"
    # An exploration that only reshapes rewards (Curiosity) acts as its sub-exploration.
    acting = policy.exploration.acting_exploration
    if type(acting) is not StochasticSampling:
        return f"the exploration is {type(acting).__name__}, not StochasticSampling"
    return None


def fast_path_mode(config: Mapping[str, Any]) -> str:
    mode = config.get("fast_path", "auto")
    if mode not in FAST_PATH_MODES:
        raise ValueError(f"fast_path={mode!r} is not one of {list(FAST_PATH_MODES)}; use 'auto' (the default)")
    return mode


def learner_reason(policy) -> Optional[str]:
    """Why `policy`'s learner cannot take the NumPy path (None: it can)."""
    if fast_path_mode(policy.config) == "off":
        return "fast_path is 'off'"
    if policy.numpy_learner is None:
        return f"{type(policy).__name__} has no NumPy learner"
    why = key_fallback_reason(policy.numpy_learner.family, policy.config)
    if why is not None:
        return why
    why = numpy_learner_reason(policy)
    if why is not None:
        return why
    # One thread rule for every algorithm: the NumPy learners run their products on one BLAS
    # thread (`single_threaded_blas`); with more torch threads the user asked for parallel
    # products, and torch's multi-threaded ones are then as fast or faster at these sizes
    # (benchmarks/learner.py: SAC and TD3), while OpenBLAS's own threads stall on a busy
    # machine. The trainers run torch on `num_cpus_for_driver` threads, 1 by default.
    threads = torch.get_num_threads()
    if threads != 1:
        return f"torch runs on {threads} threads (the NumPy learner is used with 1)"
    return None


def make_plan(policy) -> FastPathPlan:
    """`policy`'s plan now. Raises ValueError naming `fast_path` when it is "require" and the
    learner cannot take the NumPy path."""
    learner_why = learner_reason(policy)
    if learner_why is not None and fast_path_mode(policy.config) == "require":
        raise ValueError(f"fast_path='require', but the NumPy learner cannot serve {type(policy).__name__} "
                         f"{policy.policy_id!r}: {learner_why}; set fast_path to 'auto' to fall back to torch")
    actor_why = policy.numpy_actor_reason()
    actor = NUMPY if actor_why is None else TORCH
    actor_why = actor_why or "a fully connected model with Categorical / DiagGaussian actions"
    return FastPathPlan(actor, actor_why, NUMPY if learner_why is None else TORCH,
                        learner_why or f"the NumPy {policy.numpy_learner.family} learner computes the same update")


__all__ = ["FAST_PATH_KEYS", "FAST_PATH_MODES", "FallsBack", "FastPathPlan", "HANDLED", "NOT_USED", "NUMPY", "TORCH",
           "actor_reason", "fast_path_mode", "key_fallback_reason", "learner_reason", "make_plan",
           "supports_fast_path", "unclassified_keys"]
