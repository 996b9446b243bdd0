"""ExternalEnv / ExternalMultiAgentEnv: envs whose own thread runs the episodes (env/external_env.py),
served by ExternalEnvSampler (rollout/external_sampler.py).

The PPO learning regression is tuned_examples/ppo/cartpole-ppo-external.yaml (tests/tuned_examples/test_learning.py
runs it); here: DQN learning with half of its episodes logged by a random controller, two agents,
and the checks every call makes. Remote workers with external envs: tests/serving/test_policy_client.py
(each remote worker's policy server runs one).
"""
from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.env.examples.external_cartpole import ExternalCartPole, TwoExternalCartPoles
from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.external_multi_agent_env import ExternalMultiAgentEnv
from rlfleet.env.registry import register_env
from rlfleet.registry import get_trainer_class
from rlfleet.rollout.external_sampler import ExternalEnvStopped
from tests.helpers import load_tuned_example, train_until

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
SMALL_PPO = {"seed": 0, "num_workers": 0, "rollout_fragment_length": 64, "train_batch_size": 128,
             "sgd_minibatch_size": 64, "num_sgd_iter": 1, "input_evaluation": [], "model": {"fcnet_hiddens": [8]}}


def ppo(env, **config):
    """A small PPO trainer on `env`: a class, or a creator (`EnvContext -> env`), registered here."""
    if not isinstance(env, type):
        name = f"test-external-{id(env)}"
        register_env(name, env)
        env = name
    return get_trainer_class("PPO")(env=env, config=dict(SMALL_PPO, **config))


# --- learning -------------------------------------------------------------------------------
def test_dqn_learns_with_half_of_the_episodes_logged_off_policy():
    """Half the episodes act by a random controller and reach DQN through log_action only; the
    mean return over all episodes (random ones included, ~22) still passes 70 (seed 0: ~4k steps)."""
    example = load_tuned_example("dqn/cartpole-dqn.yaml")
    trainer = get_trainer_class("DQN")(env=ExternalCartPole, config=dict(example.config,
                                                                         env_config={"logged_fraction": 0.5}))
    try:
        result, history = train_until(trainer, reward=70, max_timesteps=20000)
    finally:
        trainer.stop()
    assert result["episode_reward_mean"] >= 70, history


def test_two_agents_map_to_their_own_policies():
    policies = {"p0", "p1"}
    trainer = ppo(TwoExternalCartPoles, multiagent={
        "policies": policies, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"})
    try:
        batch = trainer.workers.local_worker().sample()
        assert set(batch.policy_batches) == policies
        for pid, part in batch.policy_batches.items():
            assert (part["agent_index"] >= 0).all() and len(part) > 0
        result = trainer.train()
        assert set(result["info"]["learner"]) == policies
    finally:
        trainer.stop()


# --- what the sampler records ---------------------------------------------------------------
class Scripted(ExternalEnv):
    """Episodes of 3 steps on a fixed observation; `plan` says per episode how it runs."""

    def __init__(self, plan, obs_space=BOX):
        super().__init__(gym.spaces.Discrete(2), obs_space, max_concurrent=4)
        self.plan = list(plan)
        self.answers = []

    def run(self):
        for how in self.plan:
            eid = self.start_episode(training_enabled=how != "disabled")
            obs = np.array([0.5, -0.5], np.float32)
            for _ in range(3):
                if how == "logged":
                    self.log_action(eid, obs, 1)
                else:
                    self.answers.append(self.get_action(eid, obs))
                self.log_returns(eid, 1.0)
                self.log_returns(eid, 0.5)  # several calls add up
            self.end_episode(eid, obs, truncated=how == "truncated")
        while True:
            time.sleep(1)


def worker_of(plan, **config):
    """A trainer on a `Scripted(plan)` env, and its worker (whose `env` is that env)."""
    trainer = ppo(lambda ctx: Scripted(plan), batch_mode="complete_episodes", **config)
    return trainer, trainer.workers.local_worker()


def test_rows_rewards_ends_and_logged_actions():
    trainer, worker = worker_of(["acted", "logged", "truncated"], rollout_fragment_length=9)
    env = worker.env
    try:
        batch = worker.sample().policy_batches["default_policy"]
        assert len(batch) == 9 and len(env.answers) == 6
        np.testing.assert_allclose(batch["rewards"], 1.5)
        first, logged, truncated = (batch.slice(start, start + 3) for start in (0, 3, 6))
        assert len(np.unique(batch["eps_id"])) == 3 and len(np.unique(logged["eps_id"])) == 1
        assert first["terminateds"].tolist() == [False, False, True]
        assert truncated["truncateds"].tolist() == [False, False, True] and not truncated["terminateds"].any()
        assert (logged["actions"] == 1).all()
        # The logged action's likelihood under the policy's distribution (not that of its own sample).
        logits = logged["action_dist_inputs"]
        expected = logits[:, 1] - np.log(np.exp(logits).sum(axis=1))
        np.testing.assert_allclose(logged["action_logp"], expected, rtol=1e-5, atol=1e-6)
        metrics = worker.get_metrics()
        assert [m.episode_reward for m in metrics] == [4.5, 4.5, 4.5]
    finally:
        trainer.stop()


def test_training_disabled_episodes_leave_metrics_not_samples():
    trainer, worker = worker_of(["disabled", "acted", "disabled", "acted"], rollout_fragment_length=6)
    try:
        batch = worker.sample().policy_batches["default_policy"]
        assert len(batch) == 6 and len(np.unique(batch["eps_id"])) == 2
        assert len(worker.get_metrics()) == 4
    finally:
        trainer.stop()


def test_truncate_episodes_cut_live_episodes_and_bootstrap():
    trainer = ppo(ExternalCartPole, rollout_fragment_length=16)
    try:
        batch = trainer.workers.local_worker().sample().policy_batches["default_policy"]
        assert 0 < len(batch) <= 16 and batch.count <= 16
        assert "advantages" in batch and "value_targets" in batch
    finally:
        trainer.stop()


# --- the checks each call makes --------------------------------------------------------------
class Idle(ExternalEnv):
    def __init__(self, max_concurrent=2):
        super().__init__(gym.spaces.Discrete(2), BOX, max_concurrent=max_concurrent)

    def run(self):
        while True:
            time.sleep(1)


def test_episode_state_errors_name_the_episode_and_the_fix():
    env = Idle(max_concurrent=2)
    eid = env.start_episode("a")
    with pytest.raises(ValueError, match="'a' is already running"):
        env.start_episode("a")
    env.start_episode("b")
    with pytest.raises(ValueError, match="max_concurrent=2"):
        env.start_episode("c")
    with pytest.raises(ValueError, match="'zzz' is unknown; start one with start_episode"):
        env.log_returns("zzz", 1.0)
    env.end_episode(eid, np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="'a' has already ended"):
        env.log_action("a", np.zeros(2, np.float32), 0)
    with pytest.raises(ValueError, match="'a' has already ended; use a new id"):
        env.start_episode("a")


@pytest.mark.parametrize("call, match", [
    (lambda env, e: env.log_returns(e, float("nan")), "reward is nan"),
    (lambda env, e: env.log_returns(e, "1"), "a number expected"),
    (lambda env, e: env.log_action(e, np.zeros(3, np.float32), 0), "shape"),
    (lambda env, e: env.log_action(e, np.full(2, 5.0, np.float32), 0), "bound"),
    (lambda env, e: env.log_action(e, np.zeros(2, np.float32), 2), "action 2 is not in the action space"),
    (lambda env, e: env.log_action(e, np.zeros(2, np.float32), 0.5), "not in the action space"),
    (lambda env, e: env.end_episode(e, np.array([np.nan, 0.0], np.float32)), r"observation\[0\] is nan"),
])
def test_bad_values_are_refused_where_they_are_given(call, match):
    env = Idle()
    eid = env.start_episode()
    with pytest.raises(ValueError, match=match):
        call(env, eid)
    assert env.next_event(None)[0] == "start" and env.next_event(None) is None  # nothing else recorded


def test_multi_agent_calls_take_dicts():
    env = ExternalMultiAgentEnv(gym.spaces.Discrete(2), BOX)
    eid = env.start_episode()
    with pytest.raises(ValueError, match=r"observation must be a dict \{agent_id: observation\}"):
        env.log_action(eid, np.zeros(2, np.float32), {0: 1})
    with pytest.raises(ValueError, match="agent 'b'"):
        env.log_returns(eid, {"a": 1.0, "b": float("inf")})


def test_a_run_that_raises_or_returns_is_reported():
    class Broken(Idle):
        def run(self):
            raise RuntimeError("simulator crashed")

    class Quits(Idle):
        def run(self):
            return

    for cls, match in ((Broken, "run\\(\\) raised RuntimeError: simulator crashed"), (Quits, "run\\(\\) returned")):
        trainer = ppo(lambda ctx, cls=cls: cls())
        try:
            with pytest.raises(ExternalEnvStopped, match=match):
                trainer.workers.local_worker().sample()
        finally:
            trainer.stop()


@pytest.mark.parametrize("config, match", [
    ({"num_envs_per_worker": 2}, "'num_envs_per_worker': 2 with an ExternalEnv"),
    ({"horizon": 10}, "'horizon': 10 cannot end the episodes of an ExternalEnv"),
    ({"sample_async": True}, "'sample_async': True is not available with an ExternalEnv"),
    ({"model": {"use_lstm": True}}, "recurrent; the ExternalEnv sampler does not run recurrent policies yet"),
])
def test_settings_an_external_env_cannot_honour_are_refused(config, match):
    with pytest.raises(ValueError, match=match):
        ppo(lambda ctx: Idle(), **config)


def test_concurrent_episodes_are_answered_in_one_forward_pass():
    """Many simulator threads at once (as a policy server's clients are): each gets its action."""
    class Many(ExternalEnv):
        def __init__(self):
            super().__init__(gym.spaces.Discrete(2), BOX, max_concurrent=8)

        def run(self):
            def one(k):
                while True:
                    eid = self.start_episode()
                    for _ in range(5):
                        assert self.get_action(eid, np.full(2, k / 10, np.float32)) in (0, 1)
                        self.log_returns(eid, 1.0)
                    self.end_episode(eid, np.zeros(2, np.float32))
            for k in range(8):
                threading.Thread(target=one, args=(k,), daemon=True).start()
            while True:
                time.sleep(1)

    trainer = ppo(lambda ctx: Many(), rollout_fragment_length=200)
    try:
        worker = trainer.workers.local_worker()
        batch = worker.sample()
        assert batch.count >= 200
        assert {m.episode_length for m in worker.get_metrics()} == {5}
        assert worker.sampler.perf_stats()["mean_inference_ms"] > 0  # the forward passes were timed
    finally:
        trainer.stop()
