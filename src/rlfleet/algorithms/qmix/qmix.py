"""QMIX (Rashid et al. 2018) and VDN (Sunehag et al. 2017): cooperative multi-agent
Q-learning for a group of agents (`MultiAgentEnv.with_agent_groups`) with one Q-network
shared by the members and a mixer that turns their Q-values into the team's.

The loop is `OffPolicyTrainer.training_step` with sequence replay: every sampled episode is
stored whole (`batch_mode: complete_episodes`), one buffer row per episode (`buffer_size`
counts episodes; an episode longer than `model.max_seq_len` is stored as consecutive
pieces of that length). Each update replays
`train_batch_size` episodes, as RLlib 1.x's QMIX does. The agent network is a GRU by
default (agent_networks.py), its memory run over each replayed episode from its start.
"""
from __future__ import annotations

from typing import List

from rlfleet.algorithms.dqn.dqn import ALGO_KEYS as DQN_KEYS
from rlfleet.algorithms.qmix.agent_networks import AGENT_NETWORKS
from rlfleet.algorithms.qmix.qmix_policy import QMIXTorchPolicy
from rlfleet.algorithms.common.replay_keys import replay_keys
from rlfleet.algorithms.common.sequence_replay import SequenceReplayTrainer, sequence_replay_keys
from rlfleet.config import (ConfigKey, InvalidValue, algorithm_config, boolean, int_at_least, not_available,
                            number_above, number_in, override)
from rlfleet.policy.sample_batch import SampleBatch

K = ConfigKey


def _mixer(v):
    if v not in ("qmix", "vdn", None):
        raise InvalidValue("'qmix' (the monotonic mixing network), 'vdn' (the sum) or None (independent learners)")
    return v


def _agent_network(v):
    if v not in AGENT_NETWORKS:
        raise InvalidValue("'gru' (fc -> GRU -> fc, RLlib 1.x's) or 'mlp' (feed-forward, model.fcnet_hiddens)")
    return v


_DQN = {key.name: key for key in DQN_KEYS}

_UNAVAILABLE = {
    "prioritized_replay": K("prioritized_replay", False, "Prioritized replay; QMIX replays episodes uniformly, as "
                            "RLlib 1.x's QMIX.", not_available("needs episode priorities", False)),
    "n_step": K("n_step", 1, "QMIX learns one-step targets.", not_available("needs n-step team returns", 1)),
    "replay_burn_in": K("replay_burn_in", 0, "QMIX replays whole episodes: no burn-in.",
                        not_available("needs sequences cut inside episodes", 0)),
    "zero_init_states": K("zero_init_states", False, "Replayed pieces start from the memory they acted with (False: "
                          "an episode's first piece from the initial zeros, as RLlib 1.x's whole episodes; a "
                          "later piece of an episode longer than model.max_seq_len from where the previous one "
                          "ended) or from zeros (True).", boolean),
}

ALGO_KEYS: List[ConfigKey] = [
    # RLlib 1.x's QMIX defaults that are DQN's too (epsilon-greedy over 10k steps, lr 5e-4, ...).
    *(_DQN[name] for name in ("exploration_config", "evaluation_config", "timesteps_per_iteration", "lr",
                              "rollout_fragment_length", "num_workers", "min_iter_time_s", "lr_schedule")),
    override("train_batch_size", 32, "Episodes replayed per update (RLlib 1.x's QMIX counts stored items)."),
    override("batch_mode", "complete_episodes"),
    # RLlib 1.x's agent network (as the QMIX paper's) is fc(64) -> GRU(64) -> fc; the MLP ("mlp"): two ReLU
    # layers of its width.
    K("agent_network", "gru", "The members' shared Q-network: 'gru' (fc -> GRU -> fc, model.lstm_cell_size wide, "
      "its memory carried through each episode: RLlib 1.x's) or 'mlp' (ReLU layers of model.fcnet_hiddens, no "
      "memory).", _agent_network),
    override("model.lstm_cell_size", 64),
    override("model.fcnet_hiddens", [64, 64]),
    K("mixer", "qmix", "How the members' Q-values make the team's: 'qmix' (monotonic mixing network conditioned on "
      "the global state), 'vdn' (their sum) or None (independent Q-learners on the team reward).", _mixer),
    K("mixing_embed_dim", 32, "Width of the QMIX mixing network.", int_at_least(1)),
    K("double_q", True, "Double Q-learning: the online net picks each member's target action.", boolean),
    K("optim_alpha", 0.99, "RMSprop's smoothing constant (alpha).", number_in(0, 1)),
    K("optim_eps", 1e-5, "RMSprop's epsilon.", number_above(0)),
    K("grad_norm_clipping", 10.0, "Clip the global gradient norm to this.", number_above(0)),
    *(_UNAVAILABLE.get(k.name, k) for k in replay_keys(buffer_size=10000, prioritized_replay=False)),
    *(_UNAVAILABLE.get(k.name, k) for k in sequence_replay_keys()),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class QMIXTrainer(SequenceReplayTrainer):
    """QMIX / VDN over replayed episodes; the loop is `OffPolicyTrainer.training_step`."""

    _name = "QMIX"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = QMIXTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        super().validate_algorithm_config(config)
        if config["optimizer"]:
            raise ValueError(f"'optimizer': {config['optimizer']!r} holds Adam arguments, but QMIX learns with "
                             "RMSprop: set 'lr', 'optim_alpha' and 'optim_eps' instead")
        for key in ("use_lstm", "use_attention"):
            if config["model"].get(key):
                raise ValueError(f"'model.{key}': True does not apply to QMIX: its agent network is chosen with "
                                 "'agent_network' ('gru', the default and RLlib 1.x's, or 'mlp'); leave "
                                 f"model.{key} False")

    def replay_batch_items(self) -> int:
        return int(self.config["train_batch_size"])


__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "QMIXTrainer"]
