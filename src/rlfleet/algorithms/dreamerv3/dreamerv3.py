"""DreamerV3 (Hafner et al. 2023, "Mastering Diverse Domains through World Models",
arXiv:2301.04104): a world model (RSSM with discrete latents) learned from replayed sequences,
and an actor-critic trained on rollouts imagined by it.

The loop is `OffPolicyTrainer.training_step`: sample a fragment (locally, or on Ray workers
with `num_workers > 0`), store it as sequences of `batch_length` steps (replay/sequences.py,
cut from whole episodes), then replay `training_ratio` steps per sampled env step, each update
being `batch_size` sequences (world model, then actor and critic in imagination), and move the
slow critic towards the critic by `tau`.
"""
from __future__ import annotations

import logging
import math
from typing import Any, List

from rlfleet.algorithms.common.off_policy import OffPolicyTrainer
from rlfleet.algorithms.common.replay_keys import replay_keys
from rlfleet.algorithms.common.sequence_replay import replayed_sequence_steps, validate_sequence_replay
from rlfleet.algorithms.dreamerv3.dreamerv3_policy import DreamerV3TorchPolicy
from rlfleet.algorithms.dreamerv3.world_model import MODEL_SIZES
from rlfleet.config import (ConfigKey, InvalidValue, algorithm_config, int_at_least, not_available, number_above,
                            number_in, one_of, override)
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay.sequences import replay_sequences

K = ConfigKey
logger = logging.getLogger(__name__)


def _use_training_ratio(v: Any) -> Any:
    if v is not None:
        raise InvalidValue("None: DreamerV3 sets its replay ratio with 'training_ratio' (replayed steps per env "
                           "step, the paper's knob); set that instead")
    return v


ALGO_KEYS: List[ConfigKey] = [
    K("model_size", "XS", "The paper's model size: XS, S, M, L or XL (GRU units, dense units and layers, CNN "
      "depth; see world_model.MODEL_SIZES); 'nano' is a tiny size for tests only.", one_of(*MODEL_SIZES)),
    K("training_ratio", 512, "Replayed steps (batch_size * batch_length per update) per sampled env step: the "
      "one knob that trades compute for sample efficiency (the paper's replay ratio).", number_above(0)),
    K("batch_size", 16, "Sequences replayed per update.", int_at_least(1)),
    K("batch_length", 64, "Steps per replayed sequence.", int_at_least(2)),
    K("imagination_horizon", 15, "Steps imagined from each posterior state for the actor-critic.", int_at_least(1)),
    K("num_latents", 32, "Categorical latents of the RSSM's stochastic state.", int_at_least(1)),
    K("num_classes", 32, "Classes per categorical latent.", int_at_least(2)),
    K("unimix", 0.01, "Share of the uniform distribution mixed into the latents' and the (Discrete) actor's "
      "categoricals.", number_in(0, 1)),
    K("free_nats", 1.0, "Free bits: each KL term is clipped below at this many nats.", number_in(0)),
    K("kl_dyn_scale", 0.5, "Weight of the dynamics KL (prior towards the stopped posterior).", number_in(0)),
    K("kl_rep_scale", 0.1, "Weight of the representation KL (posterior towards the stopped prior).", number_in(0)),
    K("world_model_lr", 1e-4, "Adam learning rate of the world model.", number_above(0)),
    K("actor_lr", 3e-5, "Adam learning rate of the actor.", number_above(0)),
    K("critic_lr", 3e-5, "Adam learning rate of the critic.", number_above(0)),
    K("adam_epsilon", 1e-8, "Adam's epsilon (all three optimizers).", number_above(0)),
    K("lambda", 0.95, "Lambda of the imagined lambda-returns.", number_in(0, 1)),
    K("entropy_coeff", 3e-4, "Weight of the actor's entropy bonus.", number_in(0)),
    K("return_norm_decay", 0.99, "EMA decay of the returns' 5th-95th percentile range (the advantage scale).",
      number_in(0, 1)),
    K("slow_critic_reg", 1.0, "Weight of the critic's loss towards its slow copy's predictions.", number_in(0)),
    K("tau", 0.02, "Slow critic EMA per update: slow <- tau * critic + (1 - tau) * slow.", number_above(0, 1)),
    override("gamma", 0.997),
    K("grad_clip", 100.0, "Clip each network's gradient norm to this (world model, actor, critic).",
      number_above(0)),
    override("lr", 1e-4),
    override("batch_mode", "complete_episodes"),
    override("rollout_fragment_length", 1),
    override("normalize_actions", True),
    override("clip_actions", False),
    override("timesteps_per_iteration", 1000),
    override("min_iter_time_s", 0),
    *[k if k.name != "training_intensity" else K("training_intensity", None, "Not used by DreamerV3: "
      "set training_ratio.", _use_training_ratio)
      for k in replay_keys(buffer_size=10 ** 6 // 64, prioritized_replay=False, learning_starts=1024,
                           target_network_update_freq=0)
      if k.name != "prioritized_replay"],
    K("prioritized_replay", False, "DreamerV3 replays sequences uniformly.",
      not_available("needs sequence priorities from the world model's loss", False)),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class DreamerV3Trainer(OffPolicyTrainer):
    """DreamerV3: an RSSM world model and an actor-critic trained in its imagination.

    What follows the paper (arXiv:2301.04104): discrete latents (`num_latents` x
    `num_classes` categoricals, straight-through sampling, 1% unimix), symlog vector inputs and
    reconstruction targets, two-hot symlog reward and critic heads over 255 bins, a continue
    head, free bits (1 nat) with KL balancing (dynamics 0.5, representation 0.1), imagination
    of 15 steps, lambda-returns (0.95, gamma 0.997), advantages divided by max(1, S) with S the
    EMA (0.99) of the returns' 5th-95th percentile range, an entropy bonus of 3e-4, a slow
    critic (EMA 0.02 per update) the critic is regularised towards, Reinforce gradients for
    every action space, Adam at 1e-4 (model) and 3e-5 (actor, critic), the model sizes XS-XL
    (`model_size`), `training_ratio` as the replay ratio.

    Departures from the paper, stated:

    - The GRU is torch's `GRUCell` (not the paper's LayerNorm GRU with block-diagonal weights)
      and the initial state h0 is zeros, not learned.
    - Replayed sequences start from the zero state, cut from whole episodes
      (`batch_mode: complete_episodes`, replay/sequences.py), not from stored latents.
    - One gradient clip (`grad_clip`, 100 by norm) for all three networks; the paper clips
      the world model at 1000 and uses an adaptive scheme in later versions.
    - No LaProp / AGC optimiser tricks of later releases; plain Adam.
    - The image decoder is a plain MSE on pixels scaled to [-0.5, 0.5]; images must be square
      with a side divisible by 16.
    - Box actions: a Normal with tanh mean and std in [0.1, 1], clipped to [-1, 1] (the
      sampler unsquashes them to the env's bounds).
    - The replay buffer holds `buffer_size` sequences (not steps); no prioritised replay.

    Measured on the shared 2-core development machine (XS, CartPole-v1): see
    `benchmarks/dreamerv3.py` and docs/benchmarks.md for the wall time per 1k env steps.
    """

    _name = "DreamerV3"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = DreamerV3TorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        validate_sequence_replay(self._name, config)
        if config["model"].get("use_lstm") or config["model"].get("use_attention"):
            raise ValueError("DreamerV3's memory is its RSSM: set model.use_lstm and model.use_attention False")

    def replay_items(self, policy_id: str, batch: SampleBatch, gamma: float) -> SampleBatch:
        """Sequences of `batch_length` steps, no burn-in, one-step rewards (replay/sequences.py);
        no recorded states: every sequence is filtered from the zero state."""
        return replay_sequences(batch, max_seq_len=self.config["batch_length"], burn_in=0, n_step=1, gamma=gamma,
                                num_states=0)

    def replay_batch_items(self) -> int:
        return self.config["batch_size"]

    def replayed_steps(self, replayed: SampleBatch) -> int:
        return replayed_sequence_steps(replayed)

    def updates_owed(self, steps_sampled: int) -> int:
        """`training_ratio` replayed steps per sampled step, an update replaying
        `batch_size * batch_length` steps; the fraction carries over."""
        cfg = self.config
        self._update_credit += steps_sampled * float(cfg["training_ratio"]) / (cfg["batch_size"] * cfg["batch_length"])
        n = int(math.floor(self._update_credit))
        self._update_credit -= n
        return n


class DreamerTrainer(DreamerV3Trainer):
    """`run: Dreamer`: trains DreamerV3 (the version RLlib 2.x's Dreamer became)."""

    _name = "Dreamer"

    def setup(self, config: dict) -> None:
        logger.warning("'Dreamer' trains DreamerV3 (arXiv:2301.04104), the version that replaced Dreamer (V1); "
                       "use 'run: DreamerV3' to silence this note")
        super().setup(config)


__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "DreamerTrainer", "DreamerV3Trainer"]
