"""ParameterNoise: noise on the acting network's weights only while acting, re-drawn per
episode, the adaptive scale converging to its target distance, evaluation without noise,
the scale kept in checkpoints, and clear errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.ddpg import DDPGTrainer
from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.algorithms.td3 import TD3Trainer
from rlfleet.config import validate_config
from rlfleet.exploration.epsilon_greedy import EpsilonGreedy
from rlfleet.exploration.noise import OrnsteinUhlenbeckNoise
from rlfleet.exploration.parameter_noise import ParameterNoise

CARTPOLE = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-8.0, 8.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32))


def make_policy(trainer_cls, spaces, **config):
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, config)
    validate_config(cfg)
    cfg["worker_index"] = 0
    return trainer_cls._policy_class(spaces[0], spaces[1], cfg)


def obs_batch(spaces, n=64, seed=0):
    return np.random.default_rng(seed).normal(size=(n, spaces[0].shape[0])).astype(np.float32)


def weights(policy):
    return {k: v.copy() for k, v in policy.get_weights().items()}


def same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("trainer_cls,spaces", [(DQNTrainer, CARTPOLE), (DDPGTrainer, PENDULUM),
                                                (TD3Trainer, PENDULUM)])
def test_noise_only_while_acting_and_none_without_explore(trainer_cls, spaces):
    policy = make_policy(trainer_cls, spaces, seed=0, exploration_config={"type": "ParameterNoise"})
    assert isinstance(policy.exploration, ParameterNoise)
    sub = EpsilonGreedy if spaces is CARTPOLE else OrnsteinUhlenbeckNoise
    assert isinstance(policy.exploration.sub_exploration, sub)
    obs = obs_batch(spaces)
    before = weights(policy)
    with torch.inference_mode():
        clean = policy.model({"obs": torch.as_tensor(obs)}, [], None)[0].numpy()
    _, _, noisy = policy.compute_actions(obs, explore=True, timestep=20000)
    assert not np.allclose(noisy["action_dist_inputs"], clean, atol=1e-3)  # acted with noisy weights
    assert same(before, weights(policy))  # ... which are clean again, bit for bit
    greedy, _, extra = policy.compute_actions(obs, explore=False, timestep=20000)
    assert np.array_equal(extra["action_dist_inputs"], clean)
    if spaces is CARTPOLE:
        assert (greedy == clean.argmax(-1)).all()
    # Only the acting network is perturbed (DQN's online net, DDPG's actor): no critic, no target.
    names = [name for name, _ in policy.exploration._params]
    assert names and all(n.startswith("q_net." if spaces is CARTPOLE else "actor.") for n in names)


def test_noise_is_redrawn_at_each_episode_start_by_the_sampler():
    trainer = DQNTrainer(env="CartPole-v1", config={"seed": 1, "batch_mode": "complete_episodes",
                                                    "rollout_fragment_length": 100,
                                                    "exploration_config": {"type": "ParameterNoise"}})
    try:
        worker = trainer.workers.local_worker()
        exploration = worker.get_policy().exploration
        draws = []
        original = exploration._draw_noise
        exploration._draw_noise = lambda: (draws.append(1), original())
        before = weights(worker.get_policy())
        batch = worker.sample()
        # One draw per episode (the next episode has started, its draw waits for its first step).
        episodes = len(np.unique(batch["eps_id"]))
        assert episodes >= 3 and len(draws) == episodes
        assert same(before, weights(worker.get_policy()))
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer_cls,spaces,sub,target,starts", [
    (DDPGTrainer, PENDULUM, {"type": "GaussianNoise", "random_timesteps": 0, "final_scale": 1.0}, 0.2, [0.3]),
    (DQNTrainer, CARTPOLE, {"type": "EpsilonGreedy", "epsilon_schedule": 0.1}, -np.log(1 - 0.1 + 0.05),
     [0.3, 0.005]),
])
def test_the_adaptive_scale_converges_near_its_target_distance(trainer_cls, spaces, sub, target, starts):
    obs = {"obs": torch.as_tensor(obs_batch(spaces, n=16))}
    settled = []
    for initial_stddev in starts:  # from above and from below the stddev it settles at
        policy = make_policy(trainer_cls, spaces, seed=0, exploration_config={
            "type": "ParameterNoise", "initial_stddev": initial_stddev, "sub_exploration": sub})
        pn = policy.exploration
        assert pn.target_distance() == pytest.approx(target)
        distances, stddevs = [], []
        with torch.inference_mode():
            for episode in range(400):  # what sampling does: episode start, then acting
                pn.on_episode_start()
                pn.forward_for_acting(policy.model, obs, [], True, 10)
                if pn.last_distance is not None:
                    distances.append(pn.last_distance)
                    stddevs.append(pn.stddev)
        late = np.array(distances[-120:])
        # Settled where the distance straddles its target (stddev goes up by 1.01 below it,
        # down above it): about half the episodes land on each side, the median near it.
        assert 0.25 < np.mean(late <= target) < 0.75, (initial_stddev, stddevs[::40])
        assert np.median(late) == pytest.approx(target, rel=0.35)
        settled.append(np.median(stddevs[-120:]))
    assert max(settled) / min(settled) < 1.5  # the same place from either side


def test_the_scale_survives_a_checkpoint(tmp_path):
    config = {"seed": 0, "exploration_config": {"type": "ParameterNoise", "initial_stddev": 0.5}}
    trainer = DQNTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path / "a"))
    try:
        exploration = trainer.get_policy().exploration
        exploration.stddev = 0.123
        exploration.sub_exploration.last_timestep = 777
        path = trainer.save(str(tmp_path / "ckpt"))
    finally:
        trainer.stop()
    restored = DQNTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path / "b"))
    try:
        assert restored.get_policy().exploration.stddev == 0.5
        restored.restore(path)
        exploration = restored.get_policy().exploration
        assert exploration.stddev == pytest.approx(0.123)
        assert exploration.sub_exploration.last_timestep == 777
        assert exploration.get_info()["cur_stddev"] == pytest.approx(0.123)
    finally:
        restored.stop()


def test_learning_reads_clean_weights():
    # One update of a policy that acted with noise equals the update of one that did not.
    config = dict(seed=0, exploration_config={"type": "ParameterNoise"})
    acted, fresh = make_policy(DQNTrainer, CARTPOLE, **config), make_policy(DQNTrainer, CARTPOLE, **config)
    obs = obs_batch(CARTPOLE, n=32)
    acted.compute_actions(obs, explore=True, timestep=20000)
    from rlfleet.policy.sample_batch import SampleBatch
    from rlfleet.replay import N_STEPS, PRIO_WEIGHTS

    batch = SampleBatch({SampleBatch.OBS: obs, SampleBatch.NEXT_OBS: obs[::-1].copy(),
                         SampleBatch.ACTIONS: np.arange(32) % 2, SampleBatch.REWARDS: np.ones(32, np.float32),
                         SampleBatch.TERMINATEDS: np.zeros(32, bool), N_STEPS: np.ones(32, np.int64),
                         PRIO_WEIGHTS: np.ones(32, np.float32)})
    acted.learn_on_batch(batch.copy())
    fresh.learn_on_batch(batch.copy())
    assert same(weights(acted), weights(fresh))


def test_errors_name_the_type_the_space_and_the_fix():
    with pytest.raises(ValueError, match="'ParameterNoise' needs a Discrete .* or Box .* got MultiDiscrete"):
        ParameterNoise(gym.spaces.MultiDiscrete([2, 2]), model=torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match="'ParameterNoise' perturbs the acting network .* FullyConnectedNetwork"):
        make_policy(PPOTrainer, CARTPOLE, exploration_config={"type": "ParameterNoise"})
    with pytest.raises(ValueError, match="SACModel names none"):
        make_policy(SACTrainer, PENDULUM, exploration_config={"type": "ParameterNoise"})
    with pytest.raises(ValueError, match="'ParameterNoise' and `noisy: True`"):
        make_policy(DQNTrainer, CARTPOLE, noisy=True, exploration_config={"type": "ParameterNoise"})
    with pytest.raises(ValueError, match="initial_stddev must be > 0"):
        make_policy(DQNTrainer, CARTPOLE, exploration_config={"type": "ParameterNoise", "initial_stddev": 0})
    with pytest.raises(ValueError, match="did you mean 'exploration_config.sub_exploration.final_epsilon'"):
        DQNTrainer(env="CartPole-v1", config={"exploration_config": {
            "type": "ParameterNoise", "sub_exploration": {"type": "EpsilonGreedy", "final_epsilo": 0.1}}})
    with pytest.raises(ValueError, match="sub_exploration needs a 'type'"):
        make_policy(DQNTrainer, CARTPOLE, exploration_config={"type": "ParameterNoise",
                                                              "sub_exploration": {"final_epsilon": 0.1}})
    with pytest.raises(ValueError, match="sub_exploration must be an exploration config other than ParameterNoise"):
        make_policy(DQNTrainer, CARTPOLE, exploration_config={"type": "ParameterNoise",
                                                              "sub_exploration": {"type": "ParameterNoise"}})
    with pytest.raises(ValueError, match="did you mean 'exploration_config.initial_stddev'"):
        DQNTrainer(env="CartPole-v1", config={"exploration_config": {"type": "ParameterNoise",
                                                                     "initial_stdev": 0.5}})


def test_multi_agent_policies_redraw_their_noise_per_episode():
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    config = {"seed": 0, "batch_mode": "complete_episodes", "rollout_fragment_length": 60,
              "env_config": {"num_agents": 2}, "exploration_config": {"type": "ParameterNoise"},
              "multiagent": {"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, *args, **kwargs: f"p{aid}"}}
    trainer = DQNTrainer(env=MultiAgentCartPole, config=config)
    try:
        worker = trainer.workers.local_worker()
        draws = {}
        for pid in ("p0", "p1"):
            exploration = worker.get_policy(pid).exploration
            draws[pid] = []
            exploration._draw_noise = (lambda log, original: lambda: (log.append(1), original()))(
                draws[pid], exploration._draw_noise)
        batch = worker.sample()
        episodes = len(np.unique(batch.policy_batches["p0"]["eps_id"]))
        assert episodes >= 2 and len(draws["p0"]) == len(draws["p1"]) == episodes
    finally:
        trainer.stop()
