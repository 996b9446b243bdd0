"""Decision Transformer (`run: DT`): the trainer, its keys and its loop (see `DTTrainer`)."""
from __future__ import annotations

import math
from typing import Any, Dict, List

import numpy as np

from rlfleet.algorithms.common.multi_agent import sample_train_batch, trainable_batches
from rlfleet.algorithms.dt.dt_policy import DTTorchPolicy
from rlfleet.algorithms.dt.segments import EpisodeAssembler, SegmentBuffer
from rlfleet.config import (ConfigKey, algorithm_config, boolean, dict_value, finite_number, int_at_least, number_above,
                            number_in, optional, override)
from rlfleet.trainer import Trainer
from rlfleet.utils.seeding import derive_seed

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = [
    K("target_return", None, "The return the policy is conditioned on when acting (the first return-to-go); "
      "required. Evaluation may set its own in evaluation_config.", optional(finite_number, "required: set it")),
    K("max_ep_len", 1000, "Longest episode the timestep embedding covers (RLlib 2.x's horizon); later steps share "
      "its last row.", int_at_least(1)),
    K("rtg_scale", 1000.0, "Returns-to-go enter the model divided by this: about the magnitude of the data's returns "
      "(the paper's 1000 for Gym tasks with returns in the thousands).", number_above(0)),
    K("embed_dim", 128, "Width of the token embeddings and transformer blocks.", int_at_least(1)),
    K("num_layers", 2, "Transformer blocks.", int_at_least(1)),
    K("num_heads", 1, "Attention heads (must divide embed_dim).", int_at_least(1)),
    K("embed_layer_norm", True, "LayerNorm over the token embeddings (the paper's); False keeps the "
      "observations' scale in their embedding.", boolean),
    K("embed_pdrop", 0.1, "Dropout on the token embeddings.", number_in(0, 1)),
    K("resid_pdrop", 0.1, "Dropout in the transformer blocks (residual branches and attention weights).",
      number_in(0, 1)),
    K("attn_pdrop", 0.1, "Dropout on attention weights; must equal resid_pdrop (torch's encoder layer has one "
      "rate).", number_in(0, 1)),
    K("loss_coef_actions", 1.0, "Weight of the action loss (MSE for Box, cross-entropy for Discrete).",
      number_in(0)),
    K("loss_coef_obs", 0.0, "Weight of the next-observation prediction loss.", number_in(0)),
    K("loss_coef_returns_to_go", 0.0, "Weight of the next return-to-go prediction loss.", number_in(0)),
    K("warmup_steps", 0, "Updates over which the learning rate rises linearly from lr / warmup_steps to lr; "
      "0: none.", int_at_least(0)),
    K("grad_clip", 0.25, "Clip the global gradient norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    K("replay_buffer_config", {"capacity": 20}, "The segment buffer: capacity (whole episodes held; a new one "
      "replaces a random one when full).", dict_value()),
    K("replay_buffer_config.capacity", 20, "Whole episodes the segment buffer holds.", int_at_least(1)),
    override("lr", 1e-4),
    override("optimizer", {"weight_decay": 1e-4, "betas": [0.9, 0.95]}),
    # 64 segments of K = 20 steps per update, the paper's batch.
    override("train_batch_size", 1280),
    override("timesteps_per_iteration", 5000),
    override("num_workers", 0),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


def evaluation_target_return(config: dict) -> Any:
    """The target return evaluation conditions on: `evaluation_config`'s, else the top level's."""
    extra = config.get("evaluation_config") or {}
    return extra.get("target_return", config.get("target_return"))


class DTTrainer(Trainer):
    """Decision Transformer (Chen et al. 2021, arXiv:2106.01345): return-conditioned behaviour
    cloning with a causal transformer, learnt from offline episodes (`input`: files written by
    `output`, `minari:<id>`, a custom reader; the env sampler works too).

    The loop (`training_step`): read `train_batch_size` rows from the input, gather them into
    whole episodes (segments.py), keep up to `replay_buffer_config.capacity` episodes, sample
    `ceil(rows read / K)` segments of `K = model.max_seq_len` steps and take one AdamW step on
    them (dt_policy.py). Returns come from evaluation in the env (`evaluation_interval`,
    `evaluation_config: {"input": "sampler"}`), where the policy conditions on `target_return`
    (`evaluation_config` may set another); results report it as `evaluation/target_return`
    beside the achieved `evaluation/episode_reward_mean`.

    Defaults follow RLlib 2.x's DTConfig (embed_dim 128, num_layers 2, num_heads 1, dropouts 0.1,
    lr 1e-4, AdamW weight decay 1e-4 and betas (0.9, 0.95), action loss only, 20 episodes held)
    except where stated:

    - Context length `model.max_seq_len`: 20, the paper's K for the Gym tasks (RLlib 2.x: 5).
    - `grad_clip` 0.25, the paper's (RLlib 2.x: none); `warmup_steps` (the paper's linear warmup
      of the learning rate, 10000 updates there) defaults to 0, as RLlib 2.x has none.
    - `max_ep_len` (RLlib 2.x's required `horizon`) defaults to 1000, the paper's; timesteps past
      it share the embedding's last row instead of failing.
    - Returns-to-go enter the model divided by `rtg_scale` (1000, the paper's scale for Gym).
    - `embed_layer_norm` (default True, the paper's LayerNorm over the token embeddings) can be
      switched off: with a linear embedding of a few observation features the LayerNorm keeps
      little of their scale (Pendulum's swing-up, cloned from expert data with K = 1: about
      -510 with it, -260 without, 1000 updates).
    - The timestep embedding starts at GPT-2's N(0, 0.02) (torch's default is N(0, 1)).
    - Observations are not normalised by the dataset's statistics (the paper does so for Gym).
    - Segments end at a step drawn uniformly over the steps held and are padded at the front,
      so that short contexts are those of an episode's start, as when acting.
    - Attention: `torch.nn.TransformerEncoder` (pre-LN blocks, GELU) applies one dropout rate to
      attention weights and residual branches, so `attn_pdrop` must equal `resid_pdrop`.
    - The segment buffer is not part of checkpoints: a restored trainer refills it from the input.
    - Acting is deterministic for Box actions; Discrete actions are sampled when `explore` is
      on (greedy with `explore: False`).

    Measured (docs/benchmarks.md, "Decision Transformer"): CartPole from mixed data learns
    (tuned_examples/dt/cartpole-dt.yaml). On Pendulum from half expert, half random-torque data
    (benchmarks/decision_transformer.py, 4,000 updates) DT conditioned on the expert's mean
    return reaches 0.96-0.98 of the expert's level on 3 of 3 seeds, follows lower targets
    within a few % of the expert-random range, and BC stays at the random level. Two things
    decided it: the data must show the expert near the states the learned policy drifts into
    (a noise-free expert balancing exactly upright does not, and the policy then falls; noise
    on the expert's actions fixes it), and for a Markov task a context of 1
    (`model: {max_seq_len: 1}`): with 5, the earlier actions tell the model which half an
    episode came from, and it copies its own errors (0.47 against 0.98). Keep `rtg_scale` near
    the data's return range (returns-to-go enter the model divided by it).
    """

    _name = "DT"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = DTTorchPolicy
    samples_train_batch = True

    def validate_algorithm_config(self, config: dict) -> None:
        if config["target_return"] is None:
            raise ValueError("DT conditions its actions on a target return: set 'target_return' (e.g. the best "
                             "return in the data, or the return you want)")
        if config["attn_pdrop"] != config["resid_pdrop"]:
            raise ValueError(f"'attn_pdrop': {config['attn_pdrop']} differs from 'resid_pdrop': "
                             f"{config['resid_pdrop']}; torch.nn.TransformerEncoderLayer applies one dropout rate to "
                             "both, so set them equal")
        if config["embed_dim"] % config["num_heads"]:
            raise ValueError(f"'num_heads': {config['num_heads']} must divide 'embed_dim': {config['embed_dim']}")

    def setup(self, config: dict) -> None:
        self._assemblers: Dict[str, EpisodeAssembler] = {}
        self._buffers: Dict[str, SegmentBuffer] = {}

    def segment_buffer(self, policy_id: str) -> SegmentBuffer:
        """The policy's buffer of whole episodes (made on first use)."""
        if policy_id not in self._buffers:
            cfg = self.config
            rng = np.random.default_rng(derive_seed(cfg.get("seed"), "dt_segments", policy_id))
            self._buffers[policy_id] = SegmentBuffer(cfg["replay_buffer_config"]["capacity"],
                                                     cfg["model"]["max_seq_len"], cfg["max_ep_len"], rng)
            self._assemblers[policy_id] = EpisodeAssembler()
        return self._buffers[policy_id]

    def training_step(self) -> Dict[str, Any]:
        # === read: at least train_batch_size rows of the input ===
        batch = sample_train_batch(self)
        k = int(self.config["model"]["max_seq_len"])
        info: Dict[str, Any] = {}
        for pid, rows in trainable_batches(self, batch):
            # === gather whole episodes, then learn on segments of them ===
            buffer = self.segment_buffer(pid)
            for episode in self._assemblers[pid].add(rows):
                buffer.add(episode)
            if len(buffer):  # none yet: the first episodes are still arriving
                info[pid] = self.get_policy(pid).learn_on_batch(buffer.sample(math.ceil(rows.count / k)))
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return info

    def evaluate(self) -> Dict[str, Any]:
        """`Trainer.evaluate`, with `evaluation/target_return`: the return it conditioned on."""
        return _with_target(super().evaluate(), self.config)

    def _train_iteration(self, start: float) -> Dict[str, Any]:
        # Evaluation run beside training (evaluation_parallel_to_training) skips `evaluate`.
        return _with_target(super()._train_iteration(start), self.config)


def _with_target(result: Dict[str, Any], config: dict) -> Dict[str, Any]:
    evaluation = result.get("evaluation")
    if isinstance(evaluation, dict):
        target = evaluation_target_return(config)
        evaluation.setdefault("target_return", target)
        if isinstance(evaluation.get("env_runners"), dict):  # RLlib 2.x's name of the same metrics
            evaluation["env_runners"].setdefault("target_return", target)
    return result
