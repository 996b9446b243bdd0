"""TorchPolicy: weights and state round trips, the NumPy fast path against the torch model,
sampling statistics, deterministic acting, seeding and RNG isolation, PPO/PG losses
against NumPy."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import validate_config
from rlfleet.models.distributions import Categorical, DiagGaussian
from rlfleet.fast.distributions import sample_numpy
from rlfleet.fast.inference import NumpyMLPInference
from rlfleet.policy.fast_plan import supports_fast_path
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
CARTPOLE_OBS = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
DISCRETE2 = gym.spaces.Discrete(2)
BOX_OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX_ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


def make_policy(obs_space=CARTPOLE_OBS, act_space=DISCRETE2, trainer_cls=PPOTrainer, worker_index=0, **config):
    cfg = trainer_cls.merge_trainer_configs(trainer_cls._default_config, config)
    validate_config(cfg)
    cfg["worker_index"] = worker_index
    return trainer_cls._policy_class(obs_space, act_space, cfg)


def _obs(n=16, dim=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def _torch_outputs(policy, obs):
    with torch.no_grad():
        out, _ = policy.model({SB.OBS: torch.as_tensor(obs)}, [], None)
        return out.numpy(), policy.model.value_function().numpy()


# --- weights and state -------------------------------------------------------------------------
def test_weights_round_trip_gives_identical_actions():
    a, b = make_policy(seed=1), make_policy(seed=2)
    obs = _obs()
    assert not np.array_equal(a.compute_actions(obs, explore=False)[2][SB.ACTION_DIST_INPUTS],
                              b.compute_actions(obs, explore=False)[2][SB.ACTION_DIST_INPUTS])
    b.set_weights(a.get_weights())
    for key, value in a.get_weights().items():
        np.testing.assert_array_equal(value, b.get_weights()[key])
    act_a, _, extra_a = a.compute_actions(obs, explore=False)
    act_b, _, extra_b = b.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(act_a, act_b)
    np.testing.assert_array_equal(extra_a[SB.ACTION_DIST_INPUTS], extra_b[SB.ACTION_DIST_INPUTS])
    np.testing.assert_array_equal(extra_a[SB.VF_PREDS], extra_b[SB.VF_PREDS])


def test_get_weights_returns_copies():
    p = make_policy(seed=0)
    w = p.get_weights()
    w["logits.bias"][:] = 123.0
    assert not np.any(p.get_weights()["logits.bias"] == 123.0)


def test_set_weights_shape_mismatch_names_tensor_and_shapes():
    p = make_policy(seed=0, model={"fcnet_hiddens": [8, 8]})
    w = p.get_weights()
    w["trunk.0.weight"] = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError) as e:
        p.set_weights(w)
    msg = str(e.value)
    assert "trunk.0.weight" in msg and "(3, 4)" in msg and "(8, 4)" in msg


def test_set_weights_missing_or_unexpected_key():
    p = make_policy(seed=0)
    w = p.get_weights()
    w.pop("logits.bias")
    w["bogus"] = np.zeros(1)
    with pytest.raises(ValueError, match=r"logits\.bias.*bogus|bogus.*logits\.bias"):
        p.set_weights(w)


def test_get_state_set_state_round_trip():
    a = make_policy(seed=0, kl_coeff=0.2)
    a.global_timestep = 1234
    a.kl_coeff = 0.7
    a.exploration.last_timestep = 99
    state = a.get_state()
    b = make_policy(seed=5)
    b.set_state(state)
    assert b.global_timestep == 1234 and b.kl_coeff == 0.7 and b.exploration.last_timestep == 99
    for key, value in a.get_weights().items():
        np.testing.assert_array_equal(value, b.get_weights()[key])


def test_set_state_applies_lr_schedule():
    p = make_policy(seed=0, lr_schedule=[[0, 0.1], [1000, 0.0]])
    state = p.get_state()
    state["global_timestep"] = 500
    p.set_state(state)
    assert p.cur_lr == pytest.approx(0.05)
    assert p.optimizer.param_groups[0]["lr"] == pytest.approx(0.05)


# --- the NumPy fast path ------------------------------------------------------------------------
@pytest.mark.parametrize("act_space", [DISCRETE2, gym.spaces.Discrete(5), BOX_ACT], ids=["d2", "d5", "box"])
@pytest.mark.parametrize("model", [
    {},
    {"vf_share_layers": True},
    {"fcnet_activation": "relu", "fcnet_hiddens": [16, 8, 4]},
    {"free_log_std": True},
    {"no_final_linear": True, "fcnet_hiddens": [16, 4]},
    {"fcnet_hiddens": []},
], ids=["default", "shared", "relu", "free_log_std", "no_final_linear", "linear"])
def test_fast_path_matches_torch(act_space, model):
    if model.get("no_final_linear") and isinstance(act_space, gym.spaces.Discrete) and act_space.n != 4:
        model = {**model, "fcnet_hiddens": [16, act_space.n]}
    if model.get("no_final_linear") and isinstance(act_space, gym.spaces.Box):
        model = {**model, "fcnet_hiddens": [16, 4]}
    if model.get("free_log_std") and not isinstance(act_space, gym.spaces.Box):
        pytest.skip("free_log_std is for Gaussian actions")
    p = make_policy(CARTPOLE_OBS, act_space, seed=0, model=model)
    assert supports_fast_path(p)
    obs = _obs(32)
    fast = NumpyMLPInference(p.model)
    assert fast.ok
    dist_np, values_np = fast(obs)
    dist_t, values_t = _torch_outputs(p, obs)
    np.testing.assert_allclose(dist_np, dist_t, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values_np, values_t, rtol=1e-5, atol=1e-5)
    # The policy's own acting path (fast) reports the same dist inputs and values.
    _, _, extra = p.compute_actions(obs, explore=True)
    np.testing.assert_allclose(extra[SB.ACTION_DIST_INPUTS], dist_t, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(extra[SB.VF_PREDS], values_t, rtol=1e-5, atol=1e-5)


def test_fast_path_matches_torch_for_few_rows():
    """Up to 16 rows the layers run transposed, with a bias block cached per row count: every
    count, in any order, gives torch's outputs."""
    p = make_policy(CARTPOLE_OBS, gym.spaces.Discrete(2), seed=0, model={})
    fast = NumpyMLPInference(p.model)
    for rows in (8, 1, 3, 16, 8, 17, 1):
        obs = _obs(rows)
        dist_np, values_np = fast(obs)
        dist_t, values_t = _torch_outputs(p, obs)
        np.testing.assert_allclose(dist_np, dist_t, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(values_np, values_t, rtol=1e-5, atol=1e-5)


def test_unsupported_activation_falls_back_to_torch():
    p = make_policy(seed=0, model={"fcnet_activation": "elu"})
    obs = _obs()
    _, _, extra = p.compute_actions(obs, explore=False)
    np.testing.assert_allclose(extra[SB.ACTION_DIST_INPUTS], _torch_outputs(p, obs)[0], rtol=1e-5, atol=1e-6)


def _ppo_batch(policy, n=64, seed=0):
    obs = _obs(n, seed=seed)
    actions, _, extra = policy.compute_actions(obs, explore=True)
    return SampleBatch({
        SB.OBS: obs, SB.ACTIONS: actions, SB.ACTION_LOGP: extra[SB.ACTION_LOGP],
        SB.ACTION_DIST_INPUTS: extra[SB.ACTION_DIST_INPUTS],
        SB.ADVANTAGES: np.random.default_rng(seed).normal(size=n).astype(np.float32),
        SB.VALUE_TARGETS: np.ones(n, np.float32),
    })


def test_fast_path_snapshot_refreshes_after_optimizer_step_and_set_weights():
    p = make_policy(seed=0, lr=0.05)
    obs = _obs()
    before = p.compute_actions(obs, explore=False)[2][SB.ACTION_DIST_INPUTS]
    p.learn_on_batch(_ppo_batch(p))
    after = p.compute_actions(obs, explore=False)[2]
    assert not np.allclose(before, after[SB.ACTION_DIST_INPUTS])
    dist_t, values_t = _torch_outputs(p, obs)
    np.testing.assert_allclose(after[SB.ACTION_DIST_INPUTS], dist_t, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(after[SB.VF_PREDS], values_t, rtol=1e-5, atol=1e-6)
    # And after set_weights.
    other = make_policy(seed=9)
    p.set_weights(other.get_weights())
    np.testing.assert_allclose(p.compute_actions(obs, explore=False)[2][SB.ACTION_DIST_INPUTS],
                               _torch_outputs(other, obs)[0], rtol=1e-5, atol=1e-6)


# --- sampling statistics -------------------------------------------------------------------------
PROBS = np.array([0.1, 0.2, 0.7])
N = 20000
# Chi-square with 2 degrees of freedom: P(X > 18.4) ~ 1e-4.
CHI2_LIMIT = 18.4


def _chi2(actions, probs):
    counts = np.bincount(np.asarray(actions), minlength=len(probs))
    expected = probs * len(actions)
    return float(((counts - expected) ** 2 / expected).sum())


def _fixed_logits_policy(seed=0):
    p = make_policy(CARTPOLE_OBS, gym.spaces.Discrete(3), seed=seed, model={"fcnet_hiddens": [8]})
    w = p.get_weights()
    w["logits.weight"] = np.zeros_like(w["logits.weight"])
    w["logits.bias"] = np.log(PROBS).astype(np.float32) + 3.0  # any shift: softmax is shift-invariant
    p.set_weights(w)
    return p


def test_categorical_policy_samples_follow_probabilities():
    p = _fixed_logits_policy()
    actions, _, extra = p.compute_actions(_obs(N), explore=True)
    assert _chi2(actions, PROBS) < CHI2_LIMIT
    # The reported log-probabilities are those of the drawn actions.
    np.testing.assert_allclose(extra[SB.ACTION_LOGP], np.log(PROBS)[actions], rtol=1e-5)
    np.testing.assert_allclose(extra[SB.ACTION_PROB], PROBS[actions], rtol=1e-5)


def test_categorical_samplers_follow_probabilities():
    logits = np.tile(np.log(PROBS), (N, 1)).astype(np.float32)
    g = torch.Generator().manual_seed(0)
    torch_draws = Categorical(torch.as_tensor(logits)).sample(g).numpy()
    assert _chi2(torch_draws, PROBS) < CHI2_LIMIT
    np_draws, logp = sample_numpy(Categorical, logits, True, np.random.default_rng(0))
    assert _chi2(np_draws, PROBS) < CHI2_LIMIT
    np.testing.assert_allclose(logp, np.log(PROBS)[np_draws], rtol=1e-5)
    # And they are not trivially constant.
    assert set(np.unique(np_draws)) == {0, 1, 2}


def test_gaussian_samplers_mean_and_std():
    mean, log_std = np.array([1.5, -0.5], np.float32), np.log(np.array([0.5, 2.0], np.float32))
    inputs = np.tile(np.concatenate([mean, log_std]), (N, 1)).astype(np.float32)
    g = torch.Generator().manual_seed(0)
    torch_draws = DiagGaussian(torch.as_tensor(inputs)).sample(g).numpy()
    np_draws, logp = sample_numpy(DiagGaussian, inputs, True, np.random.default_rng(0))
    for draws in (torch_draws, np_draws):
        # Standard error of the mean is std / sqrt(N) <= 0.014; 5 sigma tolerance.
        np.testing.assert_allclose(draws.mean(0), mean, atol=0.07)
        np.testing.assert_allclose(draws.std(0), [0.5, 2.0], rtol=0.03)
    expected_logp = DiagGaussian(torch.as_tensor(inputs)).logp(torch.as_tensor(np_draws)).numpy()
    np.testing.assert_allclose(logp, expected_logp, rtol=1e-4, atol=1e-4)


def test_gaussian_policy_samples_around_mean():
    p = make_policy(BOX_OBS, BOX_ACT, seed=0, model={"free_log_std": True})
    w = p.get_weights()
    w["log_std"] = np.log(np.array([0.3, 0.6], np.float32))
    p.set_weights(w)
    obs = np.tile(np.array([0.1, -0.2, 0.3], np.float32), (N, 1))
    actions, _, extra = p.compute_actions(obs, explore=True)
    mean = extra[SB.ACTION_DIST_INPUTS][0, :2]
    np.testing.assert_allclose(actions.mean(0), mean, atol=0.03)
    np.testing.assert_allclose(actions.std(0), [0.3, 0.6], rtol=0.03)


# --- deterministic acting --------------------------------------------------------------------------
def test_explore_false_is_argmax_and_repeatable():
    p = make_policy(CARTPOLE_OBS, gym.spaces.Discrete(3), seed=0)
    obs = _obs(50)
    a1, _, extra = p.compute_actions(obs, explore=False)
    a2, _, _ = p.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(a1, extra[SB.ACTION_DIST_INPUTS].argmax(1))
    # With exploration actions vary with fixed logits.
    _fixed = _fixed_logits_policy()
    assert len(set(_fixed.compute_actions(_obs(200), explore=True)[0])) == 3
    assert set(_fixed.compute_actions(_obs(200), explore=False)[0]) == {2}


def test_explore_false_is_the_gaussian_mean():
    p = make_policy(BOX_OBS, BOX_ACT, seed=0)
    obs = _obs(20, dim=3)
    a, _, extra = p.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(a, extra[SB.ACTION_DIST_INPUTS][:, :2])
    np.testing.assert_array_equal(a, p.compute_actions(obs, explore=False)[0])


def test_config_explore_false_is_the_default():
    p = make_policy(CARTPOLE_OBS, gym.spaces.Discrete(3), seed=0, explore=False)
    obs = _obs(50)
    np.testing.assert_array_equal(p.compute_actions(obs)[0], p.compute_actions(obs)[0])


def test_compute_single_action_unsquashes_box_actions():
    p = make_policy(BOX_OBS, gym.spaces.Box(2.0, 4.0, (2,), np.float32), seed=0)
    obs = np.zeros(3, np.float32)
    raw = p.compute_actions(obs[None], explore=False)[0][0]
    action, state, extra = p.compute_single_action(obs, explore=False)
    np.testing.assert_allclose(action, 2.0 + (np.clip(raw, -1, 1) + 1.0), rtol=1e-6)
    assert state == [] and SB.ACTION_DIST_INPUTS in extra
    raw_again, _, _ = p.compute_single_action(obs, explore=False, unsquash_actions=False)
    np.testing.assert_allclose(raw_again, raw)


# --- seeding and RNG isolation ----------------------------------------------------------------------
def _draws(p, n=5):
    obs = _obs(64)
    return np.stack([p.compute_actions(obs, explore=True)[0] for _ in range(n)])


@pytest.mark.parametrize("act_space,obs_space", [(DISCRETE2, CARTPOLE_OBS), (BOX_ACT, BOX_OBS)])
def test_same_seed_and_worker_index_same_weights_and_draws(act_space, obs_space):
    a = make_policy(obs_space, act_space, seed=42, worker_index=1)
    b = make_policy(obs_space, act_space, seed=42, worker_index=1)
    for key, value in a.get_weights().items():
        np.testing.assert_array_equal(value, b.get_weights()[key])
    obs = _obs(64, dim=obs_space.shape[0])
    for _ in range(3):
        np.testing.assert_array_equal(a.compute_actions(obs, explore=True)[0], b.compute_actions(obs, explore=True)[0])


def test_different_worker_index_different_draws():
    a = make_policy(seed=42, worker_index=1)
    b = make_policy(seed=42, worker_index=2)
    b.set_weights(a.get_weights())  # same weights: only the sampling streams differ
    assert not np.array_equal(_draws(a), _draws(b))


def test_different_seed_different_weights():
    a, b = make_policy(seed=1), make_policy(seed=2)
    assert not np.array_equal(a.get_weights()["trunk.0.weight"], b.get_weights()["trunk.0.weight"])


@pytest.mark.parametrize("seed", [0, None])
def test_policy_creation_leaves_global_rng_alone(seed):
    torch.manual_seed(1234)
    np.random.seed(1234)
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    p = make_policy(seed=seed)
    p.compute_actions(_obs(), explore=True)
    p.learn_on_batch(_ppo_batch(p))
    assert torch.equal(torch.get_rng_state(), torch_state)
    after = np.random.get_state()
    assert after[0] == np_state[0] and np.array_equal(after[1], np_state[1]) and after[2:] == np_state[2:]


def test_global_rng_does_not_change_seeded_policy():
    torch.manual_seed(1)
    a = make_policy(seed=3)
    torch.manual_seed(2)
    b = make_policy(seed=3)
    np.testing.assert_array_equal(a.get_weights()["trunk.0.weight"], b.get_weights()["trunk.0.weight"])


def test_torch_path_draws_are_seeded():
    # Models the fast path cannot run (elu) act through torch with the policy's generator.
    a = make_policy(seed=7, model={"fcnet_activation": "elu"})
    b = make_policy(seed=7, model={"fcnet_activation": "elu"})
    np.testing.assert_array_equal(_draws(a), _draws(b))


# --- losses against NumPy ------------------------------------------------------------------------
def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_ppo_loss_matches_numpy():
    p = make_policy(seed=0, clip_param=0.2, vf_clip_param=3.0, vf_loss_coeff=0.5, kl_coeff=0.3,
                    entropy_coeff=0.01)
    batch = _ppo_batch(p, n=32)
    # Move the old policy away from the current one so ratios are clipped somewhere.
    rng = np.random.default_rng(1)
    batch[SB.ACTION_DIST_INPUTS] = batch[SB.ACTION_DIST_INPUTS] + rng.normal(0, 0.5, (32, 2)).astype(np.float32)
    old_lp = _log_softmax(batch[SB.ACTION_DIST_INPUTS].astype(np.float64))
    batch[SB.ACTION_LOGP] = old_lp[np.arange(32), batch[SB.ACTIONS]].astype(np.float32)
    batch[SB.VALUE_TARGETS] = rng.normal(0, 3, 32).astype(np.float32)
    tensors = p.to_tensors(batch)
    loss, stats = p.loss(p.model, p.dist_class, tensors)
    loss = loss.detach()

    logits, values = (x.astype(np.float64) for x in _torch_outputs(p, batch[SB.OBS]))
    lp = _log_softmax(logits)
    a = batch[SB.ACTIONS]
    ratio = np.exp(lp[np.arange(32), a] - batch[SB.ACTION_LOGP])
    adv = batch[SB.ADVANTAGES].astype(np.float64)
    surrogate = np.minimum(adv * ratio, adv * np.clip(ratio, 0.8, 1.2))
    assert (np.abs(ratio - 1) > 0.2).any(), "the example should exercise the clip"
    kl = (np.exp(old_lp) * (old_lp - lp)).sum(1).mean()
    entropy = -(np.exp(lp) * lp).sum(1).mean()
    vf_loss = np.clip((values - batch[SB.VALUE_TARGETS]) ** 2, 0, 3.0).mean()
    total = -surrogate.mean() - 0.01 * entropy + 0.3 * kl + 0.5 * vf_loss
    assert float(stats["policy_loss"]) == pytest.approx(-surrogate.mean(), rel=1e-4, abs=1e-6)
    assert float(stats["kl"]) == pytest.approx(kl, rel=1e-4, abs=1e-6)
    assert float(stats["entropy"]) == pytest.approx(entropy, rel=1e-5)
    assert float(stats["vf_loss"]) == pytest.approx(vf_loss, rel=1e-4)
    assert float(loss) == pytest.approx(total, rel=1e-4, abs=1e-6)


def test_pg_loss_and_postprocessing_match_numpy():
    p = make_policy(trainer_cls=PGTrainer, seed=0, gamma=0.5)
    obs = _obs(4)
    batch = SampleBatch({SB.OBS: obs, SB.ACTIONS: np.array([0, 1, 1, 0]),
                         SB.REWARDS: np.array([1.0, 2.0, 3.0, 4.0], np.float32), SB.EPS_ID: np.array([1, 1, 1, 2]),
                         SB.DONES: np.array([False, False, True, True])})
    batch = p.postprocess_trajectory(batch)
    # Returns per episode with gamma 0.5: [1 + .5*2 + .25*3, 2 + .5*3, 3], [4]; never bootstrapped.
    np.testing.assert_allclose(batch[SB.ADVANTAGES], [2.75, 3.5, 3.0, 4.0])
    loss = p.loss(p.model, p.dist_class, p.to_tensors(batch))[0].detach()
    lp = _log_softmax(_torch_outputs(p, obs)[0].astype(np.float64))
    expected = -(lp[np.arange(4), batch[SB.ACTIONS]] * batch[SB.ADVANTAGES]).mean()
    assert float(loss) == pytest.approx(expected, rel=1e-5)


# --- several optimizers (issue 10) -------------------------------------------------------------------
def _two_optimizer_pg(grad_clip=None):
    """PG with its trunk and its logits layer under two optimizers, and a second loss that
    reaches both: what TorchPolicy must keep apart."""
    from rlfleet.algorithms.pg.pg import PGTorchPolicy, pg_loss

    class TwoOptimizerPG(PGTorchPolicy):
        def make_optimizers(self):
            head = list(self.model.logits.parameters())
            trunk = [p for p in self.model.parameters() if all(p is not h for h in head)]
            return {"trunk": self.make_adam(trunk, lr=0.01), "head": self.make_adam(head, lr=0.01)}

        def loss(self, model, dist_class, batch):
            total, stats = pg_loss(self, model, dist_class, batch)
            # The head's loss depends on the trunk too: its gradient must not reach the trunk.
            head_loss = model({SB.OBS: batch[SB.OBS]}, [], None)[0].pow(2).mean()
            return {"trunk": total, "head": head_loss}, stats

    cfg = PGTrainer.merge_trainer_configs(PGTrainer._default_config, dict(seed=0))
    validate_config(cfg)
    cfg["grad_clip"] = grad_clip  # PG's config has no grad_clip key; TorchPolicy reads it when present
    return TwoOptimizerPG(CARTPOLE_OBS, DISCRETE2, cfg)


def _pg_batch(seed=0, n=32):
    rng = np.random.default_rng(seed)
    return SampleBatch({SB.OBS: _obs(n, seed=seed), SB.ACTIONS: rng.integers(0, 2, n),
                        SB.ADVANTAGES: rng.normal(size=n).astype(np.float32)})


def test_each_optimizer_gets_only_its_own_loss_gradient():
    policy = _two_optimizer_pg()
    batch = _pg_batch()
    tensors = policy.to_tensors(batch)
    losses, _ = policy.loss(policy.model, policy.dist_class, tensors)
    expected = {}
    for name, optimizer in policy.optimizers.items():
        params = [p for g in optimizer.param_groups for p in g["params"]]
        # allow_unused: the value branch is in the trunk's group but not in the PG loss.
        expected[name] = torch.autograd.grad(losses[name], params, retain_graph=True, allow_unused=True)
    assert any(g is not None for g in expected["trunk"]) and all(g is not None for g in expected["head"])
    policy.learn_on_batch(batch)
    for name, optimizer in policy.optimizers.items():
        params = [p for g in optimizer.param_groups for p in g["params"]]
        for p, g in zip(params, expected[name]):
            if g is None:
                assert p.grad is None
            else:
                torch.testing.assert_close(p.grad, g, rtol=0, atol=0)
    assert policy.num_grad_updates == 1


def test_several_optimizers_report_a_gnorm_each_and_round_trip():
    policy = _two_optimizer_pg(grad_clip=1.0)
    stats = policy.learn_on_batch(_pg_batch())["learner_stats"]
    assert {"trunk_gnorm", "head_gnorm"} <= set(stats) and "grad_gnorm" not in stats
    assert "cur_lr" not in stats  # no optimizer follows `lr` here
    with pytest.raises(AttributeError, match="several optimizers"):
        policy.optimizer  # noqa: B018
    other = _two_optimizer_pg(grad_clip=1.0)
    other.set_state(policy.get_state())
    for name in policy.optimizers:
        a, b = policy.optimizers[name].state_dict(), other.optimizers[name].state_dict()
        assert a["param_groups"] == b["param_groups"]
        for i in a["state"]:
            assert all(torch.equal(a["state"][i][k], b["state"][i][k]) for k in a["state"][i])


def test_single_optimizer_is_default_and_loss_names_are_checked():
    policy = make_policy(seed=0, grad_clip=1.0)
    assert list(policy.optimizers) == ["default"] and policy.optimizer is policy.optimizers["default"]
    stats = policy.learn_on_batch(_ppo_batch(policy))["learner_stats"]
    assert "grad_gnorm" in stats and "cur_lr" in stats

    two = _two_optimizer_pg()
    two.loss = lambda model, dist_class, batch: ({"trunk": torch.zeros((), requires_grad=True)}, {})
    with pytest.raises(ValueError, match=r"\['head'\]"):
        two.learn_on_batch(_pg_batch())
