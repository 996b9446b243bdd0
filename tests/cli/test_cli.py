"""Tests for the `rlfleet` command line, with a fake trainer injected (no real algorithms)."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rlfleet import cli
from rlfleet.cli import common as cli_common
from rlfleet.results.logger import make_logdir


class FakeTrainer:
    """Mimics the Trainer API the CLI uses. Iteration i reports reward 100 * i, 1000 * i
    steps, NaN reward on iteration 1 and an `evaluation` dict on even iterations.

    Config knobs (test-only): "interrupt_at" raises KeyboardInterrupt in that train() call;
    "invalid" makes the constructor raise
    ValueError like config validation would, "crash" a RuntimeError (both after writing the
    start-up files into the run folder).
    """

    instances: list = []

    def __init__(self, config=None, env=None, logdir=None):
        config = dict(config or {})
        logdir = logdir or make_logdir("Fake", env)
        if config.get("invalid") or config.get("crash"):
            # As a trainer whose logger started before its workers failed.
            for name in ("params.json", "result.json", "progress.csv"):
                open(os.path.join(logdir, name), "w").close()
        if config.get("invalid"):
            raise ValueError("config key 'invalid': not a valid key; valid keys are [...]")
        if config.get("crash"):
            raise RuntimeError("the env could not be made")
        if config.get("needs_box2d"):  # as gymnasium.make("LunarLander-v3") without Box2D
            import gymnasium

            raise gymnasium.error.DependencyNotInstalled(
                'Box2D is not installed, you can install it by run `pip install swig` followed by '
                '`pip install "gymnasium[box2d]"`')
        if config.get("needs_module"):
            raise ModuleNotFoundError(f"No module named {config['needs_module']!r}", name=config["needs_module"])
        self.config = config
        self.env = env
        self.logdir = logdir
        self.iteration = 0
        self.saves = []
        self.stopped = False
        self.step_limit = "never set"
        FakeTrainer.instances.append(self)

    def set_step_limit(self, timesteps_total):
        self.step_limit = timesteps_total

    def train(self):
        self.iteration += 1
        i = self.iteration
        if self.config.get("interrupt_at") == i:
            raise KeyboardInterrupt
        result = {
            "training_iteration": i,
            "timesteps_total": 1000 * i,
            "num_env_steps_sampled_lifetime": 1000 * i,  # RLlib 2.x's name, as a real trainer adds it
            "time_total_s": 0.5 * i,
            "episode_reward_mean": float("nan") if i == 1 else 100.0 * i,
            "episode_reward_min": 0.0,
            "episode_reward_max": 500.0,
            "episode_len_mean": 20.0 * i,
            "episodes_total": 3 * i,
            "hist_stats": {"episode_reward": [1.0]},
            "info": {"learner": {"default_policy": {"policy_loss": 0.1}}},
        }
        if i % 2 == 0:
            result["evaluation"] = {"episode_reward_mean": 50.0 * i}
        if i > 100:  # a runaway loop would otherwise hang the test
            raise AssertionError("stop criteria never triggered")
        return result

    def save(self, checkpoint_dir=None, *, keep_checkpoints_num=None, continue_from_checkpoint=False):
        path = os.path.join(self.logdir, f"checkpoint_{self.iteration:06d}")
        self.saves.append(path)
        return path

    def stop(self):
        self.stopped = True


ALGOS = {"FAKE": FakeTrainer, "FAKE2": FakeTrainer}


@pytest.fixture(autouse=True)
def fake_registry(monkeypatch, tmp_path):
    FakeTrainer.instances = []
    monkeypatch.setenv("RLFLEET_RESULTS_DIR", str(tmp_path / "results"))

    def lookup(name):
        if name not in ALGOS:
            raise ValueError(f"Unknown algorithm {name!r}")
        return ALGOS[name]

    monkeypatch.setattr(cli_common, "lookup_trainer", lookup)
    monkeypatch.setattr(cli_common, "available_algorithms", lambda: sorted(ALGOS))


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _last_trainer():
    assert FakeTrainer.instances
    return FakeTrainer.instances[-1]


# --------------------------------------------------------------------------------------
# Stop criteria
# --------------------------------------------------------------------------------------
def test_train_stops_on_any_criterion(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "CartPole-v1", "--stop",
                          '{"episode_reward_mean": 1000, "timesteps_total": 3000}')
    assert code == 0, err
    trainer = _last_trainer()
    assert trainer.iteration == 3  # timesteps 3000 reached first; reward would need 10
    assert trainer.stopped
    assert trainer.env == "CartPole-v1" and trainer.config["env"] == "CartPole-v1"
    assert any("Stop criterion met: timesteps_total = 3000 >= 3000" in line for line in out)
    assert out[-1] == f"Results: {trainer.logdir}"
    progress = [line for line in out if line.startswith("iter")]
    assert len(progress) == 3
    assert "reward     n/a" in progress[0]  # NaN before the first episode ends
    assert progress[1].startswith("iter    2 | steps    2000 | reward  200.00 (min 0.0, max")
    assert "episodes 6" in progress[1] and "| 1.0s" in progress[1]
    assert err == ""


def test_nan_never_triggers():
    result = {"episode_reward_mean": float("nan")}
    assert cli.stop_criteria_met(result, {"episode_reward_mean": -1e9}) == []


def test_stop_criteria_met_unit():
    result = {"a": 5, "evaluation": {"r": 10.0}, "x/y": 1, "s": "text"}
    assert cli.stop_criteria_met(result, {"a": 5}) == [("a", 5, 5)]
    assert cli.stop_criteria_met(result, {"a": 6}) == []
    assert cli.stop_criteria_met(result, {"evaluation/r": 10}) == [("evaluation/r", 10.0, 10)]
    assert cli.stop_criteria_met(result, {"x/y": 1}) == [("x/y", 1, 1)]  # literal key wins
    assert cli.stop_criteria_met(result, {"missing": 0, "s": 0}) == []
    met = cli.stop_criteria_met(result, {"a": 1, "evaluation/r": 1})
    assert [m[0] for m in met] == ["a", "evaluation/r"]


def test_nested_stop_key(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop",
                          '{"evaluation/episode_reward_mean": 200}')
    assert code == 0
    assert _last_trainer().iteration == 4  # evaluation exists on even iterations: 100, 200
    assert any("evaluation/episode_reward_mean = 200 >= 200" in line for line in out)
    # The stop key is shown in the progress line when present.
    assert "evaluation/episode_reward_mean 200" in out[-3]
    assert out[-1].startswith("Results: ")
    # Absent from the first result (no evaluation on iteration 1): one warning.
    assert err.count("WARNING") == 1
    assert "appear only on iterations that evaluate" in err


def test_misspelt_stop_key_is_an_error_with_did_you_mean(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop",
                          '{"episode_reward_maen": 1, "training_iteration": 40}')
    assert code == 2
    assert _last_trainer().iteration == 1 and _last_trainer().stopped  # not trained on until killed
    assert "experiment 'default': stop key(s) not in the results: 'episode_reward_maen' " \
           "(did you mean 'episode_reward_mean'?)" in err
    assert "timesteps_total" in err and "info/learner/default_policy/policy_loss" in err
    assert "hist_stats" not in err and "WARNING" not in err
    assert out[-1].startswith("Results: ")


def test_stop_key_of_a_group_that_fills_later_only_warns(capsys):
    # Learner statistics appear once learning starts (an off-policy trainer's `learning_starts`).
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop",
                          '{"info/learner/default_policy/td_error": 1, "training_iteration": 4}')
    assert code == 0, err
    assert _last_trainer().iteration == 4
    assert err.count("WARNING") == 1 and "'info/learner/default_policy/td_error'" in err


def test_header_names_the_stop_criteria(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop",
                          '{"episode_reward_mean": 1000, "timesteps_total": 3000}')
    assert code == 0, err
    assert out[0] == "== default: FAKE on E-v0 | stops when episode_reward_mean >= 1000 or timesteps_total >= 3000"
    assert not any("None" in line for line in out)


@pytest.mark.parametrize("stop, limit", [({"timesteps_total": 2500.5}, 2501),
                                         ({"num_env_steps_sampled_lifetime": 900, "timesteps_total": 5000}, 900),
                                         ({"episode_reward_mean": 300}, None)])
def test_a_step_count_stop_sets_the_trainers_step_limit(capsys, stop, limit):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop", json.dumps(stop))
    assert code == 0, err
    assert _last_trainer().step_limit == limit


def test_nested_stop_in_yaml_form(tmp_path, capsys):
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent("""
        nested:
          run: FAKE
          env: E-v0
          stop:
            evaluation:
              episode_reward_mean: 300
    """))
    code, out, err = _run(capsys, "train", "-f", str(path))
    assert code == 0, err
    assert _last_trainer().iteration == 6


def test_empty_stop_runs_until_ctrl_c(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0",
                          "--config", '{"interrupt_at": 5}')
    assert code == 130
    trainer = _last_trainer()
    assert trainer.stopped
    assert any("until Ctrl-C" in line for line in out)
    assert any("Interrupted" in line for line in out)
    assert len([line for line in out if line.startswith("iter")]) == 4
    assert out[-1] == f"Results: {trainer.logdir}"


def test_ctrl_c_with_checkpoint_at_end_saves(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop",
                          '{"training_iteration": 50}', "--config", '{"interrupt_at": 2}',
                          "--checkpoint-at-end")
    assert code == 130
    trainer = _last_trainer()
    assert len(trainer.saves) == 1 and trainer.stopped
    assert out[-1] == f"Results: {trainer.logdir}"


# --------------------------------------------------------------------------------------
# Arguments and experiment files
# --------------------------------------------------------------------------------------
def test_yaml_experiments_with_cli_overrides(tmp_path, capsys):
    path = tmp_path / "exps.yaml"
    path.write_text(textwrap.dedent("""
        first:
          run: FAKE
          env: CartPole-v1
          stop: {training_iteration: 10, episode_reward_mean: 250}
          config:
            lr: 0.01
            model: {fcnet_hiddens: [64, 64], fcnet_activation: tanh}
        second:
          run: FAKE2
          stop: {training_iteration: 1}
          config:
            env: Pendulum-v1
            gamma: 0.95
    """))
    code, out, err = _run(capsys, "train", "-f", str(path), "--stop",
                          '{"training_iteration": 2}', "--config",
                          '{"lr": 0.001, "model": {"fcnet_hiddens": [32]}}')
    assert code == 0, err
    first, second = FakeTrainer.instances
    # --stop updated each experiment: training_iteration 2 wins over the file's 10 / 1.
    assert first.iteration == 2 and second.iteration == 2
    assert first.env == "CartPole-v1"
    assert first.config["lr"] == 0.001
    assert first.config["model"] == {"fcnet_hiddens": [32], "fcnet_activation": "tanh"}
    assert second.env == "Pendulum-v1" and second.config["gamma"] == 0.95
    assert second.config["lr"] == 0.001
    results = [line for line in out if line.startswith("Results: ")]
    assert results == [f"Results: {first.logdir}", f"Results: {second.logdir}"]
    assert out[-1] == f"Results: {second.logdir}"
    assert any(line.startswith("== first: FAKE on CartPole-v1") for line in out)


@pytest.mark.parametrize("bad_line, message", [
    ("  resources_per_trail: {}\n  stop: {training_iteration: 1}\n", "unknown key 'resources_per_trail'"),
    # Issue 26: a warning here let the run train forever.
    ("  stopp: {training_iteration: 1}\n", "experiment 'x': unknown key 'stopp'; did you mean 'stop'?"),
])
def test_unknown_yaml_experiment_keys_are_errors(bad_line, message, tmp_path, capsys):
    path = tmp_path / "e.yaml"
    path.write_text("x:\n  run: FAKE\n  env: E\n" + bad_line)
    code, out, err = _run(capsys, "train", "-f", str(path))
    assert code == cli.EXIT_USAGE and not FakeTrainer.instances
    assert message in err


def test_local_dir(tmp_path, capsys):
    local = tmp_path / "mine"
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "ALE/Pong-v5",
                          "--stop", '{"training_iteration": 1}', "--local-dir", str(local))
    assert code == 0
    trainer = _last_trainer()
    assert os.path.dirname(trainer.logdir) == str(local)
    assert os.path.basename(trainer.logdir).startswith("FAKE_ALE_Pong-v5_")
    assert out[-1] == f"Results: {trainer.logdir}"


def test_default_logdir_under_the_results_dir(tmp_path, capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0",
                          "--stop", '{"training_iteration": 1}')
    assert code == 0
    # The CLI makes the run folder under $RLFLEET_RESULTS_DIR (named as the trainer names it).
    assert os.path.dirname(_last_trainer().logdir) == str(tmp_path / "results")


def test_checkpoint_freq_and_at_end(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop",
                          '{"training_iteration": 5}', "--checkpoint-freq", "2",
                          "--checkpoint-at-end")
    assert code == 0
    trainer = _last_trainer()
    assert [os.path.basename(p) for p in trainer.saves] == [
        "checkpoint_000002", "checkpoint_000004", "checkpoint_000005"]
    assert sum("Checkpoint saved" in line for line in out) == 3
    assert out[-1].startswith("Results: ")


def test_checkpoint_at_end_not_duplicated(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", "--stop",
                          '{"training_iteration": 4}', "--checkpoint-freq", "2",
                          "--checkpoint-at-end")
    assert code == 0
    assert len(_last_trainer().saves) == 2


def test_unknown_run_lists_algorithms(capsys):
    code, out, err = _run(capsys, "train", "--run", "NOPE", "--env", "E-v0")
    assert code == 2
    assert "unknown algorithm 'NOPE'" in err and "FAKE, FAKE2" in err
    assert "--run" in err
    assert "Traceback" not in err
    assert FakeTrainer.instances == []


def test_unknown_run_in_later_yaml_experiment_fails_before_training(tmp_path, capsys):
    path = tmp_path / "e.yaml"
    path.write_text("a: {run: FAKE, env: E}\nb: {run: TYPO, env: E}\n")
    code, out, err = _run(capsys, "train", "-f", str(path))
    assert code == 2 and "'TYPO'" in err
    assert FakeTrainer.instances == []


@pytest.mark.parametrize("flag", ["--stop", "--config"])
def test_bad_json_names_the_flag(capsys, flag):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", flag, "{lr: 1")
    assert code == 2
    assert f"argument {flag}: invalid JSON" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("flag", ["--stop", "--config"])
def test_json_must_be_an_object(capsys, flag):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E-v0", flag, "[1, 2]")
    assert code == 2
    assert f"argument {flag}: must be a JSON object" in err


def test_non_numeric_stop_threshold(capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--stop",
                          '{"episode_reward_mean": "high"}')
    assert code == 2
    assert "'episode_reward_mean'" in err and "'high'" in err


def test_missing_run(capsys):
    code, out, err = _run(capsys, "train", "--env", "E-v0")
    assert code == 2 and "--run" in err


def test_yaml_errors(tmp_path, capsys):
    code, out, err = _run(capsys, "train", "-f", str(tmp_path / "missing.yaml"))
    assert code == 2 and "cannot read" in err

    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed\n")
    code, out, err = _run(capsys, "train", "-f", str(bad))
    assert code == 2 and "not valid YAML" in err

    norun = tmp_path / "norun.yaml"
    norun.write_text("a: {env: E}\n")
    code, out, err = _run(capsys, "train", "-f", str(norun))
    assert code == 2 and "no `run:`" in err

    flat = tmp_path / "flat.yaml"
    flat.write_text("- run: FAKE\n")
    code, out, err = _run(capsys, "train", "-f", str(flat))
    assert code == 2 and "experiments" in err


def test_invalid_config_is_usage_error(capsys, tmp_path):
    local = tmp_path / "local"
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E", "--local-dir",
                          str(local), "--config", '{"invalid": true}')
    assert code == 2
    assert "invalid config for FAKE" in err and "Traceback" not in err
    assert not any(line.startswith("Results:") for line in out)
    assert os.listdir(local) == []  # the empty run folder is cleaned up


def test_argparse_errors_return_2(capsys):
    code, out, err = _run(capsys, "train", "--checkpoint-freq", "often")
    assert code == 2 and "--checkpoint-freq" in err
    code, out, err = _run(capsys)
    assert code == 2
    code, out, err = _run(capsys, "frobnicate")
    assert code == 2


def test_help_returns_0(capsys):
    code, out, err = _run(capsys, "train", "--help")
    assert code == 0 and any("--stop" in line for line in out)


def test_list(capsys):
    code, out, err = _run(capsys, "list")
    assert code == 0
    assert out == ["FAKE", "FAKE2"]


def test_format_progress_handles_missing_values():
    line = cli.format_progress({})
    assert line.startswith("iter  n/a | steps     n/a | reward     n/a")
    line = cli.format_progress({"training_iteration": 12, "timesteps_total": 48000,
                                "episode_reward_mean": 187.3, "episode_reward_min": 21.0,
                                "episode_reward_max": 500.0, "episode_len_mean": 187.3,
                                "episodes_total": 312, "time_total_s": 35.2})
    assert line == ("iter   12 | steps   48000 | reward  187.30 (min 21.0, max 500.0) | "
                    "len 187.3 | episodes 312 | 35.2s")


def test_logging_restored_after_main(capsys):
    import logging

    pkg = logging.getLogger("rlfleet")
    before = (pkg.level, list(pkg.handlers))
    _run(capsys, "train", "--run", "FAKE", "--env", "E", "-vv", "--stop",
         '{"training_iteration": 1}')
    assert (pkg.level, list(pkg.handlers)) == before


def test_import_is_light():
    code = ("import sys, rlfleet.cli; "
            "heavy = [m for m in ('torch', 'numpy', 'gymnasium', 'ray', 'yaml') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


# --- signals: through `rlfleet train` in a subprocess (issue 17) ------------------------------
def _descendants(pid: int) -> set:
    """Pids of every process below `pid` (from /proc)."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _train_until_signal(tmp_path, sig, config, *flags):
    """Starts `rlfleet train`, sends `sig` once the first iteration's progress line is out;
    returns (exit code, stdout, the run's folder, the pids below the CLI before the signal)."""
    import signal as signal_module

    cmd = [sys.executable, "-m", "rlfleet.cli", "train", "--run", "PG", "--env", "CartPole-v1",
           "--stop", json.dumps({"training_iteration": 10_000}), "--local-dir", str(tmp_path),
           "--config", json.dumps(config), *flags]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if len(lines) >= 3 and lines[-2].strip().startswith("logdir:"):
                break  # the first iteration's progress line
        assert any(line.strip().startswith("logdir:") for line in lines), "".join(lines) + proc.stderr.read()
        below = _descendants(proc.pid)
        proc.send_signal(getattr(signal_module, sig))
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    stdout = "".join(lines) + out
    logdir = next(line.split("logdir:", 1)[1].strip() for line in lines if "logdir:" in line)
    return proc.returncode, stdout, err, logdir, below


FAST_PG_RUN = {"train_batch_size": 200, "rollout_fragment_length": 100, "min_iter_time_s": 0.5,
               "model": {"fcnet_hiddens": [8]}}


def _progress_rows(logdir):
    import csv

    with open(os.path.join(logdir, "progress.csv"), newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    assert body and all(len(r) == len(header) for r in body)  # no torn last line
    return header, body


def test_sigint_finishes_the_iteration_checkpoints_and_exits_130(tmp_path):
    rc, out, err, logdir, _ = _train_until_signal(tmp_path, "SIGINT", FAST_PG_RUN, "--checkpoint-freq", "1000")
    assert rc == 130, (out, err)
    assert "Interrupted (SIGINT) after iteration" in out and out.strip().splitlines()[-1] == f"Results: {logdir}"
    header, body = _progress_rows(logdir)
    last = int(body[-1][header.index("training_iteration")])
    # checkpointing is on (--checkpoint-freq), so the interrupted run saved its last iteration
    assert os.path.isfile(os.path.join(logdir, f"checkpoint_{last}", "manifest.json"))
    with open(os.path.join(logdir, "result.json")) as f:
        assert [json.loads(line)["training_iteration"] for line in f] == list(range(1, last + 1))
    assert "Traceback" not in err


def test_sigterm_with_remote_workers_leaves_no_process(tmp_path):
    import time

    pytest.importorskip("ray")
    config = dict(FAST_PG_RUN, num_workers=1)
    rc, out, err, logdir, below = _train_until_signal(tmp_path, "SIGTERM", config, "--checkpoint-at-end")
    assert rc == 143, (out, err)
    assert below, "Ray's processes should have been running below the CLI"
    deadline = time.time() + 30
    while time.time() < deadline and any(_alive(p) for p in below):
        time.sleep(0.5)
    assert not [p for p in below if _alive(p)]  # Ray's processes ended with the run
    header, body = _progress_rows(logdir)
    assert os.path.isfile(os.path.join(logdir, f"checkpoint_{len(body)}", "manifest.json"))
    assert "Interrupted (SIGTERM) after iteration" in out and "Traceback" not in err


def test_config_command_prints_the_keys(capsys):
    code, out, err = _run(capsys, "config")
    assert code == 0 and any("| `lr` |" in line for line in out)
    code, out, err = _run(capsys, "config", "PPO")
    assert code == 0 and any(line.startswith("| `clip_param` | `0.3` |") for line in out)
    code, out, err = _run(capsys, "config", "PPOO")
    assert code == 2 and "Did you mean 'PPO'" in err


# --- relative paths in an experiment file (issue 26) ------------------------------------------
def _load(path):
    return cli.load_experiments(cli.build_parser().parse_args(["train", "-f", str(path)]))


def test_yaml_input_path_resolves_beside_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "examples" / "bc"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "expert.json").write_text("{}\n")
    (folder / "e.yaml").write_text("x:\n  run: FAKE\n  config: {input: data/expert.json}\n"
                                   "y:\n  run: FAKE\n  config: {input: [examples/bc/data/expert.json, sampler]}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    x, y = _load(folder / "e.yaml")
    assert x.config["input"] == str(folder / "data" / "expert.json")
    # Relative to a folder above the file (the checkout's root, as tuned_examples/ writes them).
    assert y.config["input"] == [str(tmp_path / "examples/bc/data/expert.json"), "sampler"]


def test_yaml_input_path_found_from_the_current_folder_stays(tmp_path, monkeypatch):
    (tmp_path / "d.json").write_text("{}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e.yaml").write_text("x:\n  run: FAKE\n  config: {input: ./d.json}\n")
    monkeypatch.chdir(tmp_path)
    assert _load(tmp_path / "sub" / "e.yaml")[0].config["input"] == "./d.json"


def test_yaml_input_path_found_nowhere_names_both_places(tmp_path, monkeypatch, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e.yaml").write_text("x:\n  run: FAKE\n  env: E\n  config: {input: data/missing.json}\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "train", "-f", str(tmp_path / "sub" / "e.yaml"))
    assert code == cli.EXIT_USAGE
    assert f"neither in the current folder ({tmp_path})" in err and f"experiment file ({tmp_path / 'sub'})" in err


# --- a run failing at start-up leaves no folder (issue 26) --------------------------------
@pytest.mark.parametrize("knob", ["invalid", "crash"])
def test_a_run_failing_at_start_up_leaves_no_run_folder(knob, tmp_path, capsys):
    results = tmp_path / "results"
    with pytest.raises(RuntimeError) if knob == "crash" else contextlib.nullcontext():
        code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E", "--config", json.dumps({knob: True}))
        assert code == cli.EXIT_USAGE
    assert not results.exists() or os.listdir(results) == []


# --- a missing optional package: one line naming rlfleet's extra (issue 26) -------------------
@pytest.mark.parametrize("knob,line", [
    ({"needs_box2d": True}, 'rlfleet train: error: Box2D is not installed; install it with: pip install "rlfleet[box2d]"'),
    ({"needs_module": "moviepy"}, "the optional package 'moviepy' is not installed; install it with: "
                                  'pip install "rlfleet[video]"'),
])
def test_a_missing_optional_package_is_one_line_naming_the_extra(knob, line, capsys):
    code, out, err = _run(capsys, "train", "--run", "FAKE", "--env", "E", "--config", json.dumps(knob))
    assert code == cli.EXIT_USAGE
    assert line in err and "Traceback" not in err and "gymnasium[box2d]" not in err
    assert len(err.strip().splitlines()) == 1


def test_another_missing_module_keeps_its_traceback(capsys):
    with pytest.raises(ModuleNotFoundError):
        _run(capsys, "train", "--run", "FAKE", "--env", "E", "--config", '{"needs_module": "my_own_package"}')
