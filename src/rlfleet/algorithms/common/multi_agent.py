"""Train-batch helpers for on-policy algorithms that learn one or many policies.

`training_step` reads as: sample a MultiAgentBatch of `train_batch_size` steps (env or
agent steps, per `multiagent.count_steps_by`), then learn on each trainable policy's part.
A single-agent run is the one-policy case (`default_policy`).
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.trainer import Trainer


def sample_train_batch(trainer) -> MultiAgentBatch:
    """Samples at least `train_batch_size` steps and updates the trainer's sampled counters.

    Steps are env steps, or agent steps when `multiagent.count_steps_by` is "agent_steps".
    """
    target = int(trainer.config["train_batch_size"])
    if MultiAgentSettings.from_config(trainer.config).count_agent_steps:
        parts: List[MultiAgentBatch] = []
        steps = 0
        while steps < target:
            part = trainer.workers.sample(1).as_multi_agent()  # one round
            steps += part.agent_steps()
            parts.append(part)
        batch = MultiAgentBatch.concat_samples(parts)
    else:
        batch = trainer.workers.sample(target).as_multi_agent()
    trainer.count_sampled(batch.env_steps(), batch.agent_steps())
    return batch


def trainable_batches(trainer, batch: MultiAgentBatch) -> Iterator[Tuple[str, SampleBatch]]:
    """`(policy_id, its batch)` for each policy in `policies_to_train` that got samples;
    counts them as trained (agent steps per policy, env steps once)."""
    local = trainer.workers.local_worker()
    to_train = set(local.policies_to_train)
    for pid, policy_batch in batch.policy_batches.items():
        if pid in to_train and policy_batch.count > 0:
            trainer.counters["num_agent_steps_trained"] += policy_batch.count
            yield pid, policy_batch
    trainer.counters["num_env_steps_trained"] += batch.env_steps()


class SingleUpdateTrainer(Trainer):
    """Trainer base whose step is one gradient update per train batch (PG, MARWIL and BC):
    an algorithm sets its policy and keys; `training_step` below is the whole loop."""

    samples_train_batch = True

    def training_step(self) -> Dict[str, Any]:
        # === sample (offline input: read) ===
        batch = sample_train_batch(self)
        # === learn: one `learn_on_batch` per trainable policy ===
        info = {pid: self.get_policy(pid).learn_on_batch(policy_batch)
                for pid, policy_batch in trainable_batches(self, batch)}
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return info
