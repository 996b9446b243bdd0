"""MAML: the functional inner step against a plain autograd step, the second-order meta
gradient, a seeded learning signal on point navigation, checkpoint round trip, remote
workers, export of the meta-policy, and the errors a user can cause."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.algorithms.maml import MAMLTrainer, adapt, forward_with, maml_loss
from rlfleet.algorithms.maml.adaptation import model_params
from rlfleet.algorithms.maml.task_rollouts import episode_returns, rollout_task
from rlfleet.env.examples.point_navigation import PointNavigationEnv
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.trainer import Trainer

from tests.helpers import assert_export_acts_as_trainer

SB = SampleBatch
# Near-default settings (the tuned example's live in tuned_examples/maml/): small batches and
# a 1-step adaptation, goals uniform in the square (the tuned example uses the circle).
SMALL = {"seed": 3, "num_workers": 0, "meta_batch_size": 2, "rollout_fragment_length": 40, "log_sys_usage": False,
         "model": {"fcnet_hiddens": [16]}, "env_config": {"goal_sampling": "square", "horizon": 10}}


def make(tmp_path, **overrides):
    return MAMLTrainer(config={**SMALL, **overrides}, env=PointNavigationEnv, logdir=str(tmp_path))


def task_batches(trainer, task):
    worker = trainer.workers.local_worker()
    return rollout_task(worker, task, int(trainer.config["inner_adaptation_steps"]))


def test_the_functional_inner_step_is_a_gradient_step_of_the_policy_loss(tmp_path):
    trainer = make(tmp_path)
    try:
        policy = trainer.get_policy()
        batch = task_batches(trainer, np.array([0.5, -0.5])).batches[0]
        tensors = policy.to_tensors(batch)
        # The plain autograd gradient of the policy's own loss (model.forward, value_function()).
        policy.model.zero_grad()
        loss, _ = policy.loss(policy.model, policy.dist_class, tensors)
        loss.backward()
        want = {k: (p - 0.1 * p.grad).detach() for k, p in policy.model.named_parameters()}
        chain, kls = adapt(policy.model, policy.dist_class, model_params(policy.model), [tensors], inner_lr=0.1,
                           vf_loss_coeff=float(trainer.config["vf_loss_coeff"]),
                           vf_clip_param=float(trainer.config["vf_clip_param"]), create_graph=False)
        assert len(chain) == 2 and len(kls) == 1
        assert float(kls[0]) == pytest.approx(0.0, abs=1e-6)  # sampled by these very parameters
        for name, value in want.items():
            torch.testing.assert_close(chain[1][name], value, rtol=1e-5, atol=1e-6)
        # The worker's in-place step lands on the same weights, and rollout_task restores the meta weights.
        before = policy.get_weights()
        policy.adapt_in_place(batch)
        after = policy.get_weights()
        for name, value in want.items():
            np.testing.assert_allclose(after[name], value.numpy(), rtol=1e-5, atol=1e-6)
        policy.set_weights(before)
    finally:
        trainer.stop()


def test_the_meta_gradient_is_the_derivative_through_the_inner_step(tmp_path):
    trainer = make(tmp_path, inner_lr=0.5)
    try:
        policy = trainer.get_policy()
        rollout = task_batches(trainer, np.array([-0.3, 0.8]))
        model = policy.model
        tensors = [[policy.to_tensors(b) for b in rollout.batches]]

        def meta_loss() -> torch.Tensor:
            return maml_loss(policy, model, policy.dist_class, tensors)[0]

        model.zero_grad()
        total = meta_loss()
        total.backward()
        params = dict(model.named_parameters())
        # First-order MAML's gradient (the inner gradient taken as a constant) for contrast.
        inner = adapt(model, policy.dist_class, model_params(model), tensors[0][:1], inner_lr=0.5,
                      vf_loss_coeff=0.5, vf_clip_param=10.0, create_graph=False)[0][1]
        checked = 0
        for name in ("logits.weight", "trunk.0.weight"):
            p = params[name]
            for idx in [(0, 0), (1, 1), (2, 0)][: p.shape[0]]:
                with torch.no_grad():
                    old = p[idx].item()
                    p[idx] = old + 1e-3
                    up = meta_loss().item()
                    p[idx] = old - 1e-3
                    down = meta_loss().item()
                    p[idx] = old
                numeric = (up - down) / 2e-3
                # float32 (the model casts observations to it): central differences to ~1e-4.
                assert p.grad[idx].item() == pytest.approx(numeric, rel=2e-2, abs=2e-4), (name, idx)
                checked += 1
        assert checked >= 4
        # The inner step moved the parameters: adaptation is not the identity here.
        assert any(not torch.allclose(inner[k], v) for k, v in params.items())
    finally:
        trainer.stop()


def test_the_second_order_term_changes_the_meta_gradient(tmp_path):
    # Surrogate only (no value loss, no KL penalty): the meta gradient then differs from
    # first-order MAML's by the inner step's Hessian term alone.
    trainer = make(tmp_path, inner_lr=0.5, vf_loss_coeff=0.0, kl_coeff=0.0)
    try:
        policy = trainer.get_policy()
        rollout = task_batches(trainer, np.array([0.9, 0.1]))
        tensors = [[policy.to_tensors(b) for b in rollout.batches]]
        model = policy.model
        model.zero_grad()
        maml_loss(policy, model, policy.dist_class, tensors)[0].backward()
        full = torch.cat([p.grad.flatten() for p in model.parameters()])
        # First-order: the adapted parameters as theta - alpha * (a constant gradient).
        theta = model_params(model)
        steps = adapt(model, policy.dist_class, theta, tensors[0][:1], inner_lr=0.5, vf_loss_coeff=0.0,
                      vf_clip_param=10.0, create_graph=False)[0][1]
        first = {k: theta[k] - (theta[k].detach() - steps[k]) for k in theta}
        post = tensors[0][1]
        dist_inputs, _ = forward_with(model, first, post)
        ratio = torch.exp(policy.dist_class(dist_inputs, model).logp(post[SB.ACTIONS]) - post[SB.ACTION_LOGP])
        # The post batch was sampled with these adapted parameters: ratio 1, clip inactive.
        torch.testing.assert_close(ratio, torch.ones_like(ratio), rtol=1e-4, atol=1e-4)
        fo = torch.autograd.grad(-torch.mean(ratio * post[SB.ADVANTAGES]), list(theta.values()), allow_unused=True)
        fo = torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(fo, theta.values())])
        assert torch.isfinite(full).all() and float(full.norm()) > 0
        assert float((full - fo).norm()) > 0.05 * float(fo.norm())
    finally:
        trainer.stop()


def test_episode_returns_sum_each_episode():
    batch = SampleBatch({SB.EPS_ID: np.array([7, 7, 3, 3, 3]), SB.REWARDS: np.array([1.0, 2.0, -1.0, -1.0, 0.5])})
    np.testing.assert_allclose(episode_returns(batch), [3.0, -1.5])


def test_meta_training_makes_the_inner_step_pay_more(tmp_path):
    # The tuned example's step sizes on smaller batches (4 tasks, 10 episodes per stage) and the
    # env's defaults (goals on the unit circle), seed 3: one inner step helps a little from the
    # start; 15 iterations (~10 s) of meta-training make it help more. Seeds 3, 4, 5 measured
    # first / last 3 iterations' adaptation_delta: 1.06 / 2.46, 0.55 / 1.62, 0.92 / 3.26.
    trainer = MAMLTrainer(config={"seed": 3, "num_workers": 0, "meta_batch_size": 4, "rollout_fragment_length": 200,
                                  "inner_lr": 1.0, "vf_clip_param": 1000.0, "log_sys_usage": False,
                                  "model": {"fcnet_hiddens": [32, 32]}},
                          env=PointNavigationEnv, logdir=str(tmp_path))
    try:
        results = [trainer.train() for _ in range(15)]
    finally:
        trainer.stop()
    for r in results:
        assert {"episode_reward_mean_adapt_0", "episode_reward_mean_adapt_1", "adaptation_delta"} <= set(r)
        assert r["info"]["learner"]["default_policy"]["fast_path"] == "torch"
    deltas = [r["adaptation_delta"] for r in results]
    first, last = np.mean(deltas[:3]), np.mean(deltas[-3:])
    assert last > 1.0 and last > first + 0.5, [round(d, 2) for d in deltas]


def test_checkpoint_round_trip_resumes_the_same_run(tmp_path):
    trainer = make(tmp_path / "a", inner_adaptation_steps=2)
    try:
        trainer.train()
        trainer.get_policy().kl_coeffs = [0.25, 0.125]
        path = trainer.save(str(tmp_path / "ckpt"))
        want = trainer.train()
    finally:
        trainer.stop()
    restored = Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    try:
        assert want["episodes_this_iter"] == 2 * 3 * 4  # 2 tasks, 3 stages, 4 whole 10-step episodes each
        assert isinstance(restored, MAMLTrainer) and restored.iteration == 1
        assert restored.get_policy().kl_coeffs == [0.25, 0.125]
        got = restored.train()
    finally:
        restored.stop()
    # Same tasks (drawn from seed and iteration), same weights, optimizer and RNG states.
    for key in ("episode_reward_mean_adapt_0", "episode_reward_mean_adapt_1", "episode_reward_mean_adapt_2"):
        assert got[key] == pytest.approx(want[key], rel=1e-6), key
    assert got["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"] == pytest.approx(
        want["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"], rel=1e-5)


def test_the_exported_meta_policy_acts_as_the_trainer(tmp_path):
    trainer = make(tmp_path / "run")
    try:
        assert_export_acts_as_trainer(trainer, tmp_path / "export", obs_dim=2)
    finally:
        trainer.stop()


# Ray's start-up (session fixture) and two actors: ~10 s on 2 shared cores.
def test_remote_workers_each_run_their_tasks(tmp_path, ray_session):
    trainer = make(tmp_path, num_workers=2, meta_batch_size=3)
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert result["num_healthy_workers"] == 2
        assert result["timesteps_total"] == 3 * 2 * 40  # 3 tasks, 2 stages, 4 whole 10-step episodes each
        # Every episode counts in the results, though the workers restart episodes between stages.
        assert result["episodes_this_iter"] == 3 * 2 * 4
        assert np.isfinite(result["episode_reward_mean_adapt_1"])
        after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in after)
        # The workers sampled with the meta weights, adapted, and hold the new meta weights now.
        remote = trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())[1:]
        for weights in remote:
            for k, v in after.items():
                np.testing.assert_array_equal(weights[k], v)
        tasks = trainer.workers.foreach_worker(lambda w: w.foreach_env(lambda e: e.get_task().tolist()))[1:]
        assert tasks[0] != tasks[1]  # each worker ran its own task(s)
    finally:
        trainer.stop()


def test_an_env_without_task_hooks_is_refused_naming_them(tmp_path):
    with pytest.raises(ValueError, match=r"sample_tasks\(n\).*set_task\(task\)"):
        MAMLTrainer(config={"num_workers": 0}, env="CartPole-v1", logdir=str(tmp_path)).stop()


@pytest.mark.parametrize("overrides,match", [
    ({"batch_mode": "truncate_episodes"}, "complete_episodes"),
    ({"model": {"use_lstm": True}}, "recurrent"),
    ({"inner_adaptation_steps": -1}, "inner_adaptation_steps"),
    ({"maml_optimizer_steps": 0}, "maml_optimizer_steps"),
])
def test_unsupported_settings_are_refused_naming_the_key(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        make(tmp_path, **overrides).stop()


def test_point_navigation_tasks():
    env = PointNavigationEnv({"goal_radius": 2.0})
    env.reset(seed=1)
    goals = env.sample_tasks(5)
    np.testing.assert_allclose(np.linalg.norm(goals, axis=1), 2.0)
    env.set_task(goals[0])
    np.testing.assert_array_equal(env.goal, [2.0, 0.0])  # from the next reset on
    env.reset()
    np.testing.assert_array_equal(env.goal, goals[0])
    obs, reward, terminated, truncated, _ = env.step(np.array([5.0, 0.0]))  # clipped to max_step
    np.testing.assert_allclose(obs, [0.1, 0.0], atol=1e-7)
    assert reward == pytest.approx(-np.linalg.norm(np.array([0.1, 0.0]) - goals[0]))
    assert not terminated and not truncated
    square = PointNavigationEnv({"goal_sampling": "square"})
    square.reset(seed=1)
    assert np.all(np.abs(np.array(square.sample_tasks(50))) <= 1.0)
    with pytest.raises(ValueError, match="goal_sampling"):
        PointNavigationEnv({"goal_sampling": "ring"})
    with pytest.raises(ValueError, match="task is a goal"):
        env.set_task([1.0])
