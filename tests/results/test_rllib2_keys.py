"""RLlib 2.x's result names beside the 1.x ones: computed once (rlfleet/results/rllib2_keys.py),
equal to their 1.x counterparts after real PPO iterations (with evaluation, and with two
policies), addressable with "/" as stop criteria are, and left out of progress.csv."""
from __future__ import annotations

import csv
import math

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.cli import lookup_result
from rlfleet.env.multi_agent_env import make_multi_agent
from rlfleet.results.logger import flatten_dict
from rlfleet.results.rllib2_keys import add_rllib2_keys, is_rllib2_copy
from rlfleet.results.result_values import excluded_from_csv

TINY_PPO = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64,
            "num_sgd_iter": 1, "rollout_fragment_length": 200, "model": {"fcnet_hiddens": [16]}, "seed": 0}
EPISODE_PAIRS = [("episode_return_mean", "episode_reward_mean"), ("episode_return_min", "episode_reward_min"),
                 ("episode_return_max", "episode_reward_max"), ("episode_len_mean", "episode_len_mean"),
                 ("num_episodes", "episodes_this_iter")]


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_add_rllib2_keys_unit():
    result = {"episode_reward_mean": 3.0, "episode_reward_min": 1.0, "episode_reward_max": 5.0,
              "episode_len_mean": 3.0, "episodes_this_iter": 2, "policy_reward_mean": {"p": 1.5},
              "num_env_steps_sampled": 10, "num_agent_steps_sampled": 20, "num_env_steps_trained": 8,
              "num_agent_steps_trained": 16,
              "evaluation": {"episode_reward_mean": 7.0, "episodes_this_iter": 1},
              "info": {"learner": {"p": {"learner_stats": {"vf_loss": 0.5, "note": "x"}, "num_nonfinite_updates": 0,
                                         "fast_path": "numpy"}}}}
    add_rllib2_keys(result)
    assert result["env_runners"]["episode_return_mean"] == 3.0
    assert result["env_runners"]["num_episodes"] == 2
    assert result["env_runners"]["module_episode_returns_mean"] == {"p": 1.5}
    assert result["evaluation"]["env_runners"] == {"episode_return_mean": 7.0, "num_episodes": 1}
    assert (result["num_env_steps_sampled_lifetime"], result["num_agent_steps_sampled_lifetime"],
            result["num_env_steps_trained_lifetime"], result["num_agent_steps_trained_lifetime"]) == (10, 20, 8, 16)
    assert result["learners"] == {"p": {"vf_loss": 0.5, "num_nonfinite_updates": 0}}  # numbers only
    assert lookup_result(result, "learners/p/vf_loss") == 0.5
    before = flatten_dict(result)
    add_rllib2_keys(result)  # idempotent
    assert flatten_dict(result) == before
    # The copy has its own per-policy dict.
    result["env_runners"]["module_episode_returns_mean"]["p"] = 0.0
    assert result["policy_reward_mean"] == {"p": 1.5}


def test_rllib2_copies_are_not_csv_columns():
    for key in ("env_runners/episode_return_mean", "learners/default_policy/vf_loss",
                "num_env_steps_sampled_lifetime", "evaluation/env_runners/episode_return_mean"):
        assert is_rllib2_copy(key) and excluded_from_csv(key), key
    for key in ("episode_reward_mean", "evaluation/episode_reward_mean", "info/learner/default_policy/learner_stats/vf_loss",
                "num_env_steps_sampled", "custom_metrics/env_runners"):
        assert not is_rllib2_copy(key) and not excluded_from_csv(key), key


def test_ppo_iterations_carry_the_2x_names(tmp_path):
    trainer = PPOTrainer(config=dict(TINY_PPO, evaluation_interval=2, evaluation_num_episodes=2),
                         logdir=str(tmp_path))
    try:
        results = [trainer.train() for _ in range(2)]
    finally:
        trainer.stop()
    for result in results:
        runners = result["env_runners"]
        for new, old in EPISODE_PAIRS:
            assert _same(runners[new], result[old]), (new, runners[new], result[old])
            assert _same(lookup_result(result, f"env_runners/{new}"), result[old])
        assert result["num_env_steps_sampled_lifetime"] == result["timesteps_total"] == result["num_env_steps_sampled"]
        assert result["num_agent_steps_sampled_lifetime"] == result["agent_timesteps_total"]
        assert result["num_env_steps_trained_lifetime"] == result["info"]["num_env_steps_trained"]
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert stats and {k: result["learners"]["default_policy"][k] for k in stats} == stats
        assert "fast_path" not in result["learners"]["default_policy"]
    assert "evaluation" not in results[0]
    evaluation = results[1]["evaluation"]
    assert evaluation["env_runners"]["num_episodes"] == evaluation["episodes_this_iter"] == 2
    for new, old in EPISODE_PAIRS:
        assert lookup_result(results[1], f"evaluation/env_runners/{new}") == evaluation[old]
    # progress.csv: one column per quantity, under its 1.x name.
    with open(tmp_path / "progress.csv") as f:
        header = next(csv.reader(f))
    assert "episode_reward_mean" in header and "info/learner/default_policy/learner_stats/vf_loss" in header
    assert not [k for k in header if is_rllib2_copy(k)]


def test_two_policies_each_under_learners(tmp_path):
    config = dict(TINY_PPO, env=make_multi_agent("CartPole-v1"), env_config={"num_agents": 2},
                  multiagent={"policies": {"p0", "p1"}, "policy_mapping_fn": lambda agent_id, *a, **k: f"p{agent_id}"})
    trainer = PPOTrainer(config=config, logdir=str(tmp_path))
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert sorted(result["learners"]) == ["p0", "p1"]
    for pid in ("p0", "p1"):
        stats = result["info"]["learner"][pid]["learner_stats"]
        assert {k: lookup_result(result, f"learners/{pid}/{k}") for k in stats} == stats
        assert result["env_runners"]["module_episode_returns_mean"][pid] == result["policy_reward_mean"][pid]
    assert result["num_agent_steps_sampled_lifetime"] == result["agent_timesteps_total"] > \
        result["num_env_steps_sampled_lifetime"]
