"""What several algorithm packages share (the shared loops and their helpers).

- off_policy.py: `OffPolicyTrainer`, the replay loop of DQN, SAC, DDPG, TD3, CQL, MADDPG;
  sequence_replay.py (`SequenceReplayTrainer`) and sequence_learning.py: its recurrent
  variant (R2D2, RNNSAC, QMIX); replay_keys.py: their replay keys; off_policy_common.py:
  helpers of their policies;
- multi_agent.py: `SingleUpdateTrainer` (PG, MARWIL, BC) and the train-batch helpers of the
  on-policy algorithms; sampling.py: sampling for a `training_step`;
- async_sampling.py, learner_thread.py, mix_in_replay.py, learner_lock.py: the asynchronous
  data flow of IMPALA and APPO (sampling beside a learner thread);
- vtrace.py: V-trace targets (IMPALA, APPO); custom_models.py: `model.custom_model` for
  algorithms that build their own networks.

The bases below load on first use, so importing one of these modules alone costs no more
than that module.
"""
from rlfleet.module_aliases import lazy_exports

__all__ = ["ASYNC_KEYS", "AsyncSamplingTrainer", "LearnerLock", "LearnerThread", "MinibatchBuffer", "MixInReplay",
           "OffPolicyTrainer", "SequenceReplayTrainer", "SingleUpdateTrainer", "make_replay_buffer", "sample_train_batch",
           "trainable_batches"]

__getattr__ = lazy_exports(__name__, {
    "ASYNC_KEYS": ("rlfleet.algorithms.common.async_sampling", "ASYNC_KEYS"),
    "AsyncSamplingTrainer": ("rlfleet.algorithms.common.async_sampling", "AsyncSamplingTrainer"),
    "LearnerLock": ("rlfleet.algorithms.common.learner_lock", "LearnerLock"),
    "LearnerThread": ("rlfleet.algorithms.common.learner_thread", "LearnerThread"),
    "MinibatchBuffer": ("rlfleet.algorithms.common.learner_thread", "MinibatchBuffer"),
    "MixInReplay": ("rlfleet.algorithms.common.mix_in_replay", "MixInReplay"),
    "OffPolicyTrainer": ("rlfleet.algorithms.common.off_policy", "OffPolicyTrainer"),
    "SequenceReplayTrainer": ("rlfleet.algorithms.common.sequence_replay", "SequenceReplayTrainer"),
    "SingleUpdateTrainer": ("rlfleet.algorithms.common.multi_agent", "SingleUpdateTrainer"),
    "make_replay_buffer": ("rlfleet.algorithms.common.off_policy", "make_replay_buffer"),
    "sample_train_batch": ("rlfleet.algorithms.common.multi_agent", "sample_train_batch"),
    "trainable_batches": ("rlfleet.algorithms.common.multi_agent", "trainable_batches"),
})
