"""MADDPG (rlfleet.algorithms.maddpg): joint (lockstep) transitions, the losses against
NumPy, centralised vs local critics, config refusals, a seeded learning run from its tuned
example, checkpoint round trips and remote workers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.algorithms.maddpg import MADDPGTrainer, agent_policy_id, maddpg_policies
from rlfleet.env.examples.maddpg_envs import MatchTargetEnv, SimpleSpeakerListener
from rlfleet.algorithms.maddpg.joint_batch import joint_transitions
from rlfleet.algorithms.maddpg.maddpg_policy import column
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.replay import PRIO_WEIGHTS
from tests.helpers import load_tuned_example, train_until

SB = SampleBatch
TINY = {"seed": 0, "log_sys_usage": False, "actor_hiddens": [8], "critic_hiddens": [8], "learning_starts": 16,
        "rollout_fragment_length": 16, "train_batch_size": 16}


def _rows(eps, ts, agent, reward_offset):
    n = len(ts)
    return SampleBatch({SB.OBS: np.arange(n, dtype=np.float32)[:, None] + reward_offset,
                        SB.NEXT_OBS: np.arange(1, n + 1, dtype=np.float32)[:, None] + reward_offset,
                        SB.ACTIONS: np.arange(n) % 3, SB.REWARDS: np.ones(n, np.float32) * reward_offset,
                        SB.TERMINATEDS: np.zeros(n, bool), SB.DONES: np.array([False] * (n - 1) + [True]),
                        SB.EPS_ID: np.full(n, eps), SB.T: np.asarray(ts), SB.AGENT_INDEX: np.full(n, agent)})


def test_joint_transitions_join_the_agents_of_each_step_and_drop_unmatched_rows():
    batch = MultiAgentBatch({"p": _rows(7, [0, 1, 2, 3], 0, 1.0), "q": _rows(7, [0, 1, 3], 1, 10.0)}, 4)
    joint, dropped = joint_transitions(batch, ["p", "q"], n_step=2, gammas={"p": 0.5, "q": 0.5})
    assert dropped == 1 and joint.count == 3  # p's step 2 has no partner
    np.testing.assert_array_equal(joint[column("obs", 0)][:, 0], [1, 2, 4])
    np.testing.assert_array_equal(joint[column("obs", 1)][:, 0], [10, 11, 12])
    # n-step returns per agent, over each agent's own trajectory: 1 + 0.5 * 1, ... the last row 1 step
    np.testing.assert_allclose(joint[column("rewards", 0)], [1.5, 1.5, 1.0])
    np.testing.assert_array_equal(joint[column("n_steps", 0)], [2, 2, 1])
    np.testing.assert_array_equal(joint[column("new_obs", 0)][:, 0], [3, 4, 5])


def test_a_policy_that_controls_two_agents_of_an_episode_is_refused():
    rows = SampleBatch.concat_samples([_rows(7, [0, 1], 0, 1.0), _rows(7, [0, 1], 1, 1.0)])
    with pytest.raises(ValueError, match="one policy per agent"):
        joint_transitions(MultiAgentBatch({"p": rows}, 2), ["p"], 1, {"p": 0.9})


def _numpy_mlp(net: torch.nn.Sequential, x: np.ndarray) -> np.ndarray:
    layers = [m for m in net if isinstance(m, torch.nn.Linear)]
    for i, layer in enumerate(layers):
        x = x @ layer.weight.detach().numpy().T + layer.bias.detach().numpy()
        if i < len(layers) - 1:
            x = np.maximum(x, 0.0)
    return x


def test_the_critic_loss_matches_numpy_and_the_actor_gradient_stays_out_of_the_critic(tmp_path):
    trainer = MADDPGTrainer(env=MatchTargetEnv, config=TINY, logdir=str(tmp_path))
    policy = trainer.get_policy("b")
    assert trainer.agents == ["a", "b"] and policy.agent_index == 1 and policy.critic_agents == [0, 1]
    rng = np.random.default_rng(0)
    n = 6
    batch = {column("obs", j): rng.normal(size=(n, 3)).astype(np.float32) for j in (0, 1)}
    batch.update({column("new_obs", j): rng.normal(size=(n, 3)).astype(np.float32) for j in (0, 1)})
    batch.update({column("actions", j): rng.integers(0, 3, n) for j in (0, 1)})
    batch.update({column("new_actions", j): rng.dirichlet(np.ones(3), n).astype(np.float32) for j in (0, 1)})
    batch.update({column("rewards", 1): rng.normal(size=n).astype(np.float32),
                  column("terminateds", 1): np.array([0, 0, 1, 0, 0, 1], bool),
                  column("n_steps", 1): np.array([1, 2, 1, 1, 2, 1]), PRIO_WEIGHTS: np.ones(n, np.float32)})
    tensors = {k: torch.as_tensor(v) for k, v in batch.items()}
    critic_before = [p.detach().clone() for p in policy.model.critic.parameters()]
    losses, stats = policy.loss(policy.model, policy.dist_class, tensors)

    eye = np.eye(3, dtype=np.float32)
    gamma = policy.config["gamma"]
    q_in = np.concatenate([batch["obs_0"], batch["obs_1"], eye[batch["actions_0"]], eye[batch["actions_1"]]], 1)
    next_in = np.concatenate([batch["new_obs_0"], batch["new_obs_1"], batch["new_actions_0"],
                              batch["new_actions_1"]], 1)
    target = batch["rewards_1"] + gamma ** batch["n_steps_1"] * (1 - batch["terminateds_1"]) * _numpy_mlp(
        policy.model.target_critic, next_in)[:, 0]
    expected = np.mean((_numpy_mlp(policy.model.critic, q_in)[:, 0] - target) ** 2)
    assert float(losses["critic"].detach()) == pytest.approx(expected, rel=1e-5)

    losses["actor"].backward()
    assert all(p.grad is None for p in policy.model.critic.parameters())
    assert all(p.grad is not None for p in policy.model.actor.parameters())
    assert all(torch.equal(a, b) for a, b in zip(critic_before, policy.model.critic.parameters()))
    assert "td_error" in stats
    trainer.stop()


def test_local_critics_and_good_or_adversary_policies(tmp_path):
    obs, act = MatchTargetEnv().observation_space, MatchTargetEnv().action_space
    policies = {"adversary_0": PolicySpec(None, obs, act, {}), "b": PolicySpec(None, obs, act, {})}
    mapping = {"a": "adversary_0", "b": "b"}
    config = dict(TINY, adv_policy="ddpg", multiagent={"policies": policies,
                                                       "policy_mapping_fn": lambda aid, *a, **k: mapping[aid]})
    trainer = MADDPGTrainer(env=MatchTargetEnv, config=config, logdir=str(tmp_path / "adv"))
    assert trainer.get_policy("adversary_0").critic_agents == [0]  # DDPG: its own obs and action
    assert trainer.get_policy("b").critic_agents == [0, 1]
    assert trainer.get_policy("adversary_0").model.critic[0].in_features == 3 + 3
    assert trainer.get_policy("b").model.critic[0].in_features == 2 * (3 + 3)
    trainer.train()
    trainer.stop()
    local = MADDPGTrainer(env=MatchTargetEnv, config=dict(TINY, use_local_critic=True), logdir=str(tmp_path / "l"))
    assert [local.get_policy(p).critic_agents for p in ("a", "b")] == [[0], [1]]
    local.stop()


def test_speaker_and_listener_of_different_spaces_learn_through_the_pettingzoo_adapter(tmp_path):
    pytest.importorskip("mpe2")
    trainer = MADDPGTrainer(env=SimpleSpeakerListener, config=TINY, logdir=str(tmp_path))
    assert sorted(trainer.agents) == ["listener_0", "speaker_0"]
    listener = trainer.get_policy("listener_0")
    assert listener.model.critic[0].in_features == (3 + 3) + (11 + 5)
    result = trainer.train()
    info = result["info"]["learner"]["listener_0"]
    assert info["fast_path"] == "torch" and "no NumPy learner" in info["fast_path_reason"]
    assert np.isfinite(info["learner_stats"]["critic_loss"]) and result["num_agent_steps_dropped"] == 0
    trainer.stop()


@pytest.mark.parametrize("overrides, match", [
    ({"agent_id": 0, "multiagent": {"policies": {"a": PolicySpec(None, None, None, {}),
                                                  "b": PolicySpec(None, None, None, {"agent_id": 0})},
                                     "policy_mapping_fn": agent_policy_id}}, r"'agent_id': 0 of policy 'b'"),
    ({"multiagent": {"replay_mode": "independent"}}, "set it to 'lockstep'"),
    ({"use_state_preprocessor": True}, "use_state_preprocessor"),
    ({"compress_observations": True}, "compress_observations"),
    ({"multiagent": {"policies": {"x": PolicySpec(None, None, None, {}), "y": PolicySpec(None, None, None, {})},
                     "policy_mapping_fn": lambda aid, *a, **k: "x" if aid == "a" else "y"}},
     "needs the spaces of policy 'y'"),
])
def test_settings_it_cannot_honour_are_refused_with_the_fix(overrides, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        MADDPGTrainer(env=MatchTargetEnv, config=dict(TINY, **overrides), logdir=str(tmp_path)).stop()


def test_agents_mapped_to_one_policy_are_refused_when_sampled(tmp_path):
    config = dict(TINY, multiagent={"policies": {"p"}, "policy_mapping_fn": lambda aid, *a, **k: "p"})
    trainer = MADDPGTrainer(env=MatchTargetEnv, config=config, logdir=str(tmp_path))
    with pytest.raises(ValueError, match="one policy per agent"):
        trainer.train()
    trainer.stop()


def test_maddpg_policies_gives_each_agent_its_spaces():
    specs = maddpg_policies(MatchTargetEnv())
    assert list(specs) == ["a", "b"] and specs["a"].action_space.n == 3 and agent_policy_id(7) == "7"


def test_maddpg_learns_the_cooperative_match_target_game(tmp_path):
    example = load_tuned_example("maddpg/match-target-maddpg.yaml")
    trainer = MADDPGTrainer(env=example.env, config=dict(example.config, log_sys_usage=False), logdir=str(tmp_path))
    first = trainer.train()["episode_reward_mean"]
    result, history = train_until(trainer, reward=example.stop["episode_reward_mean"],
                                  max_timesteps=example.stop["timesteps_total"])
    trainer.stop()
    assert first < 4.0 and result["episode_reward_mean"] >= example.stop["episode_reward_mean"], history


def test_checkpoint_restores_buffer_and_resumes_bit_identically(tmp_path):
    # 1.5 replayed steps per sampled step: a restored trainer must also resume the fraction of an update owed.
    config = dict(TINY, store_buffer_in_checkpoints=True, training_intensity=1.5)
    a = MADDPGTrainer(env=MatchTargetEnv, config=config, logdir=str(tmp_path / "a"))
    a.train()  # 1.5 updates owed: one made, half of one carried over
    path = a.save()
    b = MADDPGTrainer(env=MatchTargetEnv, config=dict(config, seed=5), logdir=str(tmp_path / "b"))
    b.restore(path)
    for key, value in a.joint_buffer.get_state().items():
        np.testing.assert_array_equal(value, b.joint_buffer.get_state()[key], err_msg=key)
    a.restore(path)
    for _ in range(2):
        ra, rb = a.train(), b.train()
    assert ra["info"]["learner"]["a"]["learner_stats"] == rb["info"]["learner"]["a"]["learner_stats"]
    for pid in ("a", "b"):
        wa, wb = a.get_weights()[pid], b.get_weights()[pid]
        assert all(wa[k].tobytes() == wb[k].tobytes() for k in wa), pid
    a.stop()
    b.stop()


def test_remote_workers_sample_the_joint_replay(ray_session, tmp_path):
    trainer = MADDPGTrainer(env=MatchTargetEnv, config=dict(TINY, num_workers=1), logdir=str(tmp_path))
    for _ in range(2):
        result = trainer.train()
    assert result["num_healthy_workers"] == 1 and result["num_env_steps_trained"] > 0
    assert len(trainer.joint_buffer) == result["num_env_steps_sampled"]
    trainer.stop()


def test_maddpg_keeps_the_off_policy_loop_and_replaces_only_its_steps():
    # One loop for every replay trainer: MADDPG overrides what it stores and replays, not the loop.
    from rlfleet.algorithms.common.off_policy import OffPolicyTrainer

    assert "training_step" not in vars(MADDPGTrainer)
    assert {"store", "ready_to_learn", "learn_from_replay"} <= set(vars(MADDPGTrainer))
    assert MADDPGTrainer.training_step is OffPolicyTrainer.training_step
