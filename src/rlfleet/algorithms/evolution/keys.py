"""The config keys ES and ARS share (with each algorithm's own defaults)."""
from __future__ import annotations

from typing import List

from rlfleet.config import ConfigKey, int_at_least, number_above, number_in, optional, override

K = ConfigKey


def search_keys(*, action_noise_std: float, eval_prob: float) -> List[ConfigKey]:
    """The perturbation-search keys, with RLlib 1.x's defaults for one algorithm."""
    return [
        override("observation_filter", "MeanStdFilter"),
        # The perturbations were scored acting on the mode; so does the trained policy.
        override("explore", False),
        K("noise_stdev", 0.02, "Standard deviation of the parameter perturbations (theta +/- noise_stdev * eps).",
          number_above(0)),
        K("noise_size", 250000000, "Entries (float32) of the shared noise table the perturbations are read from; "
          "one copy per node.", int_at_least(1)),
        K("action_noise_std", action_noise_std, "Gaussian noise added to Box actions in perturbed episodes.",
          number_in(0)),
        # Without a floor, an iteration of a few dozen episodes at eval_prob 0.003 has no
        # evaluation episode most of the time: episode_reward_mean stays NaN or stale, and a
        # stop on it cannot fire.
        K("min_eval_episodes", None, "Unperturbed evaluation episodes of the current policy every iteration runs at "
          "least (episode_reward_mean is their return); None: one per perturbation worker (one with num_workers: "
          "0); 0 leaves them to eval_prob alone.",
          optional(int_at_least(0), "one per perturbation worker, one with num_workers: 0")),
        K("eval_prob", eval_prob, "Chance per direction of one more evaluation episode, beside min_eval_episodes.",
          number_in(0, 1)),
        K("report_length", 10, "episode_reward_mean, _min and _max are over the evaluation episodes of this many last "
          "iterations.", int_at_least(1)),
    ]


__all__ = ["search_keys"]
