"""QMIX / VDN: the mixers, the loss against a step-by-step computation, action masks and the
global state in Dict observations, keys and errors, checkpoints, remote workers, and the
two-step game's joint optimum (8) that QMIX finds."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet import register_env
from rlfleet.algorithms.qmix import DEFAULT_CONFIG, QMIXTrainer, QMIXTorchPolicy, QMixer, VDNMixer
from rlfleet.algorithms.qmix.group_layout import GroupLayout
from rlfleet.env.examples.team_envs import two_step_team
from rlfleet.config import merge_configs, validate_config
from rlfleet.env.examples import TwoStepGame
from rlfleet.env.multi_agent_env import ALL, MultiAgentEnv
from rlfleet.models.preprocessors import get_preprocessor
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS
from rlfleet.replay.sequences import replay_sequences
from tests.helpers import load_tuned_example, train_until
from tests.off_policy_helpers import assert_resumes_bit_identically

SB = SampleBatch
TINY = {"seed": 0, "learning_starts": 20, "train_batch_size": 8, "timesteps_per_iteration": 40, "min_iter_time_s": 0,
        "model": {"fcnet_hiddens": [8]}, "mixing_embed_dim": 4}


class MaskedTeamGame(MultiAgentEnv):
    """Two agents with Dict observations ("obs", "state", "action_mask"): agent i may only
    take actions other than i; the env raises on an illegal action. 4-step episodes, reward
    1 when both pick action 2."""

    possible_agents = [0, 1]
    observation_space = gym.spaces.Dict({"obs": gym.spaces.Box(0.0, 1.0, (2,), np.float32),
                                         "state": gym.spaces.Box(0.0, 4.0, (3,), np.float32),
                                         "action_mask": gym.spaces.Box(0.0, 1.0, (3,), np.float32)})
    action_space = gym.spaces.Discrete(3)

    def __init__(self, config=None):
        self.t = 0

    def _obs(self):
        out = {}
        for i in self.possible_agents:
            mask = np.ones(3, np.float32)
            mask[i] = 0.0
            out[i] = {"obs": np.eye(2, dtype=np.float32)[i], "state": np.array([self.t, 1.0, 0.0], np.float32),
                      "action_mask": mask}
        return out

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict):
        for i, a in action_dict.items():
            if int(a) == i:
                raise AssertionError(f"agent {i} took its illegal action {a}")
        self.t += 1
        reward = float(all(int(a) == 2 for a in action_dict.values()))
        done = self.t >= 4
        return (self._obs(), {i: reward / 2 for i in self.possible_agents}, {0: done, 1: done, ALL: done},
                {0: False, 1: False, ALL: False}, {})


register_env("qmix_two_step", two_step_team)
register_env("qmix_masked_team", lambda cfg: MaskedTeamGame().with_agent_groups({"team": [0, 1]}))


def grouped_spaces(env):
    """The policy's spaces for a grouped env: the flattened Box (with the Tuple) and the Tuple of actions."""
    return get_preprocessor(env.observation_space).observation_space, env.action_space


def make_policy(env, **config) -> QMIXTorchPolicy:
    cfg = merge_configs(DEFAULT_CONFIG, {**TINY, **config})
    validate_config(cfg)
    return QMIXTorchPolicy(*grouped_spaces(env), cfg)


def test_vdn_sums_and_qmix_is_monotonic_in_every_members_q():
    qs = torch.randn(5, 3, requires_grad=True)
    states = torch.randn(5, 7)
    torch.testing.assert_close(VDNMixer()(qs, states), qs.sum(-1))
    mixer = QMixer(3, 7, 8)
    q_tot = mixer(qs, states)
    assert q_tot.shape == (5,)
    (grad,) = torch.autograd.grad(q_tot.sum(), qs)
    assert (grad >= 0).all()  # a member's better Q never lowers the team's


def test_dict_observations_give_each_member_its_obs_the_mixer_the_state_and_masks_hold():
    env = MaskedTeamGame().with_agent_groups({"team": [0, 1]})
    layout = GroupLayout(*grouped_spaces(env))
    assert (layout.n_agents, layout.obs_dim, layout.num_actions, layout.state_dim) == (2, 2, 3, 6)
    assert layout.has_env_state and layout.mask_index is not None
    policy = make_policy(env, exploration_config={"initial_epsilon": 1.0, "final_epsilon": 1.0})
    obs = get_preprocessor(env.observation_space).transform(env.reset()[0]["team"])
    batch = np.repeat(obs[None], 200, 0)
    for explore in (True, False):
        actions, state, _ = policy.compute_actions(batch, explore=explore)
        assert actions.shape == (200, 2) and [s.shape for s in state] == [(200, 2, 64)]  # the GRU's memories
        assert (actions[:, 0] != 0).all() and (actions[:, 1] != 1).all()
    assert len(np.unique(actions[:, 0])) == 1  # greedy
    explored, _, _ = policy.compute_actions(batch, explore=True)
    assert set(np.unique(explored[:, 0])) == {1, 2}  # epsilon 1: both legal actions, never the masked one
    # Without a "state" entry the mixer sees every member's observation.
    two_step = GroupLayout(*grouped_spaces(two_step_team()))
    assert (two_step.obs_dim, two_step.state_dim, two_step.has_env_state) == (5, 10, False)


def _stepwise_q(model, net, observations: np.ndarray, state) -> list:
    """Q-values `[n, A]` of `net` at each of `observations` `[T, D]`, one step at a time,
    the members' memories carried from `state`."""
    out = []
    for o in observations:
        q, state = model.member_q(net, torch.as_tensor(o)[None, None], state)
        out.append(q[0, 0])
    return out


@pytest.mark.parametrize("agent_network", ["gru", "mlp"])
def test_the_loss_is_the_one_step_double_q_team_target(agent_network):
    """Against a step-by-step computation; the GRU starts each episode from the memory it
    acted with (`zero_init_states: False`, QMIX's default) and carries it step to step."""
    env = two_step_team()
    policy = make_policy(env, gamma=0.9, agent_network=agent_network)
    with torch.no_grad():  # a target net that differs from the online one: double Q matters
        for p in [*policy.model.target_agent.parameters(), *policy.model.target_mixer.parameters()]:
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    pp = get_preprocessor(env.observation_space)
    rng = np.random.default_rng(0)
    # Two episodes of 2 steps: observations, actions, team rewards.
    obs = rng.random((4, pp.size)).astype(np.float32)
    new_obs = rng.random((4, pp.size)).astype(np.float32)
    actions = rng.integers(0, 2, (4, 2))
    rewards = np.array([0.0, 7.0, 0.0, 8.0], np.float32)
    terms = np.array([False, True, False, True])
    raw = SampleBatch({SB.OBS: obs, SB.NEXT_OBS: new_obs, SB.ACTIONS: actions, SB.REWARDS: rewards,
                       SB.TERMINATEDS: terms, SB.TRUNCATEDS: np.zeros(4, bool), SB.EPS_ID: np.array([0, 0, 1, 1])})
    initial = policy.get_initial_state()
    assert len(initial) == (agent_network == "gru")
    for k, s0 in enumerate(initial):  # memories as recorded while acting (not zeros: they must be used)
        raw[f"state_in_{k}"] = rng.random((4, *s0.shape)).astype(np.float32)
    seqs = replay_sequences(raw, max_seq_len=5, burn_in=0, n_step=1, gamma=0.9, num_states=len(initial))
    seqs[PRIO_WEIGHTS] = np.ones(len(seqs[SB.SEQ_LENS]), np.float32)
    loss, stats = policy.loss(policy.model, policy.dist_class, policy.to_tensors(seqs))
    # Step by step: each episode's observations, then its final new_obs.
    m = policy.model
    errors = []
    with torch.no_grad():
        for first in (0, 2):
            stream = np.concatenate([obs[first:first + 2], new_obs[first + 1:first + 2]])
            start = [torch.as_tensor(raw[f"state_in_{k}"][first:first + 1]) for k in range(len(initial))]
            q, q_target = _stepwise_q(m, m.agent, stream, start), _stepwise_q(m, m.target_agent, stream, start)
            for k in range(2):
                t = first + k
                o, o2 = torch.as_tensor(stream[k:k + 1]), torch.as_tensor(stream[k + 1:k + 2])
                chosen = q[k][torch.arange(2), torch.as_tensor(actions[t])]
                best = q[k + 1].argmax(-1)
                target_q = q_target[k + 1][torch.arange(2), best]
                target = rewards[t] + 0.9 * (1.0 - terms[t]) * m.target_mixer(target_q[None], m.layout.state(o2))[0]
                errors.append(m.mixer(chosen[None], m.layout.state(o))[0] - target)
    expected = torch.stack(errors) ** 2
    torch.testing.assert_close(loss.detach(), expected.mean(), rtol=1e-5, atol=1e-5)
    assert stats["td_error"].shape == (2,)


@pytest.mark.parametrize("bad,match", [
    ({"mixer": "sum"}, "'mixer'"),
    ({"optimizer": {"eps": 1e-3}}, "RMSprop"),
    ({"model": {"use_lstm": True}}, "agent_network"),
    ({"agent_network": "lstm"}, "'agent_network'"),
    ({"prioritized_replay": True}, "prioritized_replay"),
    ({"n_step": 3}, "n_step"),
    ({"fast_path": "require"}, "fast_path='require', but the NumPy learner cannot serve QMIXTorchPolicy"),
])
def test_settings_it_cannot_serve_are_refused_by_name(bad, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        QMIXTrainer(env="qmix_two_step", config=dict(TINY, **bad), logdir=str(tmp_path))


def test_an_env_that_is_not_a_group_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match="with_agent_groups"):
        QMIXTrainer(env="CartPole-v1", config=TINY, logdir=str(tmp_path))
    uneven = TwoStepGame().with_agent_groups({"team": [0, 1]}, act_space=gym.spaces.Tuple(
        [gym.spaces.Discrete(2), gym.spaces.Discrete(3)]))
    with pytest.raises(ValueError, match="Tuple of equal Discrete spaces"):
        GroupLayout(get_preprocessor(uneven.observation_space).observation_space, uneven.action_space)


def test_masked_dict_env_trains_and_reports_the_torch_path(tmp_path):
    trainer = QMIXTrainer(env="qmix_masked_team", config=TINY, logdir=str(tmp_path))
    try:
        for _ in range(2):
            result = trainer.train()  # the env raises on any illegal action
        info = result["info"]["learner"]["default_policy"]
        assert info["fast_path"] == "torch" and "no NumPy learner" in info["fast_path_reason"]
        assert np.isfinite(info["learner_stats"]["loss"]) and result["info"]["num_agent_steps_trained"] > 0
        # One buffer row per episode (4 steps each).
        assert len(trainer.local_replay_buffer) == result["episodes_total"]
    finally:
        trainer.stop()


def test_checkpoint_keeps_buffer_and_state_and_resumes_bit_identically(tmp_path):
    config = dict(TINY, store_buffer_in_checkpoints=True, mixer="qmix")
    assert_resumes_bit_identically(QMIXTrainer, "qmix_two_step", config, tmp_path)


def test_the_gru_acts_with_the_memory_the_loss_replays(tmp_path):
    """The Q-values the sampler acted on (its per-agent memory carried step to step) are
    the ones the loss's re-run of the episode from its start gives."""
    trainer = QMIXTrainer(env="qmix_masked_team", config=TINY, logdir=str(tmp_path))
    try:
        worker = trainer.workers.local_worker()
        batch = worker.sample().policy_batches["default_policy"]
        policy = worker.get_policy()
        assert batch.count == 4 and np.array_equal(batch[SB.T], np.arange(4))  # one 4-step episode
        np.testing.assert_array_equal(batch["state_in_0"][0], np.zeros((2, 64), np.float32))
        assert not np.allclose(batch["state_in_0"][1:], 0.0)  # carried, not reset every step
        with torch.no_grad():
            q, _ = policy.model.member_q(policy.model.agent, torch.as_tensor(batch[SB.OBS])[None],
                                         [torch.as_tensor(batch["state_in_0"][:1])])
        np.testing.assert_allclose(q.reshape(4, -1).numpy(), batch[SB.ACTION_DIST_INPUTS], rtol=1e-5, atol=1e-6)
    finally:
        trainer.stop()


def test_remote_workers_sample_the_grouped_env(ray_session, tmp_path):
    # VDN here (QMIX elsewhere): a mixer without weights; target updates copy the agent network only.
    config = dict(TINY, num_workers=1, mixer="vdn", target_network_update_freq=20)
    trainer = QMIXTrainer(env="qmix_two_step", config=config, logdir=str(tmp_path))
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["num_healthy_workers"] == 1 and result["info"]["num_agent_steps_trained"] > 0
        assert result["episodes_total"] >= 40  # 2-step episodes, all sampled remotely
        assert result["info"]["num_target_updates"] > 0
    finally:
        trainer.stop()


def greedy_team_return(trainer) -> float:
    env = two_step_team()
    obs, _ = env.reset()
    total = 0.0
    state = trainer.get_policy().get_initial_state()  # the GRU's memories, carried through the episode
    while True:
        action, state, _ = trainer.compute_single_action(obs["team"], state=state, explore=False, full_fetch=True)
        obs, rewards, terms, truncs, _ = env.step({"team": tuple(int(a) for a in action)})
        total += rewards["team"]
        if terms[ALL] or truncs[ALL]:
            return total


def test_qmix_finds_the_two_step_games_joint_optimum():
    """The tuned example (seeded, small): the team's training return passes 7.7 (independent
    learners settle near 7), and the greedy team return is the optimum 8."""
    example = load_tuned_example("qmix/two-step-qmix.yaml")
    trainer = QMIXTrainer(env=example.config["env"], config=example.config)
    try:
        result, history = train_until(trainer, reward=example.stop["episode_reward_mean"],
                                      max_timesteps=example.stop["timesteps_total"])
        assert result["episode_reward_mean"] >= example.stop["episode_reward_mean"], history
        assert greedy_team_return(trainer) == 8.0
        first = trainer.compute_single_action(two_step_team().reset()[0]["team"], explore=False)
        assert int(first[0]) == 1  # agent 0 heads for state 2
    finally:
        trainer.stop()


def test_the_targets_hold_still_between_refreshes_every_target_network_update_freq_steps(tmp_path):
    """The agent network's and mixer's targets move only when `target_network_update_freq`
    sampled steps have passed (simple_spread's QMIX diverges when they refresh too often,
    tuned_examples/qmix/simple-spread-qmix.yaml)."""
    config = dict(TINY, mixer="qmix", target_network_update_freq=100)
    trainer = QMIXTrainer(env="qmix_two_step", config=config, logdir=str(tmp_path))

    def targets():
        model = trainer.get_policy().model
        return [p.detach().clone() for p in (*model.target_agent.parameters(), *model.target_mixer.parameters())]

    try:
        refreshes, before, moved = 0, targets(), []
        for _ in range(8):
            result = trainer.train()
            now = targets()
            changed = any(not torch.equal(a, b) for a, b in zip(before, now))
            moved.append(changed)
            assert changed == (result["info"]["num_target_updates"] > refreshes), (result["timesteps_total"], changed)
            refreshes, before = result["info"]["num_target_updates"], now
        # Eight iterations of at least 40 steps (seeded): three refreshes, 100 steps or more apart.
        assert refreshes == 3 and moved.count(True) == 3 and moved.count(False) == 5, moved
    finally:
        trainer.stop()


@pytest.mark.parametrize("mixer, mixer_class", [("vdn", VDNMixer), (None, type(None))])
def test_the_long_spread_examples_two_arms_build_from_one_file_and_explore_down_to_0_01(mixer, mixer_class, tmp_path):
    """docs/guides/qmix.md's 3-seed comparison runs tuned_examples/qmix/simple-spread-vdn-long.yaml
    as VDN and, with `mixer: None`, as independent learners (benchmarks/mpe_spread.py --set
    mixer=null): both arms build from the file, and both act at epsilon 0.01 after 25k steps,
    the setting under which VDN's greedy team came out ahead on all three seeds."""
    pytest.importorskip("mpe2")
    example = load_tuned_example("qmix/simple-spread-vdn-long.yaml")
    trainer = QMIXTrainer(env=example.env, config=dict(example.config, mixer=mixer), logdir=str(tmp_path))
    try:
        policy = trainer.get_policy()
        assert isinstance(policy.model.mixer, mixer_class)
        epsilon = policy.exploration.epsilon_schedule
        assert epsilon(0) == 1.0 and epsilon(25000) == pytest.approx(0.01) == epsilon(100000)
    finally:
        trainer.stop()
