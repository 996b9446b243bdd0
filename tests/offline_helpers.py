"""A scripted CartPole controller and a helper that writes its experience with `output`.

The controller acts with P(push right) = sigmoid(k * w . obs), so it logs real action
probabilities (what off-policy estimation needs); with `epsilon` it takes a uniformly random
action that often (a worse behaviour policy, for MARWIL vs BC)."""
from __future__ import annotations

import glob
from typing import List

import numpy as np

from rlfleet.policy.policy import Policy
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import SampleBatch

W = np.array([0.1, 0.3, 3.0, 1.0])


class ScriptedCartPole(Policy):
    """A good stochastic CartPole controller (mean return ~500 with k=5, epsilon=0)."""

    def __init__(self, observation_space, action_space, config):
        super().__init__(observation_space, action_space, config)
        self.k = float(config.get("scripted_k", 5.0))
        self.epsilon = float(config.get("scripted_epsilon", 0.0))
        self.rng = np.random.default_rng(config.get("seed"))

    def probs(self, obs: np.ndarray) -> np.ndarray:
        p_right = 1.0 / (1.0 + np.exp(-self.k * (np.asarray(obs, np.float64) @ W)))
        p_right = (1 - self.epsilon) * p_right + self.epsilon * 0.5
        return np.stack([1 - p_right, p_right], axis=1)

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore=None, timestep=None, **kwargs):
        probs = self.probs(obs_batch)
        actions = (self.rng.random(len(probs)) < probs[:, 1]).astype(np.int64)
        p = probs[np.arange(len(actions)), actions].astype(np.float32)
        return actions, [], {SampleBatch.ACTION_PROB: p, SampleBatch.ACTION_LOGP: np.log(p)}

    def learn_on_batch(self, samples):
        return {"learner_stats": {}}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


def write_scripted_cartpole(out_dir: str, steps: int, *, epsilon: float = 0.0, seed: int = 0, **config) -> List[str]:
    """Samples `steps` CartPole steps with the scripted controller, written by `output`."""
    from rlfleet.algorithms.pg import PGTrainer

    trainer = PGTrainer(env="CartPole-v1", config={
        "output": out_dir, "seed": seed, "train_batch_size": 1024, "rollout_fragment_length": 64,
        "num_envs_per_worker": 4, "log_sys_usage": False,
        "multiagent": {"policies": {"default_policy": PolicySpec(ScriptedCartPole, None, None, {
            "scripted_epsilon": epsilon})}, "policies_to_train": []},
        **config,
    }, logdir=out_dir + "_log")
    try:
        results = []
        while trainer.counters["num_env_steps_sampled"] < steps:
            results.append(trainer.train())
    finally:
        trainer.stop()
    return sorted(glob.glob(out_dir + "/*.json")), results
