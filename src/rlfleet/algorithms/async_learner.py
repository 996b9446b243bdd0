"""Moved: the asynchronous data flow of IMPALA and APPO now lives in `rlfleet.algorithms.common`
(async_sampling, learner_thread, mix_in_replay, learner_lock); this module re-exports its public
names so that old imports keep working."""
from rlfleet.algorithms.common.async_sampling import ASYNC_KEYS, AsyncSamplingTrainer
from rlfleet.algorithms.common.learner_lock import LearnerLock
from rlfleet.algorithms.common.learner_thread import LearnerThread, MinibatchBuffer
from rlfleet.algorithms.common.mix_in_replay import MixInReplay

__all__ = ["ASYNC_KEYS", "AsyncSamplingTrainer", "LearnerLock", "LearnerThread", "MinibatchBuffer", "MixInReplay"]
