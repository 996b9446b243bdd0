"""`rlfleet train` stops on RLlib 2.x result names, from `--stop` (flat "/" names) and from a YAML
experiment's `stop:` (nested as 2.x results are), with a real PPO on CartPole: a random policy's
episodes already reach the low threshold, so the first iteration stops the run; the iteration
limit beside it only bounds the test should the 2.x key not work."""
from __future__ import annotations

import json

from rlfleet import cli

CONFIG = {"num_workers": 0, "train_batch_size": 200, "sgd_minibatch_size": 64, "num_sgd_iter": 1,
          "rollout_fragment_length": 200, "model": {"fcnet_hiddens": [16]}, "seed": 0}


def _results(logdir: str) -> list:
    with open(f"{logdir}/result.json") as f:
        return [json.loads(line) for line in f]


def _logdir(out: str) -> str:
    last = out.strip().splitlines()[-1]
    assert last.startswith("Results: "), out
    return last[len("Results: "):]


def test_cli_stop_on_env_runners_episode_return_mean(tmp_path, capsys):
    code = cli.main(["train", "--run", "PPO", "--env", "CartPole-v1", "--stop",
                     '{"env_runners/episode_return_mean": 5, "training_iteration": 3}',
                     "--config", json.dumps(CONFIG), "--local-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Stop criterion met: env_runners/episode_return_mean" in out
    assert "WARNING: stop key" not in err
    (result,) = _results(_logdir(out))
    assert result["env_runners"]["episode_return_mean"] == result["episode_reward_mean"] >= 5


def test_yaml_stop_on_nested_2x_keys(tmp_path, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text(f"""
cartpole-2x:
  run: PPO
  env: CartPole-v1
  stop:
    env_runners: {{episode_return_mean: 5}}
    training_iteration: 3
  config: {json.dumps(CONFIG)}
""")
    code = cli.main(["train", "-f", str(path), "--local-dir", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Stop criterion met: env_runners/episode_return_mean" in out
    assert len(_results(_logdir(out))) == 1
