"""The PPO NumPy learner (rlfleet/algorithms/ppo/numpy_learner.py) against the torch path:
the same weights, optimizer state and stats after several passes on real CartPole / Pendulum
batches, for every option it covers; and the cases it leaves to torch."""
import numpy as np
import pytest
import torch

from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.algorithms.ppo.numpy_learner import unsupported_reason
from rlfleet.algorithms.ppo.ppo import standardized
from rlfleet.policy.sample_batch import SampleBatch

from tests.helpers import assert_same_learner_state, needs_mujoco, optimizer_arrays

BASE = {"num_workers": 0, "seed": 3, "num_envs_per_worker": 2, "rollout_fragment_length": 128,
        "train_batch_size": 256, "sgd_minibatch_size": 64, "num_sgd_iter": 3,
        "model": {"fcnet_hiddens": [32, 32]}}


def _pair(env, overrides):
    fused = PPOTrainer(env=env, config={**BASE, **overrides, "model": {**BASE["model"], **overrides.get("model", {})}})
    plain = PPOTrainer(env=env, config={**BASE, **overrides, "fast_path": "off",
                                        "model": {**BASE["model"], **overrides.get("model", {})}})
    return fused, plain


def _batch(trainer):
    batch = trainer.workers.local_worker().sample()
    batch[SampleBatch.ADVANTAGES] = standardized(batch[SampleBatch.ADVANTAGES])
    return batch


CASES = {
    "categorical-separate": ("CartPole-v1", {}),
    "categorical-shared-entropy-kl-clip": ("CartPole-v1", {
        "model": {"vf_share_layers": True}, "entropy_coeff": 0.01, "kl_coeff": 0.3, "grad_clip": 0.5,
        "vf_clip_param": 2.0}),
    "categorical-relu-no-final-linear": ("CartPole-v1", {
        "model": {"fcnet_activation": "relu", "no_final_linear": True, "fcnet_hiddens": [16, 2]}}),
    "gaussian": ("Pendulum-v1", {"entropy_coeff": 0.01, "grad_clip": 1.0}),
    "gaussian-free-log-std-shared": ("Pendulum-v1", {
        "model": {"free_log_std": True, "vf_share_layers": True}, "entropy_coeff": 0.02, "kl_coeff": 0.5}),
    "gaussian-3d-actions": ("Hopper-v5", {"entropy_coeff": 0.01}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_learner_update_matches_torch(case):
    env, overrides = CASES[case]
    needs_mujoco(env)
    fused, plain = _pair(env, overrides)
    try:
        pf, pp = fused.get_policy(), plain.get_policy()
        assert unsupported_reason(pf) is None
        pp.set_weights(pf.get_weights())
        for _ in range(2):  # two train batches: the optimizer state carries over
            batch = _batch(fused)
            # Sampling drew from the NumPy-learner policy's RNG: the same minibatch order for both.
            pp.np_random.bit_generator.state = pf.np_random.bit_generator.state
            info_f = pf.multi_epoch_sgd(batch.copy(), 3, 64)
            info_p = pp.multi_epoch_sgd(batch.copy(), 3, 64)
        assert pf._numpy_learner is not None and pp._numpy_learner is None  # each took its own path
        # The sampler acts with the trained weights (its NumPy snapshot was rebuilt).
        np.testing.assert_array_equal(pf._numpy_net().trunk.layers[0][2], pf.model.trunk[0].weight.detach().numpy())
        assert_same_learner_state(pf, pp, info_f["learner_stats"], info_p["learner_stats"],
                                  weight_tol=(1e-4, 2e-6), moment_rtol=1e-3, stats_rel=1e-4)
        assert pf.num_grad_updates == pp.num_grad_updates == 2 * 3 * 4
    finally:
        fused.stop()
        plain.stop()


def test_numpy_learner_update_keeps_checkpointed_optimizer_state(tmp_path):
    """A restored checkpoint's Adam moments are the ones the NumPy learner continues from."""
    trainer = PPOTrainer(env="CartPole-v1", config=BASE)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        before = optimizer_arrays(trainer.get_policy())
        trainer.train()
        trainer.restore(path)
        after = optimizer_arrays(trainer.get_policy())
        for k in before:
            np.testing.assert_array_equal(before[k], after[k], err_msg=k)
        result = trainer.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    finally:
        trainer.stop()


def test_numpy_learner_update_skips_nonfinite_updates():
    trainer = PPOTrainer(env="CartPole-v1", config={**BASE, "max_nonfinite_updates": 1000})
    try:
        policy = trainer.get_policy()
        batch = _batch(trainer)
        batch[SampleBatch.ADVANTAGES] = np.full_like(batch[SampleBatch.ADVANTAGES], np.nan)
        before = policy.get_weights()
        info = policy.multi_epoch_sgd(batch, 2, 64)
        assert info["num_nonfinite_updates"] == 8
        for k, v in policy.get_weights().items():
            np.testing.assert_array_equal(v, before[k])
    finally:
        trainer.stop()


def test_other_models_keep_the_torch_path():
    trainer = PPOTrainer(env="CartPole-v1", config={**BASE, "model": {"use_lstm": True, "lstm_cell_size": 8}})
    try:
        policy = trainer.get_policy()
        assert "FullyConnectedNetwork" in unsupported_reason(policy)
        trainer.train()
        assert policy._numpy_learner is None
    finally:
        trainer.stop()
    trainer = PPOTrainer(env="CartPole-v1", config={**BASE, "optimizer": {"weight_decay": 0.01}})
    try:
        assert "weight decay" in unsupported_reason(trainer.get_policy())
    finally:
        trainer.stop()
    trainer = PPOTrainer(env="CartPole-v1", config={**BASE, "use_critic": False, "use_gae": False})
    try:
        assert "use_critic" in unsupported_reason(trainer.get_policy())
        trainer.train()
    finally:
        trainer.stop()
    assert torch.get_default_dtype() == torch.float32


def test_acting_snapshot_follows_updates_made_before_the_nan_guard_raised():
    from rlfleet.policy.nan_guard import NonFiniteUpdateError

    trainer = PPOTrainer(env="CartPole-v1", config={**BASE, "max_nonfinite_updates": 0})
    try:
        policy = trainer.get_policy()
        batch = _batch(trainer)
        policy._numpy_net()  # the snapshot acting uses, before the updates
        batch[SampleBatch.ADVANTAGES][128:] = np.nan  # minibatches 1-2 step, the 3rd raises
        with pytest.raises(NonFiniteUpdateError):
            policy.multi_epoch_sgd(batch, 1, 64, shuffle=False)
        assert policy.num_grad_updates == 2
        np.testing.assert_array_equal(policy._numpy_net().trunk.layers[0][2], policy.model.trunk[0].weight.detach().numpy())
    finally:
        trainer.stop()
