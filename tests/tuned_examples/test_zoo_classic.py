"""RL-Zoo translations for A2C and PPO on CartPole (issue 18): the Zoo's SB3 hyperparameters,
written as rlfleet keys in tuned_examples/{a2c,ppo}/cartpole-*-zoo.yaml, take the update SB3
takes. The Zoo budgets run in `benchmarks/zoo.py`; the first stretches in tests/tuned_examples/test_learning.py."""
from __future__ import annotations

import copy

import pytest
import torch

from rlfleet.algorithms.a2c import A2CTrainer
from rlfleet.policy.sample_batch import SampleBatch
from tests.helpers import load_tuned_example

SB = SampleBatch


def test_a2c_zoo_example_takes_sb3s_rmsprop_step(tmp_path):
    # SB3's A2C: mean policy-gradient loss + vf_coef 0.5 * mean squared error, gradient norm
    # clipped at 0.5, torch RMSprop(lr 7e-4, alpha 0.99, eps 1e-5). rlfleet's loss is a sum over
    # the 40 rows (and halves the squared error): the YAML's vf_loss_coeff 1.0, grad_clip 20
    # and epsilon 4e-4 make the summed update equal SB3's.
    example = load_tuned_example("a2c/cartpole-a2c-zoo.yaml")
    trainer = A2CTrainer(env=example.env, config=dict(example.config, log_sys_usage=False, seed=3),
                         logdir=str(tmp_path))
    try:
        policy = trainer.get_policy()
        batch = trainer.workers.local_worker().sample()
        assert batch.count == 40 and isinstance(policy.optimizer, torch.optim.RMSprop)
        reference = copy.deepcopy(policy.model)
        optimizer = torch.optim.RMSprop(reference.parameters(), lr=7e-4, alpha=0.99, eps=1e-5)
        norms = []
        for _ in range(3):  # a few steps, so that the running mean square matters
            t = {k: torch.as_tensor(batch[k]) for k in (SB.OBS, SB.ACTIONS, SB.ADVANTAGES, SB.VALUE_TARGETS)}
            logits, _ = reference({"obs": t[SB.OBS]}, [], None)
            logp = policy.dist_class(logits, reference).logp(t[SB.ACTIONS])
            loss = (-(logp * t[SB.ADVANTAGES]).mean()
                    + 0.5 * torch.nn.functional.mse_loss(reference.value_function(), t[SB.VALUE_TARGETS]))
            optimizer.zero_grad()
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)))
            optimizer.step()
            policy.learn_on_batch(batch)
        assert max(norms) > 0.5, norms  # the clip is exercised
        for mine, sb3 in zip(policy.model.parameters(), reference.parameters()):
            torch.testing.assert_close(mine, sb3, rtol=1e-4, atol=1e-6)
    finally:
        trainer.stop()


def test_a2c_rmsprop_needs_its_own_keys_not_adams(tmp_path):
    with pytest.raises(ValueError, match="opt_type"):
        A2CTrainer(env="CartPole-v1", config={"opt_type": "rmsprop", "optimizer": {"eps": 1e-5}},
                   logdir=str(tmp_path))
    with pytest.raises(ValueError, match="opt_type"):
        A2CTrainer(env="CartPole-v1", config={"opt_type": "sgd"}, logdir=str(tmp_path))


def test_ppo_zoo_example_decays_lr_to_zero_over_the_zoo_budget():
    example = load_tuned_example("ppo/cartpole-ppo-zoo.yaml")
    cfg = example.config
    # SB3's `lin_1e-3`: 1e-3 * (1 - progress), progress = steps / n_timesteps.
    assert cfg["lr_schedule"] == [[0, 1e-3], [example.stop["timesteps_total"], 0.0]]
    # One minibatch per epoch (SB3: batch_size 256 = n_steps 32 * n_envs 8): SB3's per-minibatch
    # advantage normalisation is rlfleet's per-train-batch one.
    assert cfg["sgd_minibatch_size"] == cfg["train_batch_size"] == 32 * 8
