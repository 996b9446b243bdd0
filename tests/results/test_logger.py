"""Tests for rlfleet.logger: results folder, params.json, result.json, progress.csv."""
from __future__ import annotations

import csv
import enum
import json
import math
import os
import re

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.results import logger as rl_logger
from rlfleet.results.logger import (
    UnifiedLogger,
    default_results_dir,
    flatten_dict,
    make_logdir,
    to_jsonable,
)
from tests.helpers import read_tb_scalars


def _result(i: int, **extra):
    result = {
        "training_iteration": i,
        "timesteps_total": 1000 * i,
        "episode_reward_mean": float("nan") if i == 1 else 10.0 * i,
        "hist_stats": {"episode_reward": [1.0, 2.0, 3.0]},
        "config": {"lr": 0.001},
        "info": {"learner": {"default_policy": {"policy_loss": 0.5 / i, "kl": np.float32(0.01)}},
                 "num_steps_sampled": 1000 * i},
        "custom_metrics": {},
        "sampler_perf": {"mean_env_wait_ms": 0.25},
    }
    result.update(extra)
    return result


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


# --------------------------------------------------------------------------------------
# Results folder
# --------------------------------------------------------------------------------------
def test_default_results_dir_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv("RLFLEET_RESULTS_DIR", str(tmp_path / "res"))
    assert default_results_dir() == str(tmp_path / "res")
    monkeypatch.delenv("RLFLEET_RESULTS_DIR")
    assert default_results_dir() == os.path.join(os.path.expanduser("~"), "rlfleet_results")


def test_make_logdir_name_and_uniqueness(tmp_path):
    a = make_logdir("PPO", "ALE/Pong-v5", str(tmp_path))
    b = make_logdir("PPO", "ALE/Pong-v5", str(tmp_path))
    assert a != b
    for path in (a, b):
        assert os.path.isdir(path) and os.listdir(path) == []
        assert os.path.dirname(path) == str(tmp_path)
        assert re.fullmatch(r"PPO_ALE_Pong-v5_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]+",
                            os.path.basename(path)), path


def test_make_logdir_uses_env_var_and_creates_parent(monkeypatch, tmp_path):
    monkeypatch.setenv("RLFLEET_RESULTS_DIR", str(tmp_path / "new" / "results"))
    path = make_logdir("PG", None)
    assert os.path.dirname(path) == str(tmp_path / "new" / "results")
    assert os.path.basename(path).startswith("PG_2")  # no env part, then the date


def test_make_logdir_sanitises_odd_env_ids(tmp_path):
    path = make_logdir("PPO", "my_pkg.envs:My Env/v0", str(tmp_path))
    assert os.path.basename(path).startswith("PPO_my_pkg.envs_My_Env_v0_")


def test_make_logdir_many_unique(tmp_path):
    paths = {make_logdir("PPO", "CartPole-v1", str(tmp_path)) for _ in range(50)}
    assert len(paths) == 50


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------
def test_flatten_dict():
    nested = {"a": 1, "info": {"learner": {"p0": {"loss": 0.5}}, "n": 3}, "empty": {},
              "lst": [1, 2]}
    assert flatten_dict(nested) == {"a": 1, "info/learner/p0/loss": 0.5, "info/n": 3,
                                    "lst": [1, 2]}
    assert flatten_dict({"a": {"b": 1}}, sep=".") == {"a.b": 1}


class _Color(str, enum.Enum):
    RED = "red"


class _BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr for you")


def _some_function(x):
    return x


class _Callbacks:
    pass


def test_to_jsonable_weird_values():
    config = {
        "callbacks": _Callbacks,
        "fn": _some_function,
        "lam": lambda x: x,
        "space": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        "np_scalar": np.float32(0.5),
        "np_int": np.int64(7),
        "np_bool": np.bool_(True),
        "np_array": np.arange(4).reshape(2, 2),
        "tuple": (1, "a"),
        "set": {3, 1, 2},
        "enum": _Color.RED,
        "bad": _BadRepr(),
        "obj": object(),
        "nan": float("nan"),
        5: "int key",
        _Callbacks: "class key",
    }
    config["self"] = config  # cycles must not recurse forever
    out = to_jsonable(config)
    text = json.dumps(out, sort_keys=True)  # must not raise
    back = json.loads(text)
    assert back["callbacks"] == f"{__name__}._Callbacks"
    assert back["fn"] == f"{__name__}._some_function"
    assert back["lam"].endswith("<lambda>")
    assert back["space"].startswith("Box(")
    assert back["np_scalar"] == 0.5 and type(out["np_scalar"]) is float
    assert back["np_int"] == 7 and type(out["np_int"]) is int
    assert back["np_bool"] is True
    assert back["np_array"] == [[0, 1], [2, 3]]
    assert back["tuple"] == [1, "a"]
    assert back["set"] == [1, 2, 3]
    assert back["enum"] == "red"
    assert back["bad"].startswith("<unrepresentable")
    assert back["obj"].startswith("<object object")
    assert math.isnan(back["nan"])
    assert back["5"] == "int key"
    assert back[f"{__name__}._Callbacks"] == "class key"
    assert back["self"] == "<cycle>"


def test_to_jsonable_torch_tensor():
    torch = pytest.importorskip("torch")
    assert to_jsonable({"t": torch.tensor([1.0, 2.0]), "s": torch.tensor(3)}) == {
        "t": [1.0, 2.0], "s": 3}


# --------------------------------------------------------------------------------------
# UnifiedLogger
# --------------------------------------------------------------------------------------
def test_unified_logger_writes_all_files(tmp_path):
    logdir = str(tmp_path / "run")
    config = {"lr": 0.001, "env": "CartPole-v1", "callbacks": _Callbacks,
              "space": gym.spaces.Discrete(2), "model": {"fcnet_hiddens": [32, 32]}}
    log = UnifiedLogger(config, logdir)

    params_text = (tmp_path / "run" / "params.json").read_text()
    params = json.loads(params_text)
    assert params == {"lr": 0.001, "env": "CartPole-v1",
                      "callbacks": f"{__name__}._Callbacks", "space": "Discrete(2)",
                      "model": {"fcnet_hiddens": [32, 32]}}
    assert list(params) == sorted(params)  # sort_keys

    log.on_result(_result(1))
    # Flushed after each line: readable before close().
    lines = (tmp_path / "run" / "result.json").read_text().splitlines()
    assert len(lines) == 1
    assert math.isnan(json.loads(lines[0])["episode_reward_mean"])
    assert len(_read_csv(tmp_path / "run" / "progress.csv")) == 2

    log.on_result(_result(2))
    log.close()
    log.close()  # idempotent

    records = [json.loads(line) for line in
               (tmp_path / "run" / "result.json").read_text().splitlines()]
    assert [r["training_iteration"] for r in records] == [1, 2]
    assert records[1]["info"]["learner"]["default_policy"]["kl"] == pytest.approx(0.01)
    # result.json keeps everything, including the bulky keys.
    assert records[1]["hist_stats"] == {"episode_reward": [1.0, 2.0, 3.0]}
    assert records[1]["config"] == {"lr": 0.001}

    rows = _read_csv(tmp_path / "run" / "progress.csv")
    header = rows[0]
    assert "info/learner/default_policy/policy_loss" in header
    assert "info/num_steps_sampled" in header
    assert "sampler_perf/mean_env_wait_ms" in header
    assert not any(h.startswith("hist_stats") or h.startswith("config") for h in header)
    assert len(rows) == 3
    row2 = dict(zip(header, rows[2]))
    assert row2["training_iteration"] == "2"
    assert float(row2["episode_reward_mean"]) == 20.0
    assert float(row2["info/learner/default_policy/policy_loss"]) == 0.25


def test_csv_header_fixed_by_first_result(tmp_path):
    with UnifiedLogger({}, str(tmp_path)) as log:
        log.on_result({"a": 1, "b": {"c": 2}})
        log.on_result({"a": 3, "new_key": 5, "evaluation": {"hist_stats": {"x": [1]}}})
        log.on_result({"b": {"c": 4}, "a": 5})
    rows = _read_csv(tmp_path / "progress.csv")
    assert rows == [["a", "b/c"], ["1", "2"], ["3", ""], ["5", "4"]]
    # result.json is not cut down to the header.
    lines = (tmp_path / "result.json").read_text().splitlines()
    assert json.loads(lines[1])["new_key"] == 5


def test_csv_lists_written_as_json(tmp_path):
    with UnifiedLogger({}, str(tmp_path)) as log:
        log.on_result({"a": [1, 2], "n": None})
    rows = _read_csv(tmp_path / "progress.csv")
    assert rows[1] == ["[1, 2]", ""]


def test_reopening_logdir_appends_under_existing_header(tmp_path):
    with UnifiedLogger({"lr": 1}, str(tmp_path)) as log:
        log.on_result({"a": 1, "b": 2})
    with UnifiedLogger({"lr": 1}, str(tmp_path)) as log:
        log.on_result({"b": 20, "a": 10, "c": 30})
    rows = _read_csv(tmp_path / "progress.csv")
    assert rows == [["a", "b"], ["1", "2"], ["10", "20"]]
    assert len((tmp_path / "result.json").read_text().splitlines()) == 2


def test_on_result_after_close_raises(tmp_path):
    log = UnifiedLogger({}, str(tmp_path))
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.on_result({"a": 1})


def test_weird_values_in_result_do_not_break_logging(tmp_path):
    with UnifiedLogger({"obj": _BadRepr()}, str(tmp_path)) as log:
        log.on_result({"training_iteration": 1, "weird": _BadRepr(),
                       "arr": np.zeros(2, np.float32), "s": gym.spaces.Discrete(3)})
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["arr"] == [0.0, 0.0] and record["s"] == "Discrete(3)"


def test_tensorboard_missing_is_silent(tmp_path, monkeypatch):
    monkeypatch.setattr(rl_logger, "_open_event_file", lambda logdir: None)
    with UnifiedLogger({}, str(tmp_path)) as log:
        log.on_result({"training_iteration": 1, "timesteps_total": 10})
    assert sorted(os.listdir(tmp_path)) == ["params.json", "progress.csv", "result.json", "run_status.json"]


def test_real_tb_factory_never_raises(tmp_path):
    # Whether or not tensorboardX loads here, creating the logger must work and the other files
    # are written; where it loads, the scalars are in its event file.
    with UnifiedLogger({}, str(tmp_path)) as log:
        log.on_result({"training_iteration": 1, "timesteps_total": 10, "x": 1.5})
    assert json.loads((tmp_path / "result.json").read_text())["x"] == 1.5
    try:
        from tensorboardX.proto import event_pb2, summary_pb2  # noqa: F401  (what the logger imports)
        from tensorboardX.record_writer import masked_crc32c  # noqa: F401
    except ImportError:
        assert not list(tmp_path.glob("events.out.tfevents.*"))
    else:
        assert read_tb_scalars(str(tmp_path))["x"] == [(10, 1.5)]


def test_tensorboard_scalars_when_available(tmp_path):
    with UnifiedLogger({}, str(tmp_path)) as log:
        log.on_result(_result(2, flag=True, name="x"))
        log.on_result(_result(3))
    tags = {tag: values for tag, values in read_tb_scalars(str(tmp_path)).items()}
    assert tags["episode_reward_mean"][0] == (2000, 20.0)
    assert tags["info/learner/default_policy/policy_loss"][0] == (2000, 0.25)
    assert [step for step, _ in tags["episode_reward_mean"]] == [2000, 3000]
    assert not any(t.startswith(("hist_stats", "config")) for t in tags)
    assert "flag" not in tags and "name" not in tags  # only numbers


def test_tensorboard_event_file_is_valid_tfrecord(tmp_path):
    """Every record's length and data carry the masked CRC-32C TensorBoard checks."""
    import struct

    from tensorboardX.record_writer import masked_crc32c

    with UnifiedLogger({}, str(tmp_path)) as log:
        log.on_result(_result(1))
    (name,) = [n for n in os.listdir(tmp_path) if n.startswith("events.out.tfevents.")]
    data, pos, records = (tmp_path / name).read_bytes(), 0, 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[pos + 8:pos + 12])[0] == masked_crc32c(header)
        body = data[pos + 12:pos + 12 + length]
        assert struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])[0] == masked_crc32c(body)
        pos += 16 + length
        records += 1
    assert pos == len(data) and records == 2  # the file-version event, then one result


# --------------------------------------------------------------------------------------
# Loggers: logger_config, TensorBoard files read back, log_sys_usage
# --------------------------------------------------------------------------------------
class RecordingLogger:
    """A custom `logger_config.type` logger: keeps its options and every result."""

    instances: list = []

    def __init__(self, config, logdir):
        self.config, self.logdir, self.results, self.closed = dict(config), logdir, [], False
        RecordingLogger.instances.append(self)

    def on_result(self, result):
        self.results.append(result)

    def close(self):
        self.closed = True


def _tiny_ppo(tmp_path, **config):
    from rlfleet.algorithms.ppo import PPOTrainer

    base = dict(train_batch_size=128, sgd_minibatch_size=64, num_sgd_iter=1, rollout_fragment_length=64,
                model={"fcnet_hiddens": [8]}, seed=1)
    return PPOTrainer(env="Pendulum-v1", config=dict(base, **config), logdir=str(tmp_path / "run"))


def test_trainer_writes_tensorboard_events_and_sys_usage(tmp_path):
    trainer = _tiny_ppo(tmp_path)  # defaults: the three built-in loggers, log_sys_usage on
    results = [trainer.train() for _ in range(2)]
    trainer.stop()
    assert set(results[1]["perf"]) >= {"cpu_util_percent", "ram_util_percent"}
    assert 0 <= results[1]["perf"]["ram_util_percent"] <= 100
    run = str(tmp_path / "run")
    assert {"params.json", "result.json", "progress.csv"} <= set(os.listdir(run))
    scalars = read_tb_scalars(run)
    assert [step for step, _ in scalars["timesteps_total"]] == [128, 256]
    assert [value for _, value in scalars["training_iteration"]] == [1.0, 2.0]
    assert "perf/cpu_util_percent" in scalars
    loss = scalars["info/learner/default_policy/learner_stats/total_loss"]
    assert loss[1][1] == pytest.approx(results[1]["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    assert not any(tag.startswith(("hist_stats", "config")) for tag in scalars)


def test_logger_config_type_receives_every_result(tmp_path):
    RecordingLogger.instances.clear()
    trainer = _tiny_ppo(tmp_path, log_sys_usage=False,
                        logger_config={"type": f"{__name__}.RecordingLogger", "project": "demo"})
    results = [trainer.train() for _ in range(3)]
    (log,) = RecordingLogger.instances
    assert log.config == {"project": "demo"} and log.logdir == str(tmp_path / "run")
    assert [r["training_iteration"] for r in log.results] == [1, 2, 3]
    assert log.results[-1] is results[-1]
    trainer.stop()
    assert log.closed
    # As in the reference, `type` replaces the default loggers.
    assert not (tmp_path / "run" / "result.json").exists()


def test_logger_config_list_of_types_and_own_folder(tmp_path):
    from rlfleet.results.logger import CSVLogger

    RecordingLogger.instances.clear()
    other = tmp_path / "elsewhere"
    trainer = _tiny_ppo(tmp_path, logger_config={"type": [RecordingLogger, CSVLogger], "logdir": str(other)})
    trainer.train()
    trainer.stop()
    assert len(RecordingLogger.instances[0].results) == 1
    assert sorted(os.listdir(other)) == ["progress.csv"]


@pytest.mark.parametrize("bad, match", [
    ({"type": "no_such_module.Logger"}, "'logger_config.type': cannot import 'no_such_module.Logger'"),
    ({"type": 3}, "'logger_config'"),
    ("json", "'logger_config'"),
])
def test_bad_logger_config_names_the_key(tmp_path, bad, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        _tiny_ppo(tmp_path, logger_config=bad)


# --------------------------------------------------------------------------------------
# Progress (rlfleet.progress)
# --------------------------------------------------------------------------------------
def test_stop_estimator_extrapolates_each_criterion():
    from rlfleet.results.progress import StopEstimator, format_duration

    est = StopEstimator({"timesteps_total": 10000, "episode_reward_mean": 100, "training_iteration": 3})
    est.update({"time_total_s": 1.0, "timesteps_total": 1000, "episode_reward_mean": 10.0, "training_iteration": 1})
    etas = est.update({"time_total_s": 2.0, "timesteps_total": 2000, "episode_reward_mean": 5.0,
                       "training_iteration": 2})
    assert etas["timesteps_total"] == pytest.approx(8.0)  # 8000 steps at 1000/s
    assert etas["episode_reward_mean"] is None  # falling: no estimate
    assert etas["training_iteration"] == pytest.approx(1.0)
    assert StopEstimator.soonest(etas) == ("training_iteration", pytest.approx(1.0))
    etas = est.update({"time_total_s": 3.0, "timesteps_total": 3000, "episode_reward_mean": float("nan"),
                       "training_iteration": 3})
    assert etas["training_iteration"] == 0.0 and etas["episode_reward_mean"] is None
    assert [format_duration(s) for s in (5, 65, 7325)] == ["5s", "1m05s", "2h02m"]


def _progress_results():
    for i in range(1, 4):
        yield {"training_iteration": i, "timesteps_total": 1000 * i, "episode_reward_mean": 20.0 * i,
               "episode_reward_min": 1.0, "episode_reward_max": 90.0, "episode_len_mean": 20.0 * i,
               "episodes_total": 5 * i, "time_total_s": 2.0 * i, "info": {"learner": {"kl": 0.01 * i}}}


def test_progress_plain_lines_with_eta():
    import io

    from rlfleet.cli import format_progress
    from rlfleet.results.progress import ProgressReporter

    out = io.StringIO()  # not a terminal: plain lines
    progress = ProgressReporter({"episode_reward_mean": 100, "info/learner/kl": 1.0}, format_progress, stream=out)
    assert not progress.live
    for result in _progress_results():
        progress.update(result)
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("iter    1 | steps    1000 | reward   20.00")
    assert "ETA" not in lines[0]  # one point: no rate yet
    assert lines[2].endswith("| ETA 4s (episode_reward_mean)")  # 40 to go at 10 per second
    assert "info/learner/kl 0.03" in lines[2]


def test_progress_live_table():
    import io

    from rlfleet.cli import format_progress
    from rlfleet.results.progress import ProgressReporter

    out = io.StringIO()
    progress = ProgressReporter({"timesteps_total": 5000, "info/learner/kl": 1.0}, format_progress, stream=out,
                                live=True)
    for result in _progress_results():
        progress.update(result)
    progress.close()
    text = out.getvalue()
    for word in ("iter", "steps", "reward", "info/learner/kl", "3000", "60.00", "ETA", "timesteps_total >= 5000: 4s"):
        assert word in text, word


# --------------------------------------------------------------------------------------
# rlfleet plot
# --------------------------------------------------------------------------------------
def _write_run(folder, rewards):
    os.makedirs(folder)
    with open(os.path.join(folder, "result.json"), "w") as f:
        for i, r in enumerate(rewards, 1):
            f.write(json.dumps({"training_iteration": i, "timesteps_total": 1000 * i, "time_total_s": 2.0 * i,
                                "episode_reward_mean": r, "episode_reward_min": r - 10,
                                "episode_reward_max": r + 10, "done": False}) + "\n")
        f.write('{"training_iteration": 99, "cut sh')  # a line cut short by a crash


def test_cli_plot_writes_a_png_with_curves_and_bands(tmp_path, capsys):
    import matplotlib.image

    from rlfleet import cli

    _write_run(tmp_path / "PPO_a", [float("nan"), 10.0, 30.0, 60.0, 90.0])
    _write_run(tmp_path / "tune_exp" / "trial_1", [5.0, 8.0, 20.0, 25.0, 40.0])
    _write_run(tmp_path / "tune_exp" / "trial_2", [7.0, 9.0, 11.0, 13.0, 15.0])
    out = tmp_path / "plots" / "curve.png"
    assert cli.main(["plot", str(tmp_path / "PPO_a"), str(tmp_path / "tune_exp"), "--out", str(out),
                     "--smooth", "2", "--x", "time_total_s"]) == 0
    assert capsys.readouterr().out.strip() == f"Wrote {out}"
    image = matplotlib.image.imread(str(out))
    assert image.shape[:2] == (500, 800)
    rgb = image[..., :3].reshape(-1, 3)
    assert rgb.std() > 0.05  # not blank
    # Matplotlib's first three line colours (one per run) are all drawn.
    for color in ((0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C)):
        assert (abs(rgb * 255 - color).sum(axis=1) < 30).sum() > 50, color

    assert cli.main(["plot", str(tmp_path / "PPO_a"), "--metric", "nope"]) == 2
    assert "'nope'" in capsys.readouterr().err
    assert cli.main(["plot", str(tmp_path / "plots")]) == 2
    assert "holds no run" in capsys.readouterr().err
    assert cli.main(["plot", str(tmp_path / "PPO_a")]) == 0  # default: RUN_DIR/curve.png
    assert (tmp_path / "PPO_a" / "curve.png").stat().st_size > 10000


def test_plot_smoothing():
    from rlfleet.results.plot import smooth

    out = smooth([1.0, 3.0, float("nan"), 5.0], 2)
    assert out == [1.0, 2.0, 3.0, 5.0]
