"""MARWIL (Wang et al. 2018): advantage-weighted imitation of (offline) data; the loop is
`SingleUpdateTrainer`'s (read a train batch, one gradient step, sync weights)."""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.marwil.marwil_policy import MARWILTorchPolicy
from rlfleet.algorithms.common.multi_agent import SingleUpdateTrainer
from rlfleet.config import ConfigKey, algorithm_config, finite_number, number_in, optional, number_above, override

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = [
    K("beta", 1.0, "Advantage weighting: weights are exp(beta * A / sqrt(ma(A^2))); 0 is behaviour cloning.",
      finite_number),
    K("vf_coeff", 1.0, "Weight of the value loss (0.5 * mean squared advantage).", number_in(0)),
    K("moving_average_sqd_adv_norm_start", 100.0, "Initial moving average of the squared advantage.",
      number_above(0)),
    K("moving_average_sqd_adv_norm_update_rate", 1e-8, "Update rate of the squared-advantage moving average.",
      number_in(0, 1)),
    K("bc_logstd_coeff", 0.0, "Bonus on the Gaussian log-std (continuous actions), to keep exploring.", number_in(0)),
    K("grad_clip", None, "Clip the global gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("postprocess_inputs", True),
    override("lr", 1e-4),
    override("train_batch_size", 2000),
    override("num_workers", 0),
    # Deviation: RLlib 1.x shares the value head's layers (the common default). With
    # returns in the tens or hundreds, the value loss then swamps the policy's gradient
    # (CartPole, 60:40 random/expert data: ~70 with shared layers, ~210 without).
    override("model.vf_share_layers", False),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class MARWILTrainer(SingleUpdateTrainer):
    """Monotonic Advantage Re-Weighted Imitation Learning, usually on offline `input`
    (`SingleUpdateTrainer`'s loop: one gradient step per train batch)."""

    _name = "MARWIL"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = MARWILTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        if config["beta"] != 0.0 and not config["postprocess_inputs"] and config["input"] != "sampler":
            raise ValueError(f"'beta': {config['beta']} weights actions by their advantages, which are computed when "
                             "batches are postprocessed; set 'postprocess_inputs': True (or 'beta': 0 for BC)")
