"""RL-Zoo translations (issue 18): the Zoo's SB3 hyperparameters as rlfleet keys behave as
SB3 does, and `benchmarks/zoo.py` trains, scores and tabulates a case.

The full Zoo budgets run in `benchmarks/zoo.py`; the DQN case's first stretch (training
return 150) runs in tests/tuned_examples/test_learning.py from tuned_examples/dqn/cartpole-dqn-zoo.yaml.
"""
from __future__ import annotations

import importlib.util

import pytest
import torch

from rlfleet.algorithms.dqn import DQNTrainer
from tests.helpers import REPO_ROOT, load_tuned_example

ROOT = REPO_ROOT


def _zoo_module():
    spec = importlib.util.spec_from_file_location("zoo_benchmark", ROOT / "benchmarks" / "zoo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dqn_zoo_example_replays_like_sb3(tmp_path):
    # SB3: every 256 env steps (train_freq), 128 gradient steps (gradient_steps) of 64, and a
    # target copy every 10 env steps while sampling, i.e. once before each 128-update phase.
    example = load_tuned_example("dqn/cartpole-dqn-zoo.yaml")
    cfg = dict(example.config, log_sys_usage=False, timesteps_per_iteration=0, learning_starts=256,
               model={"fcnet_hiddens": [16], "fcnet_activation": "relu"})
    trainer = DQNTrainer(env=example.env, config=cfg, logdir=str(tmp_path))
    m = trainer.get_policy().model
    try:
        per_fragment = []
        for _ in range(3):
            before = trainer.counters["num_env_steps_trained"], trainer.counters["num_target_updates"]
            trainer.train()
            per_fragment.append((trainer.counters["num_env_steps_trained"] - before[0],
                                 trainer.counters["num_target_updates"] - before[1]))
            # The target was refreshed during this fragment's phase, then the online net learned on.
            assert not all(torch.equal(a, b) for a, b in zip(m.q_net.parameters(), m.target_q_net.parameters()))
        assert per_fragment == [(128 * 64, 1)] * 3
        assert trainer.counters["num_env_steps_sampled"] == 3 * 256
        # Plain DQN, as SB3's: one Q head on the ReLU trunk, no dueling stream.
        assert m.q_net.value is None and len(m.q_net.advantage) == 1
        # Epsilon 1 -> 0.04 over 0.16 * 50k steps.
        schedule = trainer.get_policy().exploration.epsilon_schedule
        assert schedule(0) == 1.0 and schedule(4000) == pytest.approx(0.52) and schedule(8000) == pytest.approx(0.04)
    finally:
        trainer.stop()


def test_zoo_benchmark_trains_scores_and_tabulates_a_case():
    zoo = _zoo_module()
    assert set(zoo.CASES) >= {"dqn-cartpole", "sac-pendulum", "td3-pendulum"}
    for name, (path, _) in zoo.CASES.items():
        if (ROOT / path).exists():
            exp = zoo.load_case(name)
            assert exp["config"]["seed"] == 0 and exp["stop"]["timesteps_total"] > 0, name
    rows = [zoo.run_case("dqn-cartpole", seed, episodes=2, timesteps=300,
                         overrides={"model": {"fcnet_hiddens": [8], "fcnet_activation": "relu"},
                                    "learning_starts": 256, "timesteps_per_iteration": 0})
            for seed in (0, 1)]
    for row in rows:
        assert row["steps"] == 512 and len(row["returns"]) == 2  # two 256-step fragments
        assert 8 <= row["score"] <= 500 and row["wall_s"] > 0
    table = zoo.markdown_table(rows, [0, 1, 2]).splitlines()
    assert table[0].startswith("| case | Zoo score | seed 0 | seed 1 | seed 2 | median |")
    assert table[2].startswith("| dqn-cartpole | 500 | ") and "| - |" in table[2]


def test_zoo_benchmark_rejects_unknown_cases(capsys):
    with pytest.raises(SystemExit):
        _zoo_module().main(["--cases", "dqn-pong"])
    assert "dqn-pong" in capsys.readouterr().err


def test_sac_and_td3_zoo_cases_update_like_sb3(tmp_path):
    # SB3's SAC/TD3 defaults in the Pendulum cases: one update of 256 per env step from
    # `learning_starts`, targets Polyak-averaged with tau 0.005; TD3 acts uniformly at random
    # until then and steps its actor on every second update only.
    from rlfleet.registry import get_trainer_class

    zoo = _zoo_module()
    tiny = {"SAC": {"Q_model": {"fcnet_hiddens": [8], "fcnet_activation": "relu"},
                    "policy_model": {"fcnet_hiddens": [8], "fcnet_activation": "relu"}},
            "TD3": {"actor_hiddens": [8], "critic_hiddens": [8], "learning_starts": 100,
                    "exploration_config": dict(zoo.load_case("td3-pendulum")["config"]["exploration_config"],
                                               random_timesteps=100)}}
    for name in ("sac-pendulum", "td3-pendulum"):
        exp = zoo.load_case(name)
        cfg = dict(exp["config"], **tiny[exp["run"]], log_sys_usage=False, timesteps_per_iteration=150)
        assert cfg["train_batch_size"] == 256 and cfg["tau"] == 0.005 and cfg["rollout_fragment_length"] == 1
        trainer = get_trainer_class(exp["run"])(env=exp["env"], config=cfg, logdir=str(tmp_path / name))
        try:
            trainer.train()
            policy = trainer.get_policy()
            assert trainer.counters["num_env_steps_sampled"] == 150, name
            # Updates at sampled steps 100..150 (SB3: after steps 100..149, the same count to one).
            assert trainer.counters["num_env_steps_trained"] == 51 * 256, name
            assert trainer.counters["num_target_updates"] == 51 and policy.num_grad_updates == 51, name
            buffer = trainer.local_replay_buffer
            actions = buffer.sample(256, beta=0.0)["actions"]
            if exp["run"] == "TD3":
                # The first 100 steps are uniform over the policy's [-1, 1] scale (stored as
                # such, as SB3 stores its scaled actions), i.e. over Pendulum's [-2, 2] torque.
                assert -1.0 <= actions.min() < -0.75 and 0.75 < actions.max() <= 1.0, actions
                assert sorted(policy.optimizers) == ["actor", "critic"]
                # 51 updates so far: the next (the 52nd) steps the critic only, the 53rd both.
                assert policy.optimizers_to_step() == ["critic"]
                trainer.train()
                assert policy.num_grad_updates == 201 and policy.optimizers_to_step() == ["critic"]
        finally:
            trainer.stop()
