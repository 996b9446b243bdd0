"""Models and action distributions: fully connected net shapes, custom models through the
catalog (and through one PPO iteration), distributions against torch.distributions."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.config import MODEL_DEFAULTS
from rlfleet.models.catalog import ModelCatalog
from rlfleet.models.distributions import Categorical, DiagGaussian, MultiCategorical
from rlfleet.models.fcnet import FullyConnectedNetwork
from rlfleet.models.torch_model import TorchModel

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def _fcnet(num_outputs=2, action_space=gym.spaces.Discrete(2), **model):
    cfg = {**MODEL_DEFAULTS, **model}
    return FullyConnectedNetwork(OBS, action_space, num_outputs, cfg, "m")


def _linears(seq):
    return [(m.in_features, m.out_features) for m in seq if isinstance(m, nn.Linear)]


def _forward(model, n=5):
    obs = torch.randn(n, 4)
    out, state = model({"obs": obs}, [], None)
    return out, model.value_function(), state


# --- fully connected network --------------------------------------------------------------------
def test_fcnet_shared_layers_shapes():
    m = _fcnet(3, gym.spaces.Discrete(3), fcnet_hiddens=[32, 16], vf_share_layers=True)
    assert _linears(m.trunk) == [(4, 32), (32, 16)]
    assert (m.logits.in_features, m.logits.out_features) == (16, 3)
    assert m.value_trunk is None and (m.value_head.in_features, m.value_head.out_features) == (16, 1)
    out, value, state = _forward(m)
    assert out.shape == (5, 3) and value.shape == (5,) and state == []
    # The value loss trains the shared trunk.
    value.sum().backward()
    assert m.trunk[0].weight.grad is not None and m.trunk[0].weight.grad.abs().sum() > 0


def test_fcnet_separate_value_branch_shapes():
    m = _fcnet(2, fcnet_hiddens=[32, 16], vf_share_layers=False)
    assert _linears(m.trunk) == [(4, 32), (32, 16)]
    assert _linears(m.value_trunk) == [(4, 32), (32, 16)]
    assert (m.value_head.in_features, m.value_head.out_features) == (16, 1)
    out, value, _ = _forward(m)
    assert out.shape == (5, 2) and value.shape == (5,)
    # The value loss does not reach the policy trunk.
    value.sum().backward()
    assert m.trunk[0].weight.grad is None
    assert m.value_trunk[0].weight.grad.abs().sum() > 0
    n_params = sum(p.numel() for p in m.parameters())
    assert n_params == 2 * (4 * 32 + 32 + 32 * 16 + 16) + (16 * 2 + 2) + (16 + 1)


def test_fcnet_free_log_std():
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    m = _fcnet(4, box, fcnet_hiddens=[8], free_log_std=True)
    assert m.logits.out_features == 2
    assert m.log_std.shape == (2,)
    with torch.no_grad():
        m.log_std.copy_(torch.tensor([0.3, -0.7]))
    out, _, _ = _forward(m, n=6)
    assert out.shape == (6, 4)
    np.testing.assert_allclose(out[:, 2:].detach().numpy(), np.tile([0.3, -0.7], (6, 1)), rtol=1e-6)
    assert "log_std" in dict(m.named_parameters())
    with pytest.raises(ValueError, match="even"):
        _fcnet(3, box, free_log_std=True)


def test_fcnet_no_final_linear():
    m = _fcnet(2, fcnet_hiddens=[32, 16], no_final_linear=True, fcnet_activation="tanh")
    # The last hidden layer is sized to the outputs and is the output layer (with activation).
    assert _linears(m.trunk) == [(4, 32), (32, 2)]
    assert isinstance(m.logits, nn.Identity)
    out, value, _ = _forward(m)
    assert out.shape == (5, 2) and value.shape == (5,)
    assert out.abs().max() <= 1.0  # tanh-bounded


def test_fcnet_no_hidden_layers_is_linear():
    m = _fcnet(2, fcnet_hiddens=[], vf_share_layers=True)
    assert (m.logits.in_features, m.logits.out_features) == (4, 2)
    obs = torch.randn(3, 4)
    out, _ = m({"obs": obs}, [], None)
    expected = obs @ m.logits.weight.T + m.logits.bias
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-6)


def test_fcnet_initial_outputs_are_small():
    # normc(0.01) on the heads: near-uniform initial policy and near-zero values.
    m = _fcnet(2, fcnet_hiddens=[64, 64])
    out, value, _ = _forward(m, n=100)
    assert out.abs().max() < 0.1 and value.abs().max() < 0.1


def test_unknown_activation():
    with pytest.raises(ValueError, match="sigmoidal"):
        _fcnet(2, fcnet_activation="sigmoidal")


# --- catalog ----------------------------------------------------------------------------------------
def test_get_action_dist_per_space():
    assert ModelCatalog.get_action_dist(gym.spaces.Discrete(5), {}) == (Categorical, 5)
    assert ModelCatalog.get_action_dist(gym.spaces.Box(-1, 1, (3,)), {}) == (DiagGaussian, 6)
    dist, n = ModelCatalog.get_action_dist(gym.spaces.MultiDiscrete([2, 3]), {})
    assert n == 5
    d = dist(torch.zeros(4, 5))
    assert d.sample(torch.Generator().manual_seed(0)).shape == (4, 2)
    with pytest.raises(ValueError, match="Unsupported action space"):
        ModelCatalog.get_action_dist(gym.spaces.Text(5), {})


class TinyModel(TorchModel):
    """A custom model: one shared hidden layer of `width` units (custom_model_config)."""

    forward_calls = 0

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, width=8):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.width = width
        self.body = nn.Sequential(nn.Linear(int(np.prod(obs_space.shape)), width), nn.Tanh())
        self.pi = nn.Linear(width, num_outputs)
        self.vf = nn.Linear(width, 1)
        self._h = None

    def forward(self, input_dict, state, seq_lens):
        TinyModel.forward_calls += 1
        self._h = self.body(input_dict["obs"].float())
        return self.pi(self._h), state

    def value_function(self):
        return self.vf(self._h).squeeze(-1)


def test_custom_model_through_catalog():
    ModelCatalog.register_custom_model("tiny_catalog", TinyModel)
    m = ModelCatalog.get_model(OBS, gym.spaces.Discrete(2), 2,
                               {**MODEL_DEFAULTS, "custom_model": "tiny_catalog",
                                "custom_model_config": {"width": 5}})
    assert isinstance(m, TinyModel) and m.width == 5
    # A class works as well as a registered name.
    assert isinstance(ModelCatalog.get_model(OBS, gym.spaces.Discrete(2), 2, {"custom_model": TinyModel}), TinyModel)


def test_custom_model_trains_with_ppo(tmp_path):
    ModelCatalog.register_custom_model("tiny_ppo", TinyModel)
    trainer = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
        "seed": 0, "train_batch_size": 128, "rollout_fragment_length": 64, "sgd_minibatch_size": 64,
        "num_sgd_iter": 2, "model": {"custom_model": "tiny_ppo", "custom_model_config": {"width": 12}},
    })
    try:
        policy = trainer.get_policy()
        assert isinstance(policy.model, TinyModel) and policy.model.width == 12
        before = {k: v.copy() for k, v in policy.get_weights().items()}
        TinyModel.forward_calls = 0
        result = trainer.train()
        assert TinyModel.forward_calls >= 128  # acted on every step and learned through it
        assert result["timesteps_total"] == 128
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"])
        after = policy.get_weights()
        assert set(after) == {"body.0.weight", "body.0.bias", "pi.weight", "pi.bias", "vf.weight", "vf.bias"}
        assert any(not np.array_equal(before[k], after[k]) for k in after)
    finally:
        trainer.stop()


def test_unknown_custom_model(tmp_path):
    with pytest.raises(ValueError, match="no_such_model.*register_custom_model"):
        ModelCatalog.get_model(OBS, gym.spaces.Discrete(2), 2, {"custom_model": "no_such_model"})
    with pytest.raises(ValueError, match="no_such_model"):
        PPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={"model": {"custom_model": "no_such_model"}})


# --- distributions against torch.distributions ------------------------------------------------------
def test_categorical_against_torch():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 4, generator=g)
    other = torch.randn(7, 4, generator=g)
    actions = torch.randint(0, 4, (7,), generator=g)
    ours, ref = Categorical(logits), torch.distributions.Categorical(logits=logits)
    ref_other = torch.distributions.Categorical(logits=other)
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    torch.testing.assert_close(ours.kl(Categorical(other)), torch.distributions.kl_divergence(ref, ref_other))
    torch.testing.assert_close(ours.deterministic_sample(), logits.argmax(-1))


def test_multi_categorical_against_torch():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 5, generator=g)
    other = torch.randn(6, 5, generator=g)
    actions = torch.stack([torch.randint(0, 2, (6,), generator=g), torch.randint(0, 3, (6,), generator=g)], -1)
    ours = MultiCategorical(logits, None, [2, 3])
    parts = [torch.distributions.Categorical(logits=x) for x in torch.split(logits, [2, 3], -1)]
    parts_o = [torch.distributions.Categorical(logits=x) for x in torch.split(other, [2, 3], -1)]
    torch.testing.assert_close(ours.logp(actions), parts[0].log_prob(actions[:, 0]) + parts[1].log_prob(actions[:, 1]))
    torch.testing.assert_close(ours.entropy(), parts[0].entropy() + parts[1].entropy())
    kl = sum(torch.distributions.kl_divergence(p, q) for p, q in zip(parts, parts_o))
    torch.testing.assert_close(ours.kl(MultiCategorical(other, None, [2, 3])), kl)


def test_diag_gaussian_against_torch():
    g = torch.Generator().manual_seed(2)
    inputs = torch.randn(8, 6, generator=g)
    other = torch.randn(8, 6, generator=g)
    actions = torch.randn(8, 3, generator=g)

    def ref(x):
        mean, log_std = x.chunk(2, -1)
        return torch.distributions.Independent(torch.distributions.Normal(mean, log_std.exp()), 1)

    ours = DiagGaussian(inputs)
    torch.testing.assert_close(ours.logp(actions), ref(inputs).log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref(inputs).entropy())
    torch.testing.assert_close(ours.kl(DiagGaussian(other)), torch.distributions.kl_divergence(ref(inputs), ref(other)))
    torch.testing.assert_close(ours.deterministic_sample(), inputs[:, :3])
    assert DiagGaussian.required_model_output_shape(gym.spaces.Box(-1, 1, (3,)), {}) == 6
