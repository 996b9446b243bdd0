"""Off-policy algorithms: losses against NumPy, replay loop mechanics, smoke and learning runs."""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.ddpg import DEFAULT_CONFIG as DDPG_CONFIG
from rlfleet.algorithms.ddpg import DDPGTorchPolicy, DDPGTrainer, ddpg_losses
from rlfleet.algorithms.dqn import DEFAULT_CONFIG as DQN_CONFIG
from rlfleet.algorithms.dqn import DQNTorchPolicy, DQNTrainer, SimpleQTrainer, dqn_loss, project_distribution
from rlfleet.registry import get_trainer_class
from rlfleet.algorithms.sac import DEFAULT_CONFIG as SAC_CONFIG
from rlfleet.algorithms.sac import SACTorchPolicy, SACTrainer, sac_losses
from rlfleet.algorithms.td3 import DEFAULT_CONFIG as TD3_CONFIG
from rlfleet.algorithms.td3 import TD3Trainer
from rlfleet.config import merge_configs, validate_config
from rlfleet.models.distributions import SquashedGaussian
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.replay import N_STEPS, PRIO_WEIGHTS, PrioritizedReplayBuffer, ReplayBuffer
from tests.off_policy_helpers import SMOKE, TINY_DQN

SB = SampleBatch
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
B = 6


def make_config(default, **overrides):
    cfg = merge_configs(default, {"seed": 0, **overrides})
    validate_config(cfg)
    return cfg


def fixed_batch(action_space, seed=0):
    rng = np.random.default_rng(seed)
    if isinstance(action_space, gym.spaces.Discrete):
        actions = rng.integers(0, action_space.n, B)
    else:
        actions = rng.uniform(-1, 1, (B, *action_space.shape)).astype(np.float32)
    return {
        SB.OBS: torch.as_tensor(rng.normal(size=(B, 3)).astype(np.float32)),
        SB.NEXT_OBS: torch.as_tensor(rng.normal(size=(B, 3)).astype(np.float32)),
        SB.ACTIONS: torch.as_tensor(actions),
        SB.REWARDS: torch.as_tensor(rng.normal(size=B).astype(np.float32)),
        SB.TERMINATEDS: torch.as_tensor(np.array([0, 1, 0, 0, 1, 0], bool)),
        N_STEPS: torch.as_tensor(np.array([1, 2, 3, 1, 1, 2])),
        PRIO_WEIGHTS: torch.as_tensor(rng.uniform(0.2, 1.0, B).astype(np.float32)),
    }


def perturb(module, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))


def np_of(fn, *args):
    with torch.no_grad():
        return fn(*[torch.as_tensor(a) for a in args]).numpy().astype(np.float64)


def huber(x, delta=1.0):
    return np.where(np.abs(x) < delta, 0.5 * x * x, delta * (np.abs(x) - 0.5 * delta))


def discounts(batch, gamma):
    return gamma ** batch[N_STEPS].numpy() * (1 - batch[SB.TERMINATEDS].numpy())


# --- DQN -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("double_q", [True, False])
def test_dqn_loss_matches_numpy(double_q):
    cfg = make_config(DQN_CONFIG, gamma=0.9, double_q=double_q, hiddens=[6], model={"fcnet_hiddens": [8]})
    policy = DQNTorchPolicy(OBS, gym.spaces.Discrete(3), cfg)
    model = policy.model
    perturb(model.target_q_net)
    batch = fixed_batch(gym.spaces.Discrete(3))
    loss, stats = dqn_loss(policy, model, policy.dist_class, batch)

    q_t = np_of(model.q_net, batch[SB.OBS])
    q_tp1_online = np_of(model.q_net, batch[SB.NEXT_OBS])
    q_tp1_target = np_of(model.target_q_net, batch[SB.NEXT_OBS])
    a, r, w = batch[SB.ACTIONS].numpy(), batch[SB.REWARDS].numpy(), batch[PRIO_WEIGHTS].numpy()
    best = (q_tp1_online if double_q else q_tp1_target).argmax(1)
    target = r + discounts(batch, 0.9) * q_tp1_target[np.arange(B), best]
    td = q_t[np.arange(B), a] - target
    assert float(loss.detach()) == pytest.approx(float(np.mean(w * huber(td))), rel=1e-5)
    np.testing.assert_allclose(stats["td_error"].numpy(), td, rtol=1e-5, atol=1e-6)


def test_dueling_head_combines_value_and_centred_advantages():
    cfg = make_config(DQN_CONFIG, hiddens=[5], model={"fcnet_hiddens": [4]})
    net = DQNTorchPolicy(OBS, gym.spaces.Discrete(4), cfg).model.q_net
    obs = torch.randn(7, 3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        feats = net.trunk(obs)
        adv, value = net.advantage(feats).numpy(), net.value(feats).numpy()
        q = net(obs).numpy()
    np.testing.assert_allclose(q, value + adv - adv.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_c51_projection_hand_computed():
    probs = torch.tensor([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5], [0.2, 0.3, 0.5]])
    # Support {0, 1, 2}. Row 0: r 0.5, discount 1 -> atoms move to 0.5, 1.5, 2 (clipped).
    # Row 1: terminal, r 1 -> all mass on atom 1. Row 2: r -5 -> clipped to v_min.
    out = project_distribution(probs, torch.tensor([0.5, 1.0, -5.0]), torch.tensor([1.0, 0.0, 1.0]), 0.0, 2.0)
    np.testing.assert_allclose(out.numpy(), [[0.1, 0.25, 0.65], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], atol=1e-6)


def np_project(p, r, d, v_min, v_max):
    atoms = p.shape[1]
    z = np.linspace(v_min, v_max, atoms)
    dz = (v_max - v_min) / (atoms - 1)
    m = np.zeros_like(p)
    for i in range(p.shape[0]):
        for j in range(atoms):
            b = (np.clip(r[i] + d[i] * z[j], v_min, v_max) - v_min) / dz
            lo, hi = int(np.floor(b)), int(np.ceil(b))
            if lo == hi:
                m[i, lo] += p[i, j]
            else:
                m[i, lo] += p[i, j] * (hi - b)
                m[i, hi] += p[i, j] * (b - lo)
    return m


def test_c51_loss_matches_numpy():
    cfg = make_config(DQN_CONFIG, gamma=0.9, num_atoms=7, v_min=-3.0, v_max=3.0, hiddens=[6],
                      model={"fcnet_hiddens": [8]})
    policy = DQNTorchPolicy(OBS, gym.spaces.Discrete(3), cfg)
    model = policy.model
    perturb(model.target_q_net)
    batch = fixed_batch(gym.spaces.Discrete(3))
    loss, stats = dqn_loss(policy, model, policy.dist_class, batch)

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    z = np.linspace(-3, 3, 7)
    logits_t = np_of(model.q_net, batch[SB.OBS])
    probs_online_tp1 = softmax(np_of(model.q_net, batch[SB.NEXT_OBS]))
    probs_target_tp1 = softmax(np_of(model.target_q_net, batch[SB.NEXT_OBS]))
    best = (probs_online_tp1 * z).sum(-1).argmax(1)  # double Q
    rows = np.arange(B)
    m = np_project(probs_target_tp1[rows, best], batch[SB.REWARDS].numpy(), discounts(batch, 0.9), -3.0, 3.0)
    sel = logits_t[rows, batch[SB.ACTIONS].numpy()]
    log_p = sel - sel.max(-1, keepdims=True) - np.log(np.exp(sel - sel.max(-1, keepdims=True)).sum(-1, keepdims=True))
    ce = -(m * log_p).sum(-1)
    assert float(loss.detach()) == pytest.approx(float(np.mean(batch[PRIO_WEIGHTS].numpy() * ce)), rel=1e-5)
    np.testing.assert_allclose(stats["td_error"].numpy(), ce, rtol=1e-5)


def test_noisy_nets_are_noisy_when_exploring_and_greedy_otherwise():
    cfg = make_config(DQN_CONFIG, noisy=True, hiddens=[8], model={"fcnet_hiddens": [8]},
                      exploration_config={"type": "EpsilonGreedy", "initial_epsilon": 0.0, "final_epsilon": 0.0})
    policy = DQNTorchPolicy(OBS, gym.spaces.Discrete(3), cfg)
    obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    q1 = policy.compute_actions(obs, explore=True)[2][SB.ACTION_DIST_INPUTS]
    q2 = policy.compute_actions(obs, explore=True)[2][SB.ACTION_DIST_INPUTS]
    g1 = policy.compute_actions(obs, explore=False)[2][SB.ACTION_DIST_INPUTS]
    g2 = policy.compute_actions(obs, explore=False)[2][SB.ACTION_DIST_INPUTS]
    assert not np.allclose(q1, q2)
    np.testing.assert_array_equal(g1, g2)


# --- SAC -----------------------------------------------------------------------------------------------
def np_mlp_policy(model, obs):
    return np_of(model.policy_inputs, obs)


def test_squashed_gaussian_logp_against_a_numerical_density():
    low, high = torch.tensor([-2.0]), torch.tensor([3.0])
    mean, log_std = 0.4, -0.3
    dist = SquashedGaussian(torch.tensor([[mean, log_std]]), None, low, high)
    std = math.exp(log_std)

    def squash(u):
        return -2.0 + (np.tanh(u) + 1.0) * 0.5 * 5.0

    # Density of a = squash(u) by change of variables with a numerical derivative.
    for u in (-1.5, -0.2, 0.0, 0.7, 1.9):
        a = squash(u)
        h = 1e-6
        dadu = (squash(u + h) - squash(u - h)) / (2 * h)
        p_u = math.exp(-0.5 * ((u - mean) / std) ** 2) / (std * math.sqrt(2 * math.pi))
        got = float(dist.logp(torch.tensor([[a]], dtype=torch.float32)))
        assert got == pytest.approx(math.log(p_u / dadu), abs=2e-3)
    # The density integrates to 1 over the bounds.
    grid = np.linspace(-2 + 1e-6, 3 - 1e-6, 200001)
    lp = SquashedGaussian(torch.tensor([[mean, log_std]]).expand(len(grid), 2), None, low, high)
    dens = np.exp(lp.logp(torch.as_tensor(grid, dtype=torch.float32)[:, None]).numpy().astype(np.float64))
    assert float(((dens[1:] + dens[:-1]) / 2 * np.diff(grid)).sum()) == pytest.approx(1.0, abs=2e-3)
    # Reparameterised draws report the same log-prob as logp of the drawn action.
    big = SquashedGaussian(torch.tensor([[mean, log_std]]).expand(1000, 2), None, low, high)
    acts, logp = big.sample_logp(torch.Generator().manual_seed(0))
    assert acts.min() > -2 and acts.max() < 3
    np.testing.assert_allclose(big.logp(acts).numpy(), logp.numpy(), rtol=1e-3, atol=1e-3)


def test_sac_continuous_losses_match_numpy():
    act_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
    small = {"fcnet_hiddens": [8]}
    cfg = make_config(SAC_CONFIG, gamma=0.95, initial_alpha=0.5, Q_model=small, policy_model=small)
    policy = SACTorchPolicy(OBS, act_space, cfg)
    model = policy.model
    perturb(model.target_q_net, 1)
    perturb(model.target_twin_q_net, 2)
    batch = fixed_batch(act_space)
    gen_state = policy.generator.get_state()
    losses, stats = sac_losses(policy, model, policy.dist_class, batch)

    replay = torch.Generator()
    replay.set_state(gen_state)
    eps_t = torch.randn((B, 2), generator=replay).numpy().astype(np.float64)
    eps_tp1 = torch.randn((B, 2), generator=replay).numpy().astype(np.float64)

    def sample(obs, eps):
        out = np_mlp_policy(model, obs)
        mean, log_std = out[:, :2], np.clip(out[:, 2:], -20, 2)
        u = mean + np.exp(log_std) * eps
        logp = (-0.5 * eps ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(1) - np.log(1 - np.tanh(u) ** 2).sum(1)
        return np.tanh(u).astype(np.float32), logp

    def q(net, obs, act):
        return np_of(lambda o, a: model.q(net, o, a), obs, act)

    obs, nobs = batch[SB.OBS].numpy(), batch[SB.NEXT_OBS].numpy()
    a_t, logp_t = sample(obs, eps_t)
    a_tp1, logp_tp1 = sample(nobs, eps_tp1)
    alpha, w = 0.5, batch[PRIO_WEIGHTS].numpy()
    q_next = np.minimum(q(model.target_q_net, nobs, a_tp1), q(model.target_twin_q_net, nobs, a_tp1))
    y = batch[SB.REWARDS].numpy() + discounts(batch, 0.95) * (q_next - alpha * logp_tp1)
    q1 = q(model.q_net, obs, batch[SB.ACTIONS].numpy())
    q2 = q(model.twin_q_net, obs, batch[SB.ACTIONS].numpy())
    critic = 0.5 * np.mean(w * (q1 - y) ** 2) + 0.5 * np.mean(w * (q2 - y) ** 2)
    actor = np.mean(alpha * logp_t - np.minimum(q(model.q_net, obs, a_t), q(model.twin_q_net, obs, a_t)))
    alpha_loss = -np.mean(np.log(alpha) * (logp_t + policy.target_entropy))
    assert policy.target_entropy == -2.0
    assert float(losses["critic"].detach()) == pytest.approx(critic, rel=1e-4)
    assert float(losses["actor"].detach()) == pytest.approx(actor, rel=1e-4)
    assert float(losses["alpha"].detach()) == pytest.approx(alpha_loss, rel=1e-4)
    np.testing.assert_allclose(stats["td_error"].numpy(), 0.5 * (np.abs(q1 - y) + np.abs(q2 - y)), rtol=1e-4)

    # Each loss reaches only its own parameters, so one backward pass serves three optimizers.
    def touched(loss, params):
        grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        return any(g is not None and g.abs().sum() > 0 for g in grads)

    losses, _ = sac_losses(policy, model, policy.dist_class, batch)
    assert not touched(losses["actor"], model.q_parameters())
    assert not touched(losses["critic"], model.policy_parameters() + [model.log_alpha])
    assert not touched(losses["alpha"], model.policy_parameters() + model.q_parameters())
    assert touched(losses["actor"], model.policy_parameters())


def test_sac_discrete_losses_match_numpy():
    small = {"fcnet_hiddens": [8]}
    cfg = make_config(SAC_CONFIG, gamma=0.9, initial_alpha=0.3, Q_model=small, policy_model=small)
    policy = SACTorchPolicy(OBS, gym.spaces.Discrete(3), cfg)
    model = policy.model
    perturb(model.target_q_net, 1)
    perturb(model.target_twin_q_net, 2)
    batch = fixed_batch(gym.spaces.Discrete(3))
    losses, _ = sac_losses(policy, model, policy.dist_class, batch)

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    obs, nobs, a = batch[SB.OBS].numpy(), batch[SB.NEXT_OBS].numpy(), batch[SB.ACTIONS].numpy()
    lp_t, lp_tp1 = log_softmax(np_mlp_policy(model, obs)), log_softmax(np_mlp_policy(model, nobs))
    q1, q2 = np_of(model.q_net, obs), np_of(model.twin_q_net, obs)
    qn = np.minimum(np_of(model.target_q_net, nobs), np_of(model.target_twin_q_net, nobs))
    alpha, w, rows = 0.3, batch[PRIO_WEIGHTS].numpy(), np.arange(B)
    y = batch[SB.REWARDS].numpy() + discounts(batch, 0.9) * (np.exp(lp_tp1) * (qn - alpha * lp_tp1)).sum(1)
    critic = 0.5 * np.mean(w * (q1[rows, a] - y) ** 2) + 0.5 * np.mean(w * (q2[rows, a] - y) ** 2)
    actor = np.mean((np.exp(lp_t) * (alpha * lp_t - np.minimum(q1, q2))).sum(1))
    target_entropy = 0.98 * np.log(3)
    assert policy.target_entropy == pytest.approx(target_entropy)
    alpha_loss = np.mean((np.exp(lp_t) * (-np.log(alpha) * (lp_t + target_entropy))).sum(1))
    assert float(losses["critic"].detach()) == pytest.approx(critic, rel=1e-4)
    assert float(losses["actor"].detach()) == pytest.approx(actor, rel=1e-4)
    assert float(losses["alpha"].detach()) == pytest.approx(alpha_loss, rel=1e-4)


# --- DDPG / TD3 -----------------------------------------------------------------------------------------
def test_td3_target_smoothing_and_losses_match_numpy():
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    cfg = make_config(TD3_CONFIG, gamma=0.9, actor_hiddens=[8], critic_hiddens=[8])
    policy = DDPGTorchPolicy(OBS, act_space, cfg)
    m = policy.model
    for i, net in enumerate((m.target_actor, m.target_critic, m.target_twin_critic)):
        perturb(net, i + 1)
    batch = fixed_batch(act_space)
    gen_state = policy.generator.get_state()
    losses, stats = ddpg_losses(policy, m, policy.dist_class, batch)

    replay = torch.Generator()
    replay.set_state(gen_state)
    noise = np.clip(torch.randn((B, 2), generator=replay).numpy() * 0.2, -0.5, 0.5)
    obs, nobs = batch[SB.OBS].numpy(), batch[SB.NEXT_OBS].numpy()
    a_tp1 = np.clip(np.tanh(np_of(m.target_actor, nobs)) + noise, -1, 1).astype(np.float32)

    def q(net, o, a):
        return np_of(lambda x, y: m.q(net, x, y), o, a)

    y = batch[SB.REWARDS].numpy() + discounts(batch, 0.9) * np.minimum(q(m.target_critic, nobs, a_tp1),
                                                                      q(m.target_twin_critic, nobs, a_tp1))
    acts = batch[SB.ACTIONS].numpy()
    td1, td2 = q(m.critic, obs, acts) - y, q(m.twin_critic, obs, acts) - y
    critic = np.mean(batch[PRIO_WEIGHTS].numpy() * (0.5 * td1 ** 2 + 0.5 * td2 ** 2))
    actor = -np.mean(q(m.critic, obs, np.tanh(np_of(m.actor, obs)).astype(np.float32)))
    assert float(losses["critic"].detach()) == pytest.approx(critic, rel=1e-4)
    assert float(losses["actor"].detach()) == pytest.approx(actor, rel=1e-4)
    np.testing.assert_allclose(stats["td_error"].numpy(), td1, rtol=1e-4, atol=1e-6)


def test_ddpg_l2_and_huber_terms_match_numpy():
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    cfg = make_config(DDPG_CONFIG, gamma=0.9, actor_hiddens=[8], critic_hiddens=[8], l2_reg=0.01, use_huber=True,
                      huber_threshold=0.5)
    policy = DDPGTorchPolicy(OBS, act_space, cfg)
    m = policy.model
    batch = fixed_batch(act_space)
    losses, _ = ddpg_losses(policy, m, policy.dist_class, batch)
    obs, nobs, acts = batch[SB.OBS].numpy(), batch[SB.NEXT_OBS].numpy(), batch[SB.ACTIONS].numpy()

    def q(net, o, a):
        return np_of(lambda x, y: m.q(net, x, y), o, a)

    y = batch[SB.REWARDS].numpy() + discounts(batch, 0.9) * q(
        m.target_critic, nobs, np.tanh(np_of(m.target_actor, nobs)).astype(np.float32))
    l2 = lambda net: sum(0.5 * (p.detach().numpy().astype(np.float64) ** 2).sum()  # noqa: E731
                         for p in net.parameters() if p.dim() > 1)
    critic = np.mean(batch[PRIO_WEIGHTS].numpy() * huber(q(m.critic, obs, acts) - y, 0.5)) + 0.01 * l2(m.critic)
    actor = -np.mean(q(m.critic, obs, np.tanh(np_of(m.actor, obs)).astype(np.float32))) + 0.01 * l2(m.actor)
    assert float(losses["critic"].detach()) == pytest.approx(critic, rel=1e-4)
    assert float(losses["actor"].detach()) == pytest.approx(actor, rel=1e-4)


def test_policy_delay_updates_the_actor_every_other_step():
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    cfg = make_config(TD3_CONFIG, actor_hiddens=[8], critic_hiddens=[8])
    policy = DDPGTorchPolicy(OBS, act_space, cfg)
    batch = SampleBatch({k: v.numpy() for k, v in fixed_batch(act_space).items()})
    actor_before = [p.detach().clone() for p in policy.model.actor.parameters()]
    critic_before = [p.detach().clone() for p in policy.model.critic.parameters()]
    policy.learn_on_batch(batch)  # update 0: critic and actor
    actor_1 = [p.detach().clone() for p in policy.model.actor.parameters()]
    assert not all(torch.equal(a, b) for a, b in zip(actor_before, actor_1))
    assert not all(torch.equal(a, b) for a, b in zip(critic_before, policy.model.critic.parameters()))
    policy.learn_on_batch(batch)  # update 1: critic only
    assert all(torch.equal(a, b) for a, b in zip(actor_1, policy.model.actor.parameters()))
    policy.learn_on_batch(batch)  # update 2: both again
    assert not all(torch.equal(a, b) for a, b in zip(actor_1, policy.model.actor.parameters()))


@pytest.mark.parametrize("algo", ["SAC", "TD3"])
def test_policy_state_round_trip_keeps_every_optimizer(algo):
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    if algo == "SAC":
        small = {"fcnet_hiddens": [8]}
        make = lambda seed: SACTorchPolicy(OBS, act_space, make_config(  # noqa: E731
            SAC_CONFIG, seed=seed, Q_model=small, policy_model=small))
        names = {"critic", "actor", "alpha"}
    else:
        make = lambda seed: DDPGTorchPolicy(OBS, act_space, make_config(  # noqa: E731
            TD3_CONFIG, seed=seed, actor_hiddens=[8], critic_hiddens=[8]))
        names = {"critic", "actor"}
    batch = SampleBatch({k: v.numpy() for k, v in fixed_batch(act_space).items()})
    a = make(0)
    for _ in range(3):
        a.learn_on_batch(batch)
    state = a.get_state()
    b = make(1)
    b.set_state(state)
    wa, wb = a.get_weights(), b.get_weights()
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert set(state["optimizers"]) == names
    a.learn_on_batch(batch)
    b.learn_on_batch(batch)
    wa, wb = a.get_weights(), b.get_weights()
    assert all(np.allclose(wa[k], wb[k], rtol=1e-6, atol=1e-7) for k in wa)


# --- the replay loop ----------------------------------------------------------------------------------
def test_target_network_update_cadence(tmp_path):
    trainer = DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(
        TINY_DQN, learning_starts=0, rollout_fragment_length=10, target_network_update_freq=50, train_batch_size=8))
    policy = trainer.get_policy()
    m = policy.model
    same = lambda: all(torch.equal(a, b) for a, b in zip(m.q_net.parameters(), m.target_q_net.parameters()))  # noqa: E731
    history = []
    for _ in range(12):
        trainer.train()
        history.append((trainer.counters["num_env_steps_sampled"], trainer.counters["num_target_updates"], same()))
    # Sampled steps 10, 20, ...: updates when 50 steps passed since the last one (first at 50).
    assert [h[1] for h in history] == [0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2]
    assert trainer.counters["last_target_update_ts"] == 100
    assert [h[2] for h in history if h[0] in (50, 100)] == [True, True]
    assert not history[-1][2]  # learned since, target not yet refreshed
    result = trainer.train()
    assert result["num_target_updates"] == 2 and result["info"]["num_target_updates"] == 2
    trainer.stop()


def test_training_intensity_is_the_replay_ratio(tmp_path):
    trainer = DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(
        TINY_DQN, learning_starts=0, rollout_fragment_length=10, train_batch_size=20, training_intensity=7))
    for _ in range(8):
        trainer.train()
    c = trainer.counters
    assert c["num_env_steps_sampled"] == 80
    # 7 replayed steps per sampled step, in whole batches of 20 (the remainder carries over).
    assert c["num_env_steps_trained"] == 20 * math.floor(80 * 7 / 20)
    trainer.stop()
    default = DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(
        TINY_DQN, learning_starts=0, rollout_fragment_length=10, train_batch_size=20))
    for _ in range(3):
        default.train()
    assert default.counters["num_env_steps_trained"] == 3 * 20  # one batch per fragment
    default.stop()


def test_learning_starts_and_prioritized_replay_wiring(tmp_path):
    trainer = DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(
        TINY_DQN, learning_starts=40, rollout_fragment_length=10, train_batch_size=16,
        prioritized_replay_beta=0.2, final_prioritized_replay_beta=1.0,
        prioritized_replay_beta_annealing_timesteps=100))
    buf = trainer.local_replay_buffer
    assert isinstance(buf, PrioritizedReplayBuffer)
    assert trainer.beta_schedule(0) == 0.2 and trainer.beta_schedule(50) == pytest.approx(0.6)
    for _ in range(3):
        trainer.train()
    assert trainer.counters["num_env_steps_trained"] == 0 and len(buf) == 30
    np.testing.assert_allclose(buf.priorities(), 1.0)
    for _ in range(3):
        trainer.train()
    assert trainer.counters["num_env_steps_trained"] == 3 * 16
    assert not np.allclose(buf.priorities(), buf.priorities()[0])  # TD errors became priorities
    assert set(buf.columns) == {SB.OBS, SB.ACTIONS, SB.REWARDS, SB.NEXT_OBS, SB.TERMINATEDS, N_STEPS}
    trainer.stop()


def test_replay_config_validation(tmp_path):
    t = SimpleQTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(
        TINY_DQN, replay_buffer_config={"capacity": 123, "type": "MultiAgentReplayBuffer"}))
    assert type(t.local_replay_buffer) is ReplayBuffer and t.local_replay_buffer.capacity == 123
    t.stop()
    t = DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(TINY_DQN, buffer_size=1e3))
    assert t.local_replay_buffer.capacity == 1000
    t.stop()
    for bad, match in (({"replay_buffer_config": {"capacityy": 5}}, "capacityy"),
                       ({"training_intensity": 0}, "training_intensity"),
                       ({"n_step": 0}, "n_step"),
                       ({"worker_side_prioritization": True}, "worker_side_prioritization"),
                       ({"num_atoms": 0}, "num_atoms"),
                       ({"exploration_config": {"type": "GaussianNoise"}}, "Box")):
        with pytest.raises(ValueError, match=match):
            DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(TINY_DQN, **bad))
    with pytest.raises(ValueError, match="Discrete"):
        DQNTrainer(env="Pendulum-v1", logdir=str(tmp_path), config=TINY_DQN)
    with pytest.raises(ValueError, match="'multiagent.replay_mode'.*lockstep.*not available yet"):
        DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(TINY_DQN, multiagent={
            "policies": {"a", "b"}, "policy_mapping_fn": lambda agent_id, *args, **kwargs: "a",
            "replay_mode": "lockstep"}))
    with pytest.raises(ValueError, match="Box"):
        DDPGTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(seed=0, log_sys_usage=False))


def test_registry_and_defaults():
    for name, cls in (("DQN", DQNTrainer), ("SimpleQ", SimpleQTrainer), ("SAC", SACTrainer),
                      ("DDPG", DDPGTrainer), ("TD3", TD3Trainer)):
        assert get_trainer_class(name) is cls
    assert DQN_CONFIG["exploration_config"] == {"type": "EpsilonGreedy", "initial_epsilon": 1.0,
                                                "final_epsilon": 0.02, "epsilon_timesteps": 10000}
    assert (DQN_CONFIG["buffer_size"], DQN_CONFIG["target_network_update_freq"], DQN_CONFIG["grad_clip"],
            DQN_CONFIG["hiddens"], DQN_CONFIG["prioritized_replay"]) == (50000, 500, 40, [256], True)
    assert (SAC_CONFIG["tau"], SAC_CONFIG["learning_starts"], SAC_CONFIG["train_batch_size"],
            SAC_CONFIG["buffer_size"], SAC_CONFIG["clip_actions"], SAC_CONFIG["normalize_actions"]) == (
        5e-3, 1500, 256, 1000000, False, True)
    assert DDPG_CONFIG["exploration_config"]["type"] == "OrnsteinUhlenbeckNoise" and DDPG_CONFIG["tau"] == 0.002
    assert (TD3_CONFIG["twin_q"], TD3_CONFIG["policy_delay"], TD3_CONFIG["smooth_target_policy"],
            TD3_CONFIG["l2_reg"], TD3_CONFIG["train_batch_size"], TD3_CONFIG["learning_starts"]) == (
        True, 2, True, 0.0, 100, 10000)
    assert set(TD3_CONFIG["exploration_config"]) == {"type", "random_timesteps", "stddev", "initial_scale",
                                                     "final_scale", "scale_timesteps"}


# --- smoke runs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo,env,config", SMOKE, ids=[f"{a}-{e}" for a, e, _ in SMOKE])
def test_smoke_run_finite_losses_and_greedy_actions(algo, env, config, tmp_path):
    trainer = get_trainer_class(algo)(env=env, config=config, logdir=str(tmp_path))
    for _ in range(2):
        result = trainer.train()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats and all(np.isfinite(v) for v in stats.values()), stats
    assert result["timesteps_total"] == 400 and result["num_env_steps_trained"] > 0
    space = trainer.get_policy().action_space
    obs = trainer.workers.local_worker().env.envs[0].observation_space.sample()
    a1 = trainer.compute_single_action(obs, explore=False)
    a2 = trainer.compute_single_action(obs, explore=False)
    np.testing.assert_array_equal(a1, a2)
    assert space.contains(np.asarray(a1, dtype=space.dtype) if isinstance(space, gym.spaces.Box) else int(a1))
    trainer.stop()


def test_same_seed_same_weights(tmp_path):
    def run():
        t = DQNTrainer(env="CartPole-v1", logdir=str(tmp_path), config=dict(
            TINY_DQN, learning_starts=32, timesteps_per_iteration=100))
        for _ in range(2):
            t.train()
        w = t.get_weights()["default_policy"]
        t.stop()
        return w

    w1, w2 = run(), run()
    assert all(np.array_equal(w1[k], w2[k]) for k in w1)


# --- several optimizers: state, the `optimizer` key, policy_delay (issue 10) --------------------------
def _optimizer_tensors(optimizer):
    sd = optimizer.state_dict()
    return {(i, k): v.clone() for i, s in sd["state"].items() for k, v in s.items()}, sd["param_groups"]


def _assert_same_optimizers(a, b):
    assert list(a.optimizers) == list(b.optimizers)
    for name in a.optimizers:
        (ta, ga), (tb, gb) = _optimizer_tensors(a.optimizers[name]), _optimizer_tensors(b.optimizers[name])
        assert ta and set(ta) == set(tb) and ga == gb, name
        for key in ta:
            assert torch.equal(ta[key], tb[key]), (name, key)


def _learned_sac(seed, **config):
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    small = {"fcnet_hiddens": [8]}
    policy = SACTorchPolicy(OBS, act_space, make_config(SAC_CONFIG, seed=seed, Q_model=small, policy_model=small,
                                                        **config))
    batch = SampleBatch({k: v.numpy() for k, v in fixed_batch(act_space).items()})
    return policy, batch


def test_sac_set_state_restores_every_optimizer_exactly():
    a, batch = _learned_sac(0)
    for _ in range(3):
        a.learn_on_batch(batch)
    b, _ = _learned_sac(1)
    b.set_state(a.get_state())
    assert list(a.optimizers) == ["critic", "actor", "alpha"]
    _assert_same_optimizers(a, b)
    assert b.num_grad_updates == a.num_grad_updates == 3
    # Both continue identically, alpha's step included.
    a.learn_on_batch(batch)
    b.learn_on_batch(batch)
    assert b.model.log_alpha.item() == a.model.log_alpha.item()
    _assert_same_optimizers(a, b)


def test_set_state_reads_the_layout_saved_before_several_optimizers():
    # Before issue 10 the critic's optimizer was saved as "optimizer", the others as "<name>_optimizer".
    a, batch = _learned_sac(0)
    a.learn_on_batch(batch)
    state = a.get_state()
    saved = state.pop("optimizers")
    state.update(optimizer=saved["critic"], actor_optimizer=saved["actor"], alpha_optimizer=saved["alpha"])
    b, _ = _learned_sac(1)
    b.set_state(state)
    _assert_same_optimizers(a, b)


def test_set_state_rejects_optimizers_the_policy_lacks():
    a, _ = _learned_sac(0)
    state = a.get_state()
    state["optimizers"]["bogus"] = state["optimizers"]["actor"]
    with pytest.raises(ValueError, match="bogus"):
        a.set_state(state)


def test_optimizer_key_reaches_every_optimizer():
    options = {"eps": 1e-5, "betas": (0.8, 0.95)}
    sac, _ = _learned_sac(0, optimizer=options)
    dqn = DQNTorchPolicy(OBS, gym.spaces.Discrete(3), make_config(DQN_CONFIG, hiddens=[6], optimizer=options))
    td3 = DDPGTorchPolicy(OBS, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), make_config(
        TD3_CONFIG, actor_hiddens=[8], critic_hiddens=[8], optimizer=options))
    for policy in (sac, dqn, td3):
        for name, optimizer in policy.optimizers.items():
            group = optimizer.param_groups[0]
            assert group["eps"] == 1e-5 and tuple(group["betas"]) == (0.8, 0.95), (type(policy).__name__, name)
    # Without it, each algorithm keeps its own default (SAC: 1e-7; DQN: `adam_epsilon`) and its own rates.
    sac, _ = _learned_sac(0)
    assert {n: o.param_groups[0]["eps"] for n, o in sac.optimizers.items()} == dict.fromkeys(sac.optimizers, 1e-7)
    assert sac.optimizers["actor"].param_groups[0]["lr"] == SAC_CONFIG["optimization"]["actor_learning_rate"]
    dqn = DQNTorchPolicy(OBS, gym.spaces.Discrete(3), make_config(DQN_CONFIG, hiddens=[6], adam_epsilon=1e-4))
    assert dqn.optimizer.param_groups[0]["eps"] == 1e-4


@pytest.mark.parametrize("options,match", [
    ({"bogus": 1}, r"'optimizer'.*\['bogus'\]"),
    ({"lr": 0.1}, r"'optimizer'.*\['lr'\].*learning-rate keys"),
    ({"eps": -1.0}, r"'optimizer'.*Invalid epsilon"),
])
def test_bad_optimizer_options_raise_naming_the_key(options, match):
    with pytest.raises(ValueError, match=match):
        _learned_sac(0, optimizer=options)
    with pytest.raises(ValueError, match=match):
        DQNTorchPolicy(OBS, gym.spaces.Discrete(3), make_config(DQN_CONFIG, hiddens=[6], optimizer=options))


def test_td3_actor_optimizer_steps_every_policy_delay_updates():
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    policy = DDPGTorchPolicy(OBS, act_space, make_config(TD3_CONFIG, actor_hiddens=[8], critic_hiddens=[8],
                                                         policy_delay=3, grad_clip=10.0))
    batch = SampleBatch({k: v.numpy() for k, v in fixed_batch(act_space).items()})
    stepped, actor_moved = [], []
    for _ in range(7):
        stepped.append(policy.optimizers_to_step())
        before = [p.detach().clone() for p in policy.model.actor_parameters()]
        stats = policy.learn_on_batch(batch)["learner_stats"]
        actor_moved.append(not all(torch.equal(a, b) for a, b in zip(before, policy.model.actor_parameters())))
        assert ("actor_gnorm" in stats) == actor_moved[-1] and "critic_gnorm" in stats
    assert actor_moved == [True, False, False, True, False, False, True]
    assert stepped == [["critic", "actor"] if moved else ["critic"] for moved in actor_moved]

    def steps(name):
        return {int(s["step"]) for s in policy.optimizers[name].state_dict()["state"].values()}

    assert steps("critic") == {7} and steps("actor") == {3}
