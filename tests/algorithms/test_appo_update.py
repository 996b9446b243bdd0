"""APPO's update, pass by pass, against a NumPy restatement of its loss on one fixed batch.

Without V-trace, APPO is PPO's clipped surrogate in IMPALA's data flow: the ratio is measured
against the behaviour policy that sampled (the batch's `action_dist_inputs`), the advantages and
value targets are the workers' GAE, and the learner thread replays each train batch
`num_sgd_iter` times as it came. Over those passes the ratio leaves 1 and the clip starts to
bind. The settings are those of `tuned_examples/reference_1x/cartpole-appo.yaml`.
"""
from __future__ import annotations

import glob
import json
import os
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlfleet import cli
from rlfleet.algorithms.appo import DEFAULT_CONFIG, APPOTorchPolicy, APPOTrainer
from rlfleet.algorithms.common.learner_thread import LearnerThread
from rlfleet.policy.sample_batch import SampleBatch
from tests.helpers import TUNED_EXAMPLES_DIR, load_tuned_example

SB = SampleBatch
N = 64


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _forward(weights: dict, obs: np.ndarray):
    """The reference file's model by hand: one linear hidden layer of 32 shared by the
    logits and the value head (`fcnet_activation: linear`, `vf_share_layers: true`)."""
    h = obs @ weights["trunk.0.weight"].T + weights["trunk.0.bias"]
    return h @ weights["logits.weight"].T + weights["logits.bias"], (h @ weights["value_head.weight"].T
                                                                     + weights["value_head.bias"])[:, 0]


def reference_loss(weights: dict, batch: SampleBatch, cfg: dict):
    """The non-V-trace loss with the weights before an update: -mean(min(r A, clip(r) A))
    + vf_loss_coeff * 0.5 * mean((V - targets)^2) - entropy_coeff * mean(entropy), where
    r = pi(a|x) / mu(a|x) and mu is the behaviour policy recorded in the batch."""
    logits, values = _forward(weights, batch[SB.OBS].astype(np.float64))
    lp = _log_softmax(logits)
    mu = _log_softmax(batch[SB.ACTION_DIST_INPUTS].astype(np.float64))
    a = batch[SB.ACTIONS]
    rows = np.arange(len(a))
    ratio = np.exp(lp[rows, a] - mu[rows, a])
    adv = batch[SB.ADVANTAGES].astype(np.float64)
    clip = cfg["clip_param"]
    policy_loss = -np.minimum(adv * ratio, adv * np.clip(ratio, 1 - clip, 1 + clip)).mean()
    vf_loss = 0.5 * ((values - batch[SB.VALUE_TARGETS]) ** 2).mean()
    entropy = -(np.exp(lp) * lp).sum(1).mean()
    kl = (np.exp(mu) * (mu - lp)).sum(1).mean()  # KL(mu || pi), reported (use_kl_loss is off)
    total = policy_loss + cfg["vf_loss_coeff"] * vf_loss - cfg["entropy_coeff"] * entropy
    stats = {"policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, "kl": kl, "total_loss": total}
    return stats, ratio


@pytest.fixture
def policy_and_batch():
    example = load_tuned_example("reference_1x/cartpole-appo.yaml")
    config = APPOTrainer.merge_trainer_configs(DEFAULT_CONFIG, dict(example.config, seed=3, framework="torch",
                                                                    lr=0.01))
    assert config["vtrace"] is False and config["num_sgd_iter"] == 6 and config["model"]["vf_share_layers"]
    env = gym.make("CartPole-v1")
    policy = APPOTorchPolicy(env.observation_space, env.action_space, config)
    rng = np.random.default_rng(0)
    obs = rng.normal(0, 1, (N, 4)).astype(np.float32)
    weights = {k: v.numpy().astype(np.float64) for k, v in policy.model.state_dict().items()}
    # A behaviour policy a little behind the learner's, so that r != 1 from the first pass.
    behaviour = (_forward(weights, obs)[0] + rng.normal(0, 0.3, (N, 2))).astype(np.float32)
    actions = rng.integers(0, 2, N)
    batch = SampleBatch({
        SB.OBS: obs, SB.ACTIONS: actions, SB.ACTION_DIST_INPUTS: behaviour,
        SB.ACTION_LOGP: _log_softmax(behaviour.astype(np.float64))[np.arange(N), actions].astype(np.float32),
        SB.ADVANTAGES: rng.normal(0, 1, N).astype(np.float32),
        SB.VALUE_TARGETS: rng.normal(0, 3, N).astype(np.float32)})
    return policy, batch


def test_each_of_the_num_sgd_iter_passes_matches_the_reference_loss(policy_and_batch):
    policy, batch = policy_and_batch
    cfg = policy.config
    seen, clipped = [], []

    def learn(train_batch):
        weights = {k: v.numpy().astype(np.float64).copy() for k, v in policy.model.state_dict().items()}
        expected, ratio = reference_loss(weights, train_batch, cfg)
        stats = policy.learn_on_batch(train_batch)["learner_stats"]
        for name, value in expected.items():
            assert stats[name] == pytest.approx(value, rel=1e-4, abs=1e-5), (len(seen), name)
        seen.append((train_batch, weights))
        clipped.append(float((np.abs(ratio - 1) > cfg["clip_param"]).mean()))
        return stats

    # The learner thread's own buffer replays the train batch; stepped here by hand, not started.
    learner = LearnerThread(learn, cfg, threading.Lock())
    learner.inqueue.put((batch, 0))
    for _ in range(cfg["num_sgd_iter"]):
        learner.step()
    assert len(seen) == 6 and all(b is batch for b, _ in seen), "one train batch, replayed as it came"
    # Every pass moved the weights; the behaviour policy stays the old policy throughout, so the
    # ratio drifts from 1 over the passes and the clip binds on more rows at the end.
    for (_, before), (_, after) in zip(seen, seen[1:]):
        assert any(not np.allclose(before[k], after[k]) for k in before)
    assert clipped[-1] > clipped[0] and clipped[-1] > 0, clipped
    # The seventh step takes the next train batch.
    nxt = SampleBatch({k: v.copy() for k, v in batch.items()})
    learner.inqueue.put((nxt, 1))
    learner.step()
    assert seen[-1][0] is nxt and learner.version == 7


def test_a_batch_without_the_behaviour_columns_is_refused_with_the_fix(policy_and_batch):
    policy, batch = policy_and_batch
    del batch[SB.ACTION_DIST_INPUTS]
    with pytest.raises(ValueError, match=r"no \['action_dist_inputs'\] column.*'vtrace': True"):
        policy.learn_on_batch(batch)


@pytest.mark.slow
def test_the_reference_file_reaches_its_stop_reward_within_its_budget(ray_session, tmp_path):
    # The file as it is (APPO's 10 s `min_iter_time_s`): sampling runs at ~25k steps/s here,
    # and the 200k-step stop ends each iteration at 10k steps (Trainer.set_step_limit), so the
    # mean return is checked every 10k steps rather than once, over the whole run.
    path = TUNED_EXAMPLES_DIR / "reference_1x" / "cartpole-appo.yaml"
    assert cli.main(["train", "-q", "-f", str(path), "--local-dir", str(tmp_path),
                     "--config", json.dumps({"seed": 1})]) == cli.EXIT_OK
    (results,) = glob.glob(os.path.join(tmp_path, "*", "result.json"))
    last = json.loads(Path(results).read_text().splitlines()[-1])
    assert last["episode_reward_mean"] >= 150 and last["timesteps_total"] <= 200000, (
        last["episode_reward_mean"], last["timesteps_total"])


@pytest.mark.parametrize("use_critic", [True, False])
def test_without_gae_the_advantages_are_the_returns_less_the_value_with_a_critic(use_critic):
    # RLlib 1.x's APPO `use_critic` (with vtrace False): one terminated 3-step trajectory,
    # gamma 0.9, returns by hand [1 + .9 * 2 + .81 * 3, 2 + .9 * 3, 3].
    config = APPOTrainer.merge_trainer_configs(DEFAULT_CONFIG, {"vtrace": False, "use_gae": False, "gamma": 0.9,
                                                                "use_critic": use_critic})
    env = gym.make("CartPole-v1")
    policy = APPOTorchPolicy(env.observation_space, env.action_space, config)
    batch = SampleBatch({SB.OBS: np.zeros((3, 4), np.float32), SB.NEXT_OBS: np.zeros((3, 4), np.float32),
                         SB.REWARDS: np.array([1.0, 2.0, 3.0], np.float32), SB.EPS_ID: np.zeros(3, np.int64),
                         SB.TERMINATEDS: np.array([False, False, True]), SB.ACTIONS: np.zeros(3, np.int64),
                         SB.VF_PREDS: np.array([0.5, 1.0, 2.0], np.float32)})
    out = policy.postprocess_trajectory(batch)
    returns = np.array([5.23, 4.7, 3.0])
    baseline = batch[SB.VF_PREDS] if use_critic else 0.0
    np.testing.assert_allclose(out[SB.ADVANTAGES], returns - baseline, rtol=1e-6)
    np.testing.assert_allclose(out[SB.VALUE_TARGETS], returns if use_critic else np.zeros(3), rtol=1e-6)


def test_gae_without_a_critic_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"'use_gae': True needs 'use_critic': True.*'use_gae': False"):
        APPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
            "vtrace": False, "use_critic": False, "num_workers": 0, "model": {"fcnet_hiddens": [8]}})
