"""IMPALA: workers sample without pause, a learner thread learns on V-trace-corrected
train batches from a queue (the data flow: `rlfleet.algorithms.common.async_sampling`)."""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.a2c.a2c import ACTOR_CRITIC_KEYS, OPTIMIZER_KEYS
from rlfleet.algorithms.common.async_sampling import ASYNC_KEYS, AsyncSamplingTrainer
from rlfleet.algorithms.impala.impala_policy import ImpalaTorchPolicy
from rlfleet.config import ConfigKey, algorithm_config, not_available, number_above, optional, override

K = ConfigKey

# V-trace and the optimizer choice, shared with APPO.
VTRACE_KEYS: List[ConfigKey] = [
    K("vtrace", True, "Correct the targets for the policy lag with V-trace; False: plain returns, no correction."),
    K("vtrace_clip_rho_threshold", 1.0, "V-trace's rho_bar: the clip of the importance weights in the value "
      "targets (None: no clip).", optional(number_above(0), "no clip")),
    K("vtrace_clip_pg_rho_threshold", 1.0, "The clip of the importance weights in the policy-gradient advantages "
      "(None: no clip).", optional(number_above(0), "no clip")),
    K("vtrace_drop_last_ts", False, "RLlib 1.x's drop of each fragment's last timestep (it had no next "
      "observation to bootstrap from); only False: rlfleet bootstraps it from its next observation and learns on it.",
      not_available("the last timestep of a fragment is bootstrapped from its next observation, not dropped",
                    False)),
] + OPTIMIZER_KEYS

_AC_KEYS = [k for k in ACTOR_CRITIC_KEYS if k.name not in ("use_critic", "use_gae", "lambda", "lr")]

ALGO_KEYS: List[ConfigKey] = _AC_KEYS + VTRACE_KEYS + ASYNC_KEYS + [
    override("rollout_fragment_length", 50),
    override("train_batch_size", 500),
    override("min_iter_time_s", 10),
    override("lr", 0.0005),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class ImpalaTrainer(AsyncSamplingTrainer):
    """Importance Weighted Actor-Learner Architecture."""

    _name = "IMPALA"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = ImpalaTorchPolicy
