"""CQL: the conservative penalty against NumPy, learning Pendulum from data written by
`output` (a scripted swing-up controller), Q pushed down off the data, and the Lagrangian
alpha'."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from rlfleet.algorithms.cql import CQLTrainer
from rlfleet.algorithms.cql.cql_policy import conservative_gap
from rlfleet.policy.policy import Policy
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch


class SwingUpPendulum(Policy):
    """Energy pumping, then a PD controller near the top, plus Gaussian noise of `sigma` on
    the normalized action. Mean return ~-140 (sigma 0.3) vs ~-1200 to -1500 random."""

    def __init__(self, observation_space, action_space, config):
        super().__init__(observation_space, action_space, config)
        self.sigma = float(config.get("scripted_sigma", 0.3))
        self.rng = np.random.default_rng(config.get("seed"))

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None, prev_reward_batch=None,
                        info_batch=None, episodes=None, explore=None, timestep=None, **kwargs):
        obs = np.asarray(obs_batch, np.float64)
        cos, sin, speed = obs[:, 0], obs[:, 1], obs[:, 2]
        # theta'' = 15 sin(theta) + 3 u: E = speed^2 / 2 + 15 (cos - 1) is 0 upright at rest,
        # and dE/dt = 3 u speed, so push along the speed while E < 0.
        energy = 0.5 * speed ** 2 + 15.0 * (cos - 1.0)
        pump = np.where(energy < 0, 2.0 * np.sign(speed + 1e-3), -0.5 * np.sign(speed))
        torque = np.where(cos > 0.85, -(10.0 * np.arctan2(sin, cos) + 2.0 * speed), pump)
        actions = np.clip(torque / 2.0 + self.sigma * self.rng.normal(size=torque.shape), -1.0, 1.0)
        return actions[:, None].astype(np.float32), [], {}

    def learn_on_batch(self, samples):
        return {"learner_stats": {}}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


@pytest.fixture(scope="module")
def pendulum_data(tmp_path_factory):
    """20 episodes (4000 rows, one episode per line) of the swing-up controller, via `output`."""
    from rlfleet.algorithms.pg import PGTrainer

    out = str(tmp_path_factory.mktemp("cql") / "pendulum")
    trainer = PGTrainer(env="Pendulum-v1", logdir=out + "_log", config={
        "output": out, "seed": 0, "train_batch_size": 200, "rollout_fragment_length": 200, "log_sys_usage": False,
        "multiagent": {"policies": {"default_policy": PolicySpec(SwingUpPendulum, None, None, {})},
                       "policies_to_train": []}})
    returns = []
    while trainer.counters["num_env_steps_sampled"] < 4000:
        returns.append(trainer.train()["episode_reward_mean"])
    trainer.stop()
    assert returns[-1] > -250, returns  # the data is good
    return out


# Small nets and few sampled actions so that ~3000 updates fit the CI budget; a shorter
# horizon (gamma 0.95) and faster targets let Q settle within them (as
# tuned_examples/cql/pendulum-cql.yaml, which learns from SAC-written data).
FAST = {"Q_model": {"fcnet_hiddens": [64, 64]}, "policy_model": {"fcnet_hiddens": [64, 64]}, "num_actions": 4,
        "train_batch_size": 128, "initial_alpha": 0.1, "tau": 0.05, "gamma": 0.95, "input_evaluation": [],
        "optimization": {"actor_learning_rate": 1e-3, "critic_learning_rate": 3e-3, "entropy_learning_rate": 1e-3},
        "log_sys_usage": False}


def test_conservative_gap_matches_numpy():
    rng = np.random.default_rng(0)
    q_ood, q_data = rng.normal(size=(5, 6)), rng.normal(size=5)
    for temp in (1.0, 0.3):
        lse = np.log(np.exp(q_ood / temp).sum(1))
        expected = temp * lse.mean() - q_data.mean()
        got = conservative_gap(torch.as_tensor(q_ood), torch.as_tensor(q_data), temp)
        assert abs(float(got) - expected) < 1e-9


@pytest.mark.slow
def test_cql_learns_pendulum_from_output_files_and_keeps_q_low_off_the_data(pendulum_data, tmp_path):
    trainer = CQLTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={
        **FAST, "input": pendulum_data, "seed": 0, "bc_iters": 1000, "timesteps_per_iteration": 400,
        "min_iter_time_s": 0, "evaluation_interval": 1, "evaluation_num_episodes": 5,
        "evaluation_config": {"input": "sampler", "explore": False}})
    evals, penalties = [], []
    while trainer.get_policy().num_grad_updates < 3000:
        result = trainer.train()
        evals.append(result["evaluation"]["episode_reward_mean"])
        penalties.append(result["info"]["learner"]["default_policy"]["learner_stats"]["cql_penalty"])
    policy = trainer.get_policy()
    assert trainer.counters["num_env_steps_sampled"] >= 3000  # rows read from the files
    assert all(p > 0 for p in penalties), penalties
    # Random actions score ~-1200 to -1500 on Pendulum; the data's controller ~-140.
    assert max(evals[-3:]) > -700 and np.mean(evals[-3:]) > -1000, evals

    # Q of the logged actions stands above Q of uniformly random actions in the same states.
    rows = trainer.local_replay_buffer.sample(2000)
    model = policy.model
    obs = torch.as_tensor(rows[SB.OBS])
    with torch.no_grad():
        q_data = model.q(model.q_net, obs, torch.as_tensor(rows[SB.ACTIONS]))
        q_rand = model.q(model.q_net, obs, torch.rand((len(obs), 1), generator=torch.Generator().manual_seed(0)) * 2 - 1)
    assert float(q_data.mean()) > float(q_rand.mean()) + 1.0, (float(q_data.mean()), float(q_rand.mean()))
    trainer.stop()


def test_lagrangian_tunes_alpha_prime(pendulum_data, tmp_path):
    trainer = CQLTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={
        **FAST, "input": pendulum_data, "seed": 1, "lagrangian": True, "lagrangian_thresh": 1.0, "bc_iters": 5,
        "learning_starts": 0, "timesteps_per_iteration": 0, "min_iter_time_s": 0})
    policy = trainer.get_policy()
    assert set(policy.optimizers) == {"critic", "actor", "alpha", "alpha_prime"}
    assert float(policy.model.log_alpha_prime.detach()) == 0.0
    stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
    # The gap starts above the threshold, so alpha' (the penalty's weight) grows.
    assert stats["cql_penalty"] > 1.0 and stats["alpha_prime_value"] > 1.0, stats
    assert "log_alpha_prime" in dict(policy.model.named_parameters())
    trainer.stop()


def test_cql_refuses_discrete_actions_and_bad_keys(tmp_path):
    with pytest.raises(ValueError, match="CQL supports Box action spaces only"):
        CQLTrainer(env="CartPole-v1", logdir=str(tmp_path), config={"log_sys_usage": False})
    with pytest.raises(ValueError, match="num_actions"):
        CQLTrainer(env="Pendulum-v1", logdir=str(tmp_path), config={"num_actions": 0})
