"""Property test of the NumPy learners (rlfleet/fast + rlfleet/algorithms/*/numpy_learner.py): for drawn configs
(algorithm, net sizes, activations, action space, loss coefficients, clipping) one update on
the fast path leaves the same gradients as autograd's and the same weights as torch's update;
a draw the NumPy maths do not compute falls back to torch and says why."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.sac import SACTrainer
from rlfleet.algorithms.td3 import TD3Trainer
from rlfleet.policy.sample_batch import SampleBatch as SB
from tests.numpy_learner_helpers import learner_policy, transitions as _transitions

TRAINERS = {"PPO": PPOTrainer, "SAC": SACTrainer, "TD3": TD3Trainer, "DQN": DQNTrainer}
SUPPORTED_ACTIVATIONS = ("tanh", "relu")
hiddens = st.lists(st.integers(3, 12), min_size=1, max_size=2)
activation = st.sampled_from(SUPPORTED_ACTIVATIONS + ("swish",))


def _policy(algorithm: str, env, **config):
    return learner_policy(TRAINERS[algorithm], env.observation_space, env.action_space, seed=11, **config)


@st.composite
def draws(draw, algorithm: str):
    grad_clip = draw(st.sampled_from([None, 0.5, 40.0]))
    if algorithm == "PPO":
        env_id = draw(st.sampled_from(["CartPole-v1", "Pendulum-v1"]))
        use_critic = draw(st.integers(0, 5)) > 0  # mostly True: False falls back
        config = {"model": {"fcnet_hiddens": draw(hiddens), "fcnet_activation": draw(activation),
                            "vf_share_layers": draw(st.booleans())},
                  "entropy_coeff": draw(st.sampled_from([0.0, 0.01])), "kl_coeff": draw(st.sampled_from([0.0, 0.3])),
                  "clip_param": draw(st.floats(0.05, 0.4)), "vf_clip_param": draw(st.floats(0.5, 20.0)),
                  "vf_loss_coeff": draw(st.floats(0.1, 1.0)), "use_critic": use_critic, "use_gae": use_critic}
        supported = use_critic and config["model"]["fcnet_activation"] in SUPPORTED_ACTIVATIONS
    elif algorithm == "SAC":
        env_id = "Pendulum-v1"
        act = draw(activation)
        config = {"Q_model": {"fcnet_hiddens": draw(hiddens), "fcnet_activation": act},
                  "policy_model": {"fcnet_hiddens": draw(hiddens)}, "twin_q": draw(st.booleans()),
                  "_deterministic_loss": draw(st.integers(0, 5)) == 0}
        supported = act in SUPPORTED_ACTIVATIONS and not config["_deterministic_loss"]
    elif algorithm == "TD3":
        env_id = "Pendulum-v1"
        act = draw(activation)
        config = {"actor_hiddens": draw(hiddens), "critic_hiddens": draw(hiddens), "actor_hidden_activation": act,
                  "use_huber": draw(st.booleans()), "l2_reg": draw(st.sampled_from([0.0, 1e-3])),
                  "policy_delay": draw(st.sampled_from([1, 2]))}
        supported = act in SUPPORTED_ACTIVATIONS
    else:
        env_id = "CartPole-v1"
        num_atoms = 1 if draw(st.integers(0, 5)) else 11
        config = {"model": {"fcnet_hiddens": draw(hiddens), "fcnet_activation": draw(activation)},
                  "hiddens": draw(hiddens), "dueling": draw(st.booleans()), "double_q": draw(st.booleans()),
                  "num_atoms": num_atoms}
        supported = num_atoms == 1 and config["model"]["fcnet_activation"] in SUPPORTED_ACTIVATIONS
    return algorithm, env_id, {"grad_clip": grad_clip, **config}, supported


def _ppo_batch(policy, n: int, rng: np.random.Generator) -> SB:
    obs = rng.normal(size=(n,) + policy.observation_space.shape).astype(np.float32)
    actions, _, extra = policy.compute_actions(obs, explore=True)
    return SB({SB.OBS: obs, SB.ACTIONS: actions, SB.ACTION_LOGP: extra[SB.ACTION_LOGP],
               SB.ACTION_DIST_INPUTS: extra[SB.ACTION_DIST_INPUTS],
               SB.ADVANTAGES: rng.normal(size=n).astype(np.float32),
               SB.VALUE_TARGETS: rng.normal(size=n).astype(np.float32)})


def _learn(policy, algorithm: str, batch: SB):
    if algorithm == "PPO":
        return policy.multi_epoch_sgd(batch.copy(), 1, len(batch), shuffle=False)
    return policy.learn_on_batch(batch.copy())


def _fast_gradients(policy):
    """`{(optimizer, i): the NumPy learner's gradient of parameter i}`, from its flat buffers."""
    learner = policy._numpy_learner
    adams = learner.adams if hasattr(learner, "adams") else {"default": learner.adam}
    return {(name, i): adam.grad_views[id(p)] for name, adam in adams.items()
            for i, p in enumerate(policy.optimizers[name].param_groups[0]["params"])}


@pytest.mark.parametrize("algorithm", sorted(TRAINERS))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_fast_update_is_autograds(algorithm, data):
    algorithm, env_id, config, supported = data.draw(draws(algorithm))
    env = gym.make(env_id)
    fast = _policy(algorithm, env, **config)
    torch_path = _policy(algorithm, env, fast_path="off", **config)
    torch_path.set_weights(fast.get_weights())
    batch = (_ppo_batch(fast, 48, np.random.default_rng(0)) if algorithm == "PPO"
             else _transitions(env_id, 48))
    torch_path.generator.set_state(fast.generator.get_state())  # the same target-smoothing / SAC noise
    out_fast, out_torch = _learn(fast, algorithm, batch), _learn(torch_path, algorithm, batch)
    plan = fast.fast_plan
    if not supported:
        assert plan.learner == "torch" and plan.learner_reason and fast._numpy_learner is None
        return
    assert plan.learner == "numpy", plan.learner_reason
    assert out_fast["learner_stats"].keys() == out_torch["learner_stats"].keys()
    for (name, i), grad in _fast_gradients(fast).items():
        param = torch_path.optimizers[name].param_groups[0]["params"][i]
        if name in torch_path.optimizers_to_step() or param.grad is not None:
            np.testing.assert_allclose(grad, param.grad.numpy(), atol=1e-5, rtol=1e-4, err_msg=f"{name}[{i}]")
    for key, value in fast.get_weights().items():
        np.testing.assert_allclose(value, torch_path.get_weights()[key], atol=1e-5, err_msg=key)


def test_a_falling_back_draw_names_its_reason():
    env = gym.make("CartPole-v1")
    policy = _policy("DQN", env, num_atoms=11)
    assert policy.fast_plan.learner == "torch" and "num_atoms=11" in policy.fast_plan.learner_reason
    with pytest.raises(ValueError, match="fast_path='require'.*num_atoms"):
        _policy("DQN", env, num_atoms=11, fast_path="require").fast_plan
