"""PerWorkerGaussianNoise and PerWorkerOrnsteinUhlenbeckNoise: one fixed noise scale per
worker (Ape-X), none on the local worker beside remote ones and on evaluation workers."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.ddpg import DDPGTrainer
from rlfleet.exploration.noise import GaussianNoise, OrnsteinUhlenbeckNoise
from rlfleet.exploration.per_worker import (
    PerWorkerGaussianNoise, PerWorkerOrnsteinUhlenbeckNoise, fixed_per_worker_scale,
)
from rlfleet.exploration.stochastic_sampling import make_exploration

BOX = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


class PointMass:
    def __init__(self, actions):
        self.inputs = actions

    def deterministic_sample(self):
        return self.inputs


def test_fixed_scales_follow_ape_x_and_spare_local_and_evaluation_workers():
    assert fixed_per_worker_scale({"num_workers": 0, "worker_index": 0}) is None
    assert fixed_per_worker_scale({"num_workers": 3, "worker_index": 0}) == 0.0
    assert fixed_per_worker_scale({"num_workers": 3, "worker_index": 1}) == pytest.approx(0.4 ** 4.5)
    assert fixed_per_worker_scale({"num_workers": 3, "worker_index": 2}) == pytest.approx(0.4 ** 8)
    assert fixed_per_worker_scale({"num_workers": 1, "worker_index": 1}) == pytest.approx(0.4 ** 8)
    assert fixed_per_worker_scale({"num_workers": 3, "worker_index": 2, "in_evaluation": True}) == 0.0
    assert fixed_per_worker_scale({"num_workers": 0, "in_evaluation": True}) == 0.0


@pytest.mark.parametrize("cls,base", [(PerWorkerGaussianNoise, GaussianNoise),
                                      (PerWorkerOrnsteinUhlenbeckNoise, OrnsteinUhlenbeckNoise)])
def test_per_worker_noise_scale_and_the_plain_type_without_remote_workers(cls, base):
    noise = cls(BOX, random_timesteps=0, policy_config={"num_workers": 4, "worker_index": 2})
    assert [noise.scale_schedule(t) for t in (0, 10 ** 7)] == pytest.approx([0.4 ** (1 + 14 / 3)] * 2)
    plain = cls(BOX, random_timesteps=0, final_scale=0.5, policy_config={"num_workers": 0})
    reference = base(BOX, random_timesteps=0, final_scale=0.5)
    assert plain.scale_schedule(10 ** 6) == reference.scale_schedule(10 ** 6) == 0.5
    silent = cls(BOX, random_timesteps=0, policy_config={"num_workers": 4, "worker_index": 0})
    actions = torch.full((64, 1), 0.25)
    noisy, _ = silent.get_exploration_action(PointMass(actions), True, 100)
    assert torch.equal(noisy, actions)


def test_per_worker_gaussian_noise_adds_its_scale_times_stddev():
    noise = PerWorkerGaussianNoise(BOX, random_timesteps=0, stddev=0.5,
                                   policy_config={"num_workers": 2, "worker_index": 1})
    g = torch.Generator()
    g.manual_seed(0)
    actions, _ = noise.get_exploration_action(PointMass(torch.zeros((20000, 1))), True, 5, g)
    assert actions.std().item() == pytest.approx(0.4 ** 8 * 0.5, rel=0.03)


def test_types_by_name_options_checked_and_old_apex_path_kept():
    cfg = {"exploration_config": {"type": "PerWorkerGaussianNoise", "stddev": 0.2},
           "num_workers": 2, "worker_index": 2}
    noise = make_exploration(cfg, BOX)
    assert isinstance(noise, PerWorkerGaussianNoise) and noise.stddev == 0.2
    from rlfleet.algorithms.apex.exploration import PerWorkerOrnsteinUhlenbeckNoise as old_home

    assert old_home is PerWorkerOrnsteinUhlenbeckNoise
    old = {"exploration_config": {"type": "rlfleet.algorithms.apex.exploration.PerWorkerOrnsteinUhlenbeckNoise"}}
    assert isinstance(make_exploration(old, BOX), PerWorkerOrnsteinUhlenbeckNoise)
    with pytest.raises(ValueError, match="did you mean 'exploration_config.stddev'"):
        DDPGTrainer(env="Pendulum-v1", config={"exploration_config": {"type": "PerWorkerGaussianNoise",
                                                                      "stdev": 0.1}})
    with pytest.raises(ValueError, match="'PerWorkerGaussianNoise' needs a Box action space"):
        PerWorkerGaussianNoise(gym.spaces.Discrete(2))


def test_remote_workers_each_keep_their_scale_and_evaluation_adds_none(ray_session, tmp_path):
    config = {"seed": 0, "num_workers": 2, "num_cpus_per_worker": 0.5, "actor_hiddens": [8], "critic_hiddens": [8],
              "exploration_config": {"type": "PerWorkerGaussianNoise", "random_timesteps": 0},
              "evaluation_interval": 1, "evaluation_num_workers": 0, "evaluation_config": {"explore": True},
              "min_iter_time_s": 0}
    trainer = DDPGTrainer(env="Pendulum-v1", config=config, logdir=str(tmp_path))
    try:
        scales = trainer.workers.foreach_worker_with_index(
            lambda w, i: w.get_policy().exploration.scale_schedule(10 ** 6))
        assert scales == pytest.approx([0.0, 0.4 ** 8, 0.4 ** 15])
        evaluation = trainer.evaluator.build_workers() if trainer.evaluator.workers is None \
            else trainer.evaluator.workers
        eval_scales = evaluation.foreach_worker(lambda w: w.get_policy().exploration.scale_schedule(10 ** 6))
        assert eval_scales == [0.0]
    finally:
        trainer.stop()
