"""Curiosity (ICM): the intrinsic reward and losses against NumPy, the reward added before
advantages, the ICM learning where the policy learns (PPO, PG, A2C, single- and
multi-agent, local and remote workers), intrinsic and extrinsic returns reported apart,
the fast-path plan, checkpoints, and clear errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.a2c import A2CTrainer
from rlfleet.algorithms.a3c import A3CTrainer
from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import validate_config
from rlfleet.exploration.curiosity import INTRINSIC_REWARDS, Curiosity
from rlfleet.exploration.epsilon_greedy import EpsilonGreedy
from rlfleet.exploration.stochastic_sampling import StochasticSampling
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
# Small nets: the tests check the plumbing and the maths, not the reference's sizes.
SMALL = {"type": "Curiosity", "feature_dim": 8, "inverse_net_hiddens": [16], "forward_net_hiddens": [16]}
# Deterministic 4x4 FrozenLake: one-hot observations (Discrete(16)), reward only at the goal.
FROZEN = {"env": "FrozenLake-v1", "env_config": {"is_slippery": False}}
PPO_SMALL = {"seed": 0, "train_batch_size": 128, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
             "rollout_fragment_length": 64, "model": {"fcnet_hiddens": [16]}}


def make_policy(trainer_cls, obs_space, action_space, **config):
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, config)
    validate_config(cfg)
    cfg["worker_index"] = 0
    return trainer_cls._policy_class(obs_space, action_space, cfg)


def linear_policy(action_space=gym.spaces.Discrete(3), **exploration):
    """A PPO policy whose ICM nets are single linear layers (NumPy can restate them)."""
    obs_space = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    config = {**SMALL, "feature_net_config": {"fcnet_hiddens": []}, "inverse_net_hiddens": [],
              "forward_net_hiddens": [], "eta": 0.7, "beta": 0.3, **exploration}
    return make_policy(PPOTrainer, obs_space, action_space, seed=1, exploration_config=config)


def transitions(n=12, seed=0, action_space=gym.spaces.Discrete(3)):
    rng = np.random.default_rng(seed)
    action_space.seed(seed)
    return SampleBatch({
        SB.OBS: rng.uniform(-1, 1, (n, 5)).astype(np.float32),
        SB.NEXT_OBS: rng.uniform(-1, 1, (n, 5)).astype(np.float32),
        SB.ACTIONS: np.stack([action_space.sample() for _ in range(n)]),
        SB.REWARDS: rng.normal(size=n).astype(np.float32),
        SB.EPS_ID: np.repeat([7, 8], n // 2), SB.DONES: np.arange(n) == n - 1,
    })


def linear(weights, prefix, x):
    return x @ weights[f"{prefix}.weight"].T + weights[f"{prefix}.bias"]


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_intrinsic_reward_and_losses_match_numpy():
    policy = linear_policy()
    icm = policy.exploration
    assert isinstance(icm, Curiosity) and isinstance(icm.sub_exploration, StochasticSampling)
    w = {k[len("exploration."):]: v.astype(np.float64) for k, v in policy.get_weights().items()
         if k.startswith("exploration.")}
    batch = transitions()
    # The feature net with no hidden layers is its logits layer; the ICM nets are single layers.
    feature = next(k[:-len(".weight")] for k in w if k.startswith("feature_net.") and k.endswith(".weight")
                   and w[k].shape[0] == 8)
    phi, next_phi = linear(w, feature, batch[SB.OBS]), linear(w, feature, batch[SB.NEXT_OBS])
    one_hot = np.eye(3)[batch[SB.ACTIONS]]
    predicted = linear(w, "forward_net.0", np.concatenate([phi, one_hot], 1))
    error = 0.5 * ((predicted - next_phi) ** 2).sum(1)
    inverse = -log_softmax(linear(w, "inverse_net.0", np.concatenate([phi, next_phi], 1)))[
        np.arange(12), batch[SB.ACTIONS]].mean()

    extrinsic = batch[SB.REWARDS].copy()
    out = icm.postprocess_trajectory(policy, batch.copy())
    np.testing.assert_allclose(out[INTRINSIC_REWARDS], 0.7 * error, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out[SB.REWARDS], extrinsic + 0.7 * error, rtol=1e-4, atol=1e-6)
    with torch.no_grad():
        _, forward_loss, inverse_loss = icm.losses(*icm._tensors(batch))
    np.testing.assert_allclose(float(forward_loss), error.mean(), rtol=1e-4)
    np.testing.assert_allclose(float(inverse_loss), inverse, rtol=1e-4)


def test_multidiscrete_actions_one_hot_per_component_and_the_icm_learns():
    space = gym.spaces.MultiDiscrete([2, 3])
    policy = linear_policy(space, inverse_net_hiddens=[16], forward_net_hiddens=[16], lr=0.01)
    batch = transitions(action_space=space)
    out = policy.exploration.postprocess_trajectory(policy, batch.copy())
    assert out[INTRINSIC_REWARDS].shape == (12,) and (out[INTRINSIC_REWARDS] > 0).all()
    first = None
    for _ in range(30):  # the same transitions again and again: both models fit them
        policy.exploration.on_learn_on_batch(policy, out)
        first = first or dict(policy.exploration.get_info())
    last = policy.exploration.get_info()
    # (the forward loss alone may grow: the inverse loss spreads the features it predicts)
    assert last["curiosity_loss"] < 0.5 * first["curiosity_loss"]
    assert last["curiosity_inverse_loss"] < 0.5 * first["curiosity_inverse_loss"]
    # one episode of the two ended in the batch: its intrinsic return is reported
    np.testing.assert_allclose(last["intrinsic_return_mean"], out[INTRINSIC_REWARDS][6:].sum(), rtol=1e-5)


def test_the_icm_takes_one_adam_step_per_episode_piece_as_the_reference():
    # The reference learns in postprocessing: one step per episode's piece of an env's
    # fragment. Short episodes: many steps per fragment (the forward model keeps up).
    policy = make_policy(PPOTrainer, gym.spaces.Box(-1.0, 1.0, (5,), np.float32), gym.spaces.Discrete(3),
                         rollout_fragment_length=4, exploration_config=SMALL)  # pieces of <= 4 rows
    icm = policy.exploration
    batch = transitions(n=14)
    batch[SB.EPS_ID] = np.array([1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 4, 4, 5, 5])
    assert icm.trajectory_pieces(batch) == [(0, 2), (2, 6), (6, 9), (9, 10), (10, 12), (12, 14)]
    batch["agent_index"] = np.array([0, 1] * 7)  # two agents' rows interleaved: every row its own piece
    assert icm.trajectory_pieces(batch) == [(i, i + 1) for i in range(14)]
    del batch["agent_index"], batch[SB.EPS_ID]
    assert icm.trajectory_pieces(batch) == [(0, 4), (4, 8), (8, 12), (12, 14)]
    batch[SB.EPS_ID] = np.repeat(np.arange(7), 2)  # seven 2-step episodes: seven steps (one per 4 rows: four)
    icm.on_learn_on_batch(policy, icm.postprocess_trajectory(policy, batch))
    assert all(state["step"] == 7 for state in icm.get_state()["optimizer"]["state"].values())


def test_intrinsic_return_carries_episodes_across_batches():
    icm = linear_policy().exploration
    batch = transitions()
    intrinsic = np.arange(12, dtype=np.float64)
    assert icm._episode_returns(intrinsic[:6], batch[SB.EPS_ID][:6], np.zeros(6, bool), None) == []
    done = np.zeros(6, bool)
    done[2] = True  # episode 7 ends after 3 more rows, episode 8 is cut
    assert icm._episode_returns(intrinsic[6:], np.array([7, 7, 7, 8, 8, 8]), done, None) == \
        [intrinsic[:9].sum()]


def test_ppo_adds_the_intrinsic_reward_before_advantages_and_reports_both_returns():
    trainer = PPOTrainer(env=FROZEN["env"], config={**PPO_SMALL, "env_config": FROZEN["env_config"],
                                                    "exploration_config": SMALL})
    try:
        worker = trainer.workers.local_worker()
        policy = worker.get_policy()
        batch = worker.sample()
        assert (batch[INTRINSIC_REWARDS] > 0).all()
        # FrozenLake pays only at the goal: what `rewards` holds beyond the extrinsic 0/1 is intrinsic
        extrinsic = batch[SB.REWARDS] - batch[INTRINSIC_REWARDS]
        assert np.allclose(extrinsic, np.round(extrinsic), atol=1e-5)
        # advantages were computed from the rewards with the intrinsic part: redo them without it
        from rlfleet.rollout.postprocessing import compute_advantages

        again = compute_advantages(SampleBatch({**batch, SB.REWARDS: extrinsic}), np.zeros(batch.count),
                                   trainer.config["gamma"], trainer.config["lambda"])
        assert not np.allclose(again[SB.ADVANTAGES], batch[SB.ADVANTAGES])
        before = {k: v.copy() for k, v in policy.exploration.get_weights().items()}
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        for key in ("curiosity_loss", "curiosity_forward_loss", "curiosity_inverse_loss", "intrinsic_reward_mean",
                    "extrinsic_reward_mean", "intrinsic_return_mean"):
            assert np.isfinite(stats[key]), key
        assert stats["intrinsic_reward_mean"] > 0 and 0 <= result["episode_reward_mean"] <= 1
        after = policy.exploration.get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)  # the ICM learned
        # The ICM only reshapes rewards: the NumPy actor and learner still serve PPO.
        info = result["info"]["learner"]["default_policy"]
        assert info["fast_path_actor"] == "numpy" and info["fast_path"] == "numpy"
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer_cls,extra", [
    (PGTrainer, {"train_batch_size": 128, "rollout_fragment_length": 64}),
    (A2CTrainer, {"train_batch_size": 128, "rollout_fragment_length": 64, "microbatch_size": 64,
                    "min_iter_time_s": 0}),
])
def test_pg_and_a2c_learn_the_icm(trainer_cls, extra):
    trainer = trainer_cls(env=FROZEN["env"], config={"seed": 0, "env_config": FROZEN["env_config"],
                                                     "exploration_config": SMALL, **extra})
    try:
        before = {k: v.copy() for k, v in trainer.get_policy().exploration.get_weights().items()}
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert stats["intrinsic_reward_mean"] > 0 and np.isfinite(stats["curiosity_loss"])
        after = trainer.get_policy().exploration.get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)
    finally:
        trainer.stop()


def test_multi_agent_policies_each_have_their_icm():
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    config = {**PPO_SMALL, "env_config": {"num_agents": 2}, "exploration_config": SMALL,
              "multiagent": {"policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, *a, **k: f"p{aid}"}}
    trainer = PPOTrainer(env=MultiAgentCartPole, config=config)
    try:
        result = trainer.train()
        for pid in ("p0", "p1"):
            stats = result["info"]["learner"][pid]["learner_stats"]
            assert stats["intrinsic_reward_mean"] > 0 and np.isfinite(stats["intrinsic_return_mean"])
        w0, w1 = (trainer.get_policy(p).exploration.get_weights() for p in ("p0", "p1"))
        assert any(not np.array_equal(w0[k], w1[k]) for k in w0)
    finally:
        trainer.stop()


def test_remote_workers_postprocess_with_the_learners_icm(ray_session):
    trainer = PPOTrainer(env=FROZEN["env"], config={**PPO_SMALL, "num_workers": 1, "env_config": FROZEN["env_config"],
                                                    "exploration_config": SMALL})
    try:
        result = trainer.train()
        assert result["info"]["learner"]["default_policy"]["learner_stats"]["intrinsic_reward_mean"] > 0
        local = trainer.get_policy().get_weights()
        remote = trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())[-1]
        icm_keys = [k for k in local if k.startswith("exploration.")]
        assert icm_keys and all(np.array_equal(local[k], remote[k]) for k in icm_keys)
    finally:
        trainer.stop()


def test_checkpoint_keeps_the_icm_weights_and_optimizer(tmp_path):
    config = {**PPO_SMALL, "env_config": FROZEN["env_config"], "exploration_config": SMALL}
    trainer = PPOTrainer(env=FROZEN["env"], config=config)
    restored = PPOTrainer(env=FROZEN["env"], config=config)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        restored.restore(path)
        a, b = trainer.get_policy().exploration, restored.get_policy().exploration
        wa, wb = a.get_weights(), b.get_weights()
        assert all(np.array_equal(wa[k], wb[k]) for k in wa)
        assert b._optimizer is None and b._pending_optimizer_state is not None  # built where it first learns
        moments = a.get_state()["optimizer"]["state"]
        saved = b.get_state()["optimizer"]["state"]
        assert moments.keys() == saved.keys() and all(
            np.array_equal(moments[i]["exp_avg"], saved[i]["exp_avg"]) for i in moments)
        r1, r2 = trainer.train(), restored.train()  # same state, same seed stream: the same update
        s1, s2 = (r["info"]["learner"]["default_policy"]["learner_stats"] for r in (r1, r2))
        assert s1["curiosity_loss"] == pytest.approx(s2["curiosity_loss"], rel=1e-5)
    finally:
        trainer.stop()
        restored.stop()


def test_evaluation_with_another_exploration_and_a_plain_model_import(tmp_path):
    config = {**PPO_SMALL, "env_config": FROZEN["env_config"], "exploration_config": SMALL, "evaluation_interval": 1,
              "evaluation_num_episodes": 2, "evaluation_config": {"exploration_config": {"type": "StochasticSampling"}}}
    trainer = PPOTrainer(env=FROZEN["env"], config=config)
    try:
        assert trainer.train()["evaluation"]["episodes_this_iter"] >= 2  # the ICM's weights were not the eval's
        plain = make_policy(PPOTrainer, trainer.get_policy().observation_space, trainer.get_policy().action_space,
                            model=PPO_SMALL["model"])
        icm_before = trainer.get_policy().exploration.get_weights()
        trainer.get_policy().set_weights(plain.get_weights())  # the model alone: the ICM stays as it was
        icm_after = trainer.get_policy().exploration.get_weights()
        assert all(np.array_equal(icm_before[k], icm_after[k]) for k in icm_before)
    finally:
        trainer.stop()


def test_sub_exploration_acts_and_the_plan_says_why_torch_acts():
    obs, act = gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2)
    policy = make_policy(PPOTrainer, obs, act, seed=0, exploration_config={
        **SMALL, "sub_exploration": {"type": "EpsilonGreedy", "epsilon_timesteps": 10}})
    assert isinstance(policy.exploration.sub_exploration, EpsilonGreedy)
    assert policy.fast_plan.actor == "torch" and "EpsilonGreedy" in policy.fast_plan.actor_reason
    actions, _, _ = policy.compute_actions(np.zeros((5, 4), np.float32), explore=True, timestep=3)
    assert actions.shape == (5,) and policy.exploration.last_timestep == 3


def test_clear_errors():
    box, disc = gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2)
    with pytest.raises(ValueError, match="'Curiosity' needs a Discrete or MultiDiscrete action space"):
        make_policy(PPOTrainer, box, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), exploration_config=SMALL)
    with pytest.raises(ValueError, match="feature_net_config has unknown model keys \\['fcnet_hidens'\\]"):
        make_policy(PPOTrainer, box, disc, exploration_config={**SMALL, "feature_net_config": {"fcnet_hidens": []}})
    with pytest.raises(ValueError, match="recurrent net .*feature_net_config.use_lstm: False"):
        make_policy(PPOTrainer, box, disc, model={"use_lstm": True}, exploration_config=SMALL)
    with pytest.raises(ValueError, match="exploration_config.beta must be in \\[0, 1\\]"):
        make_policy(PPOTrainer, box, disc, exploration_config={**SMALL, "beta": 1.5})
    with pytest.raises(ValueError, match="exploration_config.inverse_net_hiddens must be a list of positive"):
        make_policy(PPOTrainer, box, disc, exploration_config={**SMALL, "inverse_net_hiddens": [0]})
    with pytest.raises(ValueError, match="forward_net_activation: Unknown activation 'relux'"):
        make_policy(PPOTrainer, box, disc, exploration_config={**SMALL, "forward_net_activation": "relux"})
    with pytest.raises(ValueError, match="exploration_config.etta.*'Curiosity' takes"):
        PPOTrainer(env="CartPole-v1", config={"exploration_config": {**SMALL, "etta": 0.1}})
    with pytest.raises(ValueError, match="A3C never builds"):
        A3CTrainer(env="CartPole-v1", config={"exploration_config": SMALL})


def test_ppo_with_curiosity_finds_the_only_reward_of_frozenlake(tmp_path):
    # The tuned example (seed 0): ~5 s; plain PPO stays at 0 over the same budget (see the file).
    from rlfleet.registry import get_trainer_class
    from tests.helpers import load_tuned_example, train_until

    example = load_tuned_example("ppo/frozenlake-curiosity.yaml")
    trainer = get_trainer_class(example.run)(config=example.config, env=example.env, logdir=str(tmp_path))
    try:
        result, history = train_until(trainer, reward=example.stop["episode_reward_mean"],
                                      max_timesteps=example.stop["timesteps_total"])
        assert result["episode_reward_mean"] >= example.stop["episode_reward_mean"], history
        env = gym.make(example.env, **example.config["env_config"])
        obs, _ = env.reset(seed=0)
        for _ in range(example.config["horizon"]):  # greedy: straight to the goal
            obs, reward, terminated, _, _ = env.step(trainer.compute_single_action(obs, explore=False))
            if terminated:
                break
        assert reward == 1.0
    finally:
        trainer.stop()


def test_minigrid_view_is_the_flat_egocentric_view():
    pytest.importorskip("minigrid")
    from rlfleet.env.examples.minigrid_view import MiniGridView

    env = MiniGridView({"id": "MiniGrid-Empty-8x8-v0", "max_steps": 4})
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (147,) and obs.dtype == np.float32 and env.observation_space.contains(obs)
    views = {tuple(env.step(1)[0]) for _ in range(3)}  # turning right changes what the agent sees
    assert len(views) == 3
    *_, truncated, _ = env.step(2)
    assert truncated  # the fourth step: max_steps goes to MiniGrid
    with pytest.raises(gym.error.Error):
        MiniGridView({"id": "MiniGrid-NoSuchGrid-v0"})
    # one-hot (object, colour, state per cell, as the reference's curiosity test) and the direction
    coded = MiniGridView({"id": "MiniGrid-Empty-8x8-v0", "one_hot": True, "direction": True})
    plain, _ = MiniGridView({"id": "MiniGrid-Empty-8x8-v0"}).reset(seed=0)
    obs, _ = coded.reset(seed=0)
    assert coded.observation_space.shape == (49 * 20 + 4,) and coded.observation_space.contains(obs)
    cells = obs[:-4].reshape(49, 20)
    indices = np.stack([cells[:, :11].argmax(1), cells[:, 11:17].argmax(1), cells[:, 17:].argmax(1)], 1)
    assert cells.sum() == 49 * 3 and np.array_equal(indices.reshape(-1), plain)
    assert obs[-4:].tolist() == [1, 0, 0, 0]  # facing right, MiniGrid's direction 0
    assert coded.step(1)[0][-4:].tolist() == [0, 1, 0, 0]  # turned right: facing down
    with pytest.raises(ValueError, match="env_config.one_hot must be true or false"):
        MiniGridView({"id": "MiniGrid-Empty-8x8-v0", "one_hot": "yes"})
    navigation = MiniGridView({"id": "MiniGrid-Empty-8x8-v0", "num_actions": 3})
    assert navigation.action_space == gym.spaces.Discrete(3)
    with pytest.raises(ValueError, match="env_config.num_actions must be in \\[1, 7\\]"):
        MiniGridView({"id": "MiniGrid-Empty-8x8-v0", "num_actions": 8})


def test_minigrid_benchmark_arms_differ_only_in_the_exploration_config():
    # issue 31's MiniGrid must-show compares PPO + Curiosity with plain PPO at the same budget:
    # benchmarks/minigrid_curiosity.py's plain arm is the file's config less exploration_config.
    import yaml

    from benchmarks import minigrid_curiosity as bench

    with open(bench.DEFAULT_FILE) as f:
        (exp,) = yaml.safe_load(f).values()
    overrides = {"env_config": {"max_steps": 32}, "lr": 0.0005}
    curious, plain = (bench.arm_config(exp["config"], arm, 2, overrides) for arm in ("curiosity", "plain"))
    assert curious["exploration_config"]["type"] == "Curiosity" and "exploration_config" not in plain
    assert {**plain, "exploration_config": curious["exploration_config"]} == curious
    assert curious["seed"] == 2 and curious["lr"] == 0.0005
    assert curious["env_config"] == {**exp["config"]["env_config"], "max_steps": 32}  # updated, not replaced
    assert exp["config"]["entropy_coeff"] > 0  # both arms: see the file's header
