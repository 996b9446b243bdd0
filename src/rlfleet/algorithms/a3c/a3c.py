"""A3C: asynchronous advantage actor-critic (Mnih et al. 2016). Each worker samples and
computes the gradient of the actor-critic loss on its own samples; the learner applies each
gradient as it arrives and sends the new weights back to that worker only, which then
computes its next gradient while the others' are being applied."""
from __future__ import annotations

from functools import partial
from typing import Any, Dict, List, Tuple

from rlfleet.algorithms.a2c.a2c import ACTOR_CRITIC_KEYS
from rlfleet.algorithms.a2c.a2c_policy import A2CTorchPolicy
from rlfleet.config import ConfigKey, algorithm_config, int_at_least, override
from rlfleet.exploration.stochastic_sampling import resolve_exploration_class
from rlfleet.rollout.postprocessing import check_gae_needs_critic
from rlfleet.rollout.worker_pools import worker_pool
from rlfleet.trainer import Trainer

K = ConfigKey

ALGO_KEYS: List[ConfigKey] = ACTOR_CRITIC_KEYS + [
    override("rollout_fragment_length", 10),
    override("min_iter_time_s", 5),
    # RLlib 1.x samples in a background thread here; rlfleet does not by default: that
    # thread and the gradient computation would share one torch model (and its cached values).
    override("sample_async", False),
    K("grads_per_step", 100, "Gradients applied per training step (each from one worker's sample batch).",
      int_at_least(1)),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


def sample_and_compute_gradients(worker) -> Tuple[Dict[str, Any], Dict[str, Any], int, int]:
    """On a worker: one sample batch and, per trainable policy, the gradient of its loss.

    Returns:
        `({policy_id: gradients}, {policy_id: learner info}, env steps, agent steps)`.
    """
    batch = worker.sample().as_multi_agent()
    to_train = set(worker.policies_to_train)
    grads, infos = {}, {}
    for pid, policy_batch in batch.policy_batches.items():
        if pid in to_train and policy_batch.count > 0:
            grads[pid], stats = worker.get_policy(pid).compute_gradients(policy_batch)
            infos[pid] = {"learner_stats": stats}
    return grads, infos, batch.env_steps(), batch.agent_steps()


class A3CTrainer(Trainer):
    """Asynchronous advantage actor-critic."""

    _name = "A3C"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = A2CTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        check_gae_needs_critic(config)
        kind = (config.get("exploration_config") or {}).get("type")
        if kind is not None and resolve_exploration_class(kind).overrides("on_learn_on_batch"):
            # Its networks learn where the policy learns on batches; A3C's workers send gradients instead.
            raise ValueError(f"exploration_config.type {kind!r} learns from the train batches, which A3C never "
                             "builds (its workers compute gradients); use A2C or PPO")

    def setup(self, config: dict) -> None:
        super().setup(config)
        # === wiring: the workers' gradients in this process or on Ray, chosen here once ===
        self.pool = worker_pool(self.workers)

    def training_step(self) -> Dict[str, Any]:
        learner_info: Dict[str, Any] = {}
        local = self.workers.local_worker()
        applied = 0
        while applied < self.config["grads_per_step"]:
            # === sample + gradients: on every worker at once ===
            self.pool.submit(sample_and_compute_gradients, max_in_flight=1)
            for index, (grads, infos, env_steps, agent_steps) in self.pool.ready_results(timeout_s=None):
                # === learn: apply each gradient as it arrives ===
                for pid, policy_grads in grads.items():
                    stats = local.get_policy(pid).apply_gradients(policy_grads)
                    infos[pid]["learner_stats"].update(stats)
                    self.counters["num_agent_steps_trained"] += agent_steps
                learner_info.update(infos)
                self.count_sampled(env_steps, agent_steps)
                self.counters["num_env_steps_trained"] += env_steps
                applied += 1
                # === sync: the new weights to this worker only ===
                self.pool.sync_worker(index, partial(local.get_weights, list(grads)), self._global_vars())
        return learner_info
