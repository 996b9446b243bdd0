"""APPO: IMPALA's asynchronous data flow with PPO's clipped surrogate, on V-trace targets or
(`vtrace: False`) on the workers' GAE advantages (see appo_policy.py)."""
from __future__ import annotations

import logging
from typing import List

from rlfleet.algorithms.common.async_sampling import ASYNC_KEYS
from rlfleet.algorithms.appo.appo_policy import APPOTorchPolicy
from rlfleet.algorithms.impala.impala import ALGO_KEYS as IMPALA_KEYS, ImpalaTrainer
from rlfleet.config import ConfigKey, algorithm_config, int_at_least, number_above, number_in, with_defaults
from rlfleet.rollout.postprocessing import check_gae_needs_critic

K = ConfigKey
logger = logging.getLogger(__name__)

ALGO_KEYS: List[ConfigKey] = with_defaults(IMPALA_KEYS, {"replay_buffer_num_slots": 100}) + [
    K("clip_param", 0.4, "The clip range of the probability ratio: [1 - clip, 1 + clip].", number_above(0)),
    K("use_kl_loss", False, "Add a KL(old || new) penalty, its coefficient adapted towards kl_target."),
    K("kl_coeff", 1.0, "Initial coefficient of the KL penalty (with use_kl_loss).", number_in(0)),
    K("kl_target", 0.01, "KL divergence the penalty coefficient is adapted towards.", number_above(0)),
    K("target_update_frequency", 1, "Learner updates between refreshes of the target network (the old policy "
      "with vtrace; without, the old policy is the one that sampled).",
      int_at_least(1)),
    # RLlib 1.x's APPO (`rllib/agents/ppo/appo.py`) has these, IMPALA not: advantages without V-trace.
    K("use_critic", True, "With vtrace False: the value function is the baseline and bootstraps truncated "
      "trajectories (GAE needs it); False: the advantages are the plain discounted returns. Unused with V-trace."),
    K("use_gae", True, "With vtrace False: Generalized Advantage Estimation on the workers; False: discounted "
      "returns minus the value. Unused with V-trace."),
    K("lambda", 1.0, "With vtrace False: GAE's lambda (0 is the one-step TD error, 1 the Monte-Carlo return). "
      "Unused with V-trace.", number_in(0, 1)),
]
assert {k.name for k in ASYNC_KEYS} <= {k.name for k in ALGO_KEYS}

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class APPOTrainer(ImpalaTrainer):
    """Asynchronous Proximal Policy Optimization."""

    _name = "APPO"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = APPOTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        if not config["vtrace"]:
            check_gae_needs_critic(config)
        # RLlib 1.x ignores these silently with V-trace, so a tuned config may set them for nothing; say so once.
        unused = {k: config[k] for k, default in (("lambda", 1.0), ("use_critic", True)) if config[k] != default}
        if config["vtrace"] and unused:
            named = " and ".join(f"{k!r}: {v!r}" for k, v in unused.items())
            logger.warning("APPO: %s %s unused with 'vtrace': True (V-trace computes the advantages); "
                           "they apply with 'vtrace': False", named, "is" if len(unused) == 1 else "are")
