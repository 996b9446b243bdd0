"""The lean Adam (rlfleet/policy/optim.py) against torch.optim.Adam: the same weights after
many steps (weight decay, AMSGrad, maximize, gradient clipping, several groups, parameters
without a gradient), state round trips in both directions, and a PPO policy learning with it
exactly as with torch.optim.Adam, through get_state / set_state."""
from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import validate_config
from rlfleet.policy import optim
from rlfleet.policy.optim import Adam
from rlfleet.policy.optimizer_choice import build_adam
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import load_optimizer_state, optimizer_state

SB = SampleBatch
STEPS = 60


def _net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 3))


def _train(make_opt, steps=STEPS, clip=None, reload_at=None, skip_grad=None, groups=False):
    """`steps` updates of a small net on a fixed stream of batches; returns (net, optimizer)."""
    net = _net()
    params = ([{"params": list(net[0].parameters())}, {"params": list(net[2:].parameters()), "lr": 1e-3}]
              if groups else net.parameters())
    opt = make_opt(params)
    gen = torch.Generator().manual_seed(1)
    for i in range(steps):
        x = torch.randn(16, 4, generator=gen)
        loss = (net(x) ** 2).mean() + 0.1 * net(x).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if skip_grad is not None and i % 3 == 0:
            net[skip_grad].weight.grad = None  # torch skips it: no moment update, no step count
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(list(net.parameters()), clip)
        opt.step()
        if reload_at == i:
            saved = opt.state_dict()
            opt = make_opt(params if groups else net.parameters())
            opt.load_state_dict(saved)
    return net, opt


def _max_diff(a, b):
    return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters()))


OPTIONS = [
    {},
    {"weight_decay": 0.01},
    {"weight_decay": 0.01, "decoupled_weight_decay": True},
    {"amsgrad": True},
    {"maximize": True},
    {"eps": 1e-7, "betas": (0.8, 0.95)},
]


CASES = [(options, None) for options in OPTIONS] + [({}, 0.5), ({"weight_decay": 0.01}, 0.5)]


@pytest.mark.parametrize("options,clip", CASES, ids=lambda o: "-".join(o) or "default" if isinstance(o, dict) else f"clip{o}")
def test_same_weights_as_torch_adam(options, clip):
    ref, ref_opt = _train(lambda p: torch.optim.Adam(p, lr=3e-3, **options), clip=clip)
    net, opt = _train(lambda p: Adam(p, lr=3e-3, **options), clip=clip)
    assert _max_diff(ref, net) <= 1e-6
    assert _max_diff(ref, _net()) > 1e-2  # it did learn
    # The same state, entry by entry.
    ref_sd, sd = ref_opt.state_dict(), opt.state_dict()
    assert ref_sd["param_groups"] == sd["param_groups"]
    assert ref_sd["state"].keys() == sd["state"].keys()
    for i, entry in ref_sd["state"].items():
        assert entry.keys() == sd["state"][i].keys()
        for key, value in entry.items():
            torch.testing.assert_close(sd["state"][i][key], value, atol=1e-6, rtol=0)


@pytest.mark.parametrize("case", ["groups", "missing_grads", "reload"])
def test_same_weights_with_groups_missing_gradients_and_reloads(case):
    kwargs = {"groups": {"groups": True}, "missing_grads": {"skip_grad": 2}, "reload": {"reload_at": 40}}[case]
    ref, _ = _train(lambda p: torch.optim.Adam(p, lr=3e-3, weight_decay=0.01), **kwargs)
    net, opt = _train(lambda p: Adam(p, lr=3e-3, weight_decay=0.01), **kwargs)
    assert _max_diff(ref, net) <= 1e-6
    if case == "missing_grads":  # step counts parted ways: the per-tensor path took over, still exact
        steps = {int(s["step"]) for s in opt.state_dict()["state"].values()}
        assert steps == {STEPS, STEPS - STEPS // 3}


def test_states_load_across_the_two_optimizers():
    """A state written by torch.optim.Adam continues identically in the lean Adam, and back."""
    ref, ref_opt = _train(lambda p: torch.optim.Adam(p, lr=3e-3, amsgrad=True), steps=2 * STEPS)
    for first, second in ((torch.optim.Adam, Adam), (Adam, torch.optim.Adam)):
        net, opt = _train(lambda p: first(p, lr=3e-3, amsgrad=True), steps=STEPS)
        # Through the checkpoint format (NumPy arrays, str keys), as policies save it.
        saved = optimizer_state(opt)
        switched = second(net.parameters(), lr=3e-3, amsgrad=True)
        load_optimizer_state(switched, saved)
        gen = torch.Generator().manual_seed(1)
        for _ in range(STEPS):  # replay the stream's first half to reach the same batches
            torch.randn(16, 4, generator=gen)
        for _ in range(STEPS):
            x = torch.randn(16, 4, generator=gen)
            loss = (net(x) ** 2).mean() + 0.1 * net(x).sum()
            switched.zero_grad()
            loss.backward()
            switched.step()
        assert _max_diff(ref, net) <= 1e-6, (first.__name__, second.__name__)


def test_adam_takes_torch_adams_arguments_and_messages():
    torch_args = set(inspect.signature(torch.optim.Adam).parameters) - {"self", "params"}
    assert set(optim.ADAM_DEFAULTS) == torch_args
    assert set(inspect.signature(Adam).parameters) - {"params"} == torch_args
    for bad, match in (({"eps": -1.0}, "Invalid epsilon"), ({"betas": (1.0, 0.9)}, "beta parameter at index 0"),
                       ({"weight_decay": -1}, "Invalid weight_decay")):
        with pytest.raises(ValueError, match=match):
            torch.optim.Adam(_net().parameters(), **bad)
        with pytest.raises(ValueError, match=f"'optimizer'.*{match}"):
            build_adam(_net().parameters(), 1e-3, {}, bad)
    with pytest.raises(ValueError, match=r"'optimizer'.*\['bogus'\]"):
        build_adam(_net().parameters(), 1e-3, {}, {"bogus": 1})


def test_build_adam_falls_back_to_torch_for_what_only_torch_has():
    assert type(build_adam(_net().parameters(), 1e-3, {"eps": 1e-7}, {})) is Adam
    assert type(build_adam(_net().parameters(), 1e-3, {}, {"foreach": False})) is Adam
    fallback = build_adam(_net().parameters(), 1e-3, {}, {"differentiable": True})
    assert type(fallback) is torch.optim.Adam and fallback.param_groups[0]["differentiable"]


# --- in a policy ---------------------------------------------------------------------------------
def _policy(seed=0, **config):
    cfg = PPOTrainer.merge_trainer_configs(PPOTrainer._default_config, {"seed": seed, "model": {"fcnet_hiddens": [16]},
                                                                        **config})
    validate_config(cfg)
    return PPOTrainer._policy_class(gym.spaces.Box(-5.0, 5.0, (4,), np.float32), gym.spaces.Discrete(2), cfg)


def _batch(policy, n=64, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    actions, _, extra = policy.compute_actions(obs)
    return SampleBatch({SB.OBS: obs, SB.ACTIONS: actions, **extra,
                        SB.ADVANTAGES: rng.normal(size=n).astype(np.float32),
                        SB.VALUE_TARGETS: rng.normal(size=n).astype(np.float32)})


def test_ppo_policy_learns_as_with_torch_adam_and_round_trips_its_state():
    config = {"grad_clip": 0.5, "optimizer": {"weight_decay": 1e-3}, "kl_coeff": 0.2}
    lean, ref = _policy(**config), _policy(**config)
    ref_opt = torch.optim.Adam(ref.model.parameters(), lr=ref.cur_lr, weight_decay=1e-3)
    ref.learning.built = None
    ref.make_optimizers = lambda: {"default": ref_opt}
    assert type(lean.optimizer) is Adam and ref.optimizer is ref_opt
    batch = _batch(_policy(seed=5))  # acting draws from a policy's RNG: not from these two
    for policy in (lean, ref):
        policy.multi_epoch_sgd(batch, num_sgd_iter=4, minibatch_size=16)
    for name, value in ref.get_weights().items():
        np.testing.assert_allclose(lean.get_weights()[name], value, atol=1e-6, rtol=0)
    # A restored copy continues exactly as the original.
    copy = _policy(seed=7, **config)
    copy.set_state(lean.get_state())
    for policy in (lean, copy):
        policy.multi_epoch_sgd(batch, num_sgd_iter=2, minibatch_size=16)
    for name, value in lean.get_weights().items():
        np.testing.assert_array_equal(copy.get_weights()[name], value)
    assert optimizer_state(copy.optimizer)["param_groups"] == optimizer_state(lean.optimizer)["param_groups"]


def test_a_policy_that_only_acts_builds_no_optimizer():
    trained = _policy()
    trained.learn_on_batch(_batch(_policy(seed=5)))
    actor = _policy(seed=3)
    actor.set_state(trained.get_state())  # a restored evaluation worker: weights, RNG, optimizer state
    actor.compute_actions(np.zeros((3, 4), np.float32))
    assert actor.learning.built is None
    # Learning builds it, with the state it was given.
    step = {int(s["step"]) for s in actor.optimizer.state_dict()["state"].values()}
    assert step == {1}
    with pytest.raises(ValueError, match="optimizer"):
        _policy(optimizer={"eps": -1.0})  # a bad `optimizer` entry still fails at construction


@pytest.mark.parametrize("max_norm", [0.05, 1e6])
def test_clip_grad_norm_matches_torch(max_norm):
    from rlfleet.policy.optim import clip_grad_norm

    nets = [_net(), _net()]
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(3))
    for net in nets:
        (net(x) ** 2).mean().backward()
    total_ref = torch.nn.utils.clip_grad_norm_(list(nets[0].parameters()), max_norm)
    total = clip_grad_norm(list(nets[1].parameters()), max_norm)
    assert float(total) == float(total_ref)
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=0, rtol=0)
