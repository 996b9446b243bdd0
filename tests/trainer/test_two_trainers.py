"""Two trainers in one process never disturb each other: seeded runs of different algorithms
and seeds, with their `train()` calls interleaved, give exactly the numbers (results and
weights, bit for bit) each gives alone, even when the code between the calls draws from and
reseeds the global random generators (Python's, NumPy's and torch's default generator)."""
from __future__ import annotations

import math
import random
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import torch

from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
from rlfleet.registry import get_trainer_class

SMALL_NET = {"fcnet_hiddens": [16]}
OFF_POLICY = {"learning_starts": 64, "train_batch_size": 32, "timesteps_per_iteration": 128,
              "rollout_fragment_length": 8, "min_iter_time_s": 0}
RUNS: Dict[str, Tuple[str, Any, dict]] = {
    "PPO-s0": ("PPO", "CartPole-v1", {
        "seed": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 50, "train_batch_size": 200,
        "sgd_minibatch_size": 64, "num_sgd_iter": 2, "observation_filter": "MeanStdFilter", "model": SMALL_NET}),
    "DQN-s1": ("DQN", "CartPole-v1", dict(OFF_POLICY, seed=1, prioritized_replay=True, n_step=3, hiddens=[16],
                                          model=SMALL_NET)),
    "PPO-s5": ("PPO", "CartPole-v1", {  # the same class as PPO-s0, another seed and config
        "seed": 5, "lr": 1e-3, "num_envs_per_worker": 1, "rollout_fragment_length": 100, "train_batch_size": 200,
        "sgd_minibatch_size": 50, "num_sgd_iter": 3, "model": {"fcnet_hiddens": [8, 8]}}),
    "SAC-s2": ("SAC", "Pendulum-v1", dict(OFF_POLICY, seed=2, Q_model=SMALL_NET, policy_model=SMALL_NET)),
    "PG-ma-s3": ("PG", MultiAgentCartPole, {
        "seed": 3, "rollout_fragment_length": 50, "train_batch_size": 100, "model": SMALL_NET,
        "env_config": {"num_agents": 2},
        "multiagent": {"policies": {"p0", "p1"}, "policy_mapping_fn": "by_agent"}}),
}
ITERATIONS = 2


def _policy_map(agent_id, episode, worker, **kwargs):
    return f"p{agent_id}"


def _build(name: str, tmp_path):
    algo, env, config = RUNS[name]
    config = dict(config)
    if "multiagent" in config:
        config["multiagent"] = dict(config["multiagent"], policy_mapping_fn=_policy_map)
    return get_trainer_class(algo)(env=env, config=config, logdir=str(tmp_path / name))


def _fingerprint(result: dict) -> tuple:
    """What a result says about the run (NaN compared as a value)."""
    def num(x):
        return "nan" if isinstance(x, float) and math.isnan(x) else x

    return (result["training_iteration"], result["timesteps_total"], result["episodes_total"],
            num(result["episode_reward_mean"]), tuple(result["hist_stats"].get("episode_reward", ())),
            tuple(sorted((k, num(v)) for k, v in (result.get("policy_reward_mean") or {}).items())))


def _weights(trainer) -> Dict[str, np.ndarray]:
    out = {}
    for pid, weights in trainer.get_weights().items():
        for key, value in weights.items():
            out[f"{pid}/{key}"] = np.asarray(value).copy()
    return out


def _disturb_global_rngs(step: int) -> None:
    """What other code in the process may do between two train() calls."""
    random.seed(step)
    np.random.seed(step)
    torch.manual_seed(step)
    random.random(), np.random.rand(7), torch.rand(7), torch.randn(3, 3)


def _run_alone(name: str, tmp_path) -> Tuple[List[tuple], Dict[str, np.ndarray]]:
    trainer = _build(name, tmp_path / "alone")
    try:
        results = [_fingerprint(trainer.train()) for _ in range(ITERATIONS)]
        return results, _weights(trainer)
    finally:
        trainer.stop()


@pytest.mark.parametrize("first, second", [("PPO-s0", "DQN-s1"), ("PPO-s0", "PPO-s5"), ("SAC-s2", "PG-ma-s3")])
def test_interleaved_trainers_match_each_alone(first, second, tmp_path):
    alone = {name: _run_alone(name, tmp_path) for name in (first, second)}
    # Built one after the other, trained in turns, the global RNGs reseeded in between.
    trainers = {name: _build(name, tmp_path / "together") for name in (first, second)}
    results: Dict[str, List[tuple]] = {first: [], second: []}
    try:
        for i in range(ITERATIONS):
            for name, trainer in trainers.items():
                _disturb_global_rngs(100 * i + len(name))
                results[name].append(_fingerprint(trainer.train()))
        for name, trainer in trainers.items():
            assert results[name] == alone[name][0], name
            weights = _weights(trainer)
            assert sorted(weights) == sorted(alone[name][1]), name
            for key, value in weights.items():
                np.testing.assert_array_equal(value, alone[name][1][key], err_msg=f"{name}: {key}")
    finally:
        for trainer in trainers.values():
            trainer.stop()
