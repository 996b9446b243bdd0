"""Checkpoints: round trips (PPO, PG), deterministic resume in fresh processes, bad
checkpoints and their messages, planted pickle payloads that must never run, interrupted
saves, pruning, from_checkpoint, and `rlfleet evaluate`."""
from __future__ import annotations

import json
import os
import pickle
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

from rlfleet import cli
from rlfleet.algorithms.pg import PGTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.callbacks import DefaultCallbacks
from rlfleet.checkpoint import CheckpointError, list_checkpoints, read_checkpoint
from rlfleet.trainer import Trainer
from tests.helpers import REPO_ROOT
from tests.off_policy_helpers import SMOKE

REPO = str(REPO_ROOT)
PID = "default_policy"

SMALL = {
    "seed": 7, "num_envs_per_worker": 2, "rollout_fragment_length": 50, "train_batch_size": 200,
    "observation_filter": "MeanStdFilter", "model": {"fcnet_hiddens": [16, 16]},
}
ALGOS = {
    "PPO": (PPOTrainer, dict(SMALL, sgd_minibatch_size=64, num_sgd_iter=2)),
    "PG": (PGTrainer, dict(SMALL)),
}


class RecordingCallbacks(DefaultCallbacks):
    """A module-level class: a checkpoint records it by qualified name."""


def make(algo, tmp_path, name="t", **overrides):
    cls, config = ALGOS[algo]
    return cls(config=dict(config, **overrides), env="CartPole-v1", logdir=str(tmp_path / name))


def _assert_state_equal(a, b, path=""):
    """Deep equality of two state trees (arrays compared exactly)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _assert_state_equal(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_state_equal(x, y, f"{path}/{i}")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)
    else:
        assert a == b, path


def _optimizer_tensors(policy):
    sd = policy.optimizer.state_dict()
    return {(i, k): v.clone() for i, s in sd["state"].items() for k, v in s.items()}, sd["param_groups"]


# --- round trips -------------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["PPO", "PG"])
def test_round_trip_restores_everything(algo, tmp_path):
    a = make(algo, tmp_path, "a")
    a.train()
    path = a.save(str(tmp_path / "ckpts"))
    assert path == str(tmp_path / "ckpts" / "checkpoint_1")
    b = make(algo, tmp_path, "b", seed=99, callbacks=RecordingCallbacks)  # different weights and RNG
    pa, pb = a.get_policy(), b.get_policy()
    assert not np.array_equal(pa.get_weights()["trunk.0.weight"], pb.get_weights()["trunk.0.weight"])
    b.restore(path)

    # Weights, optimizer moments and steps, hyperparameters.
    _assert_state_equal(pa.get_weights(), pb.get_weights())
    (ta, ga), (tb, gb) = _optimizer_tensors(pa), _optimizer_tensors(pb)
    assert ta and set(ta) == set(tb) and ga == gb
    for key in ta:
        assert torch.equal(ta[key], tb[key]), key
    # Filter statistics (MeanStdFilter).
    fa, fb = a.workers.local_worker().filters[PID], b.workers.local_worker().filters[PID]
    assert fa.rs.n > 0
    _assert_state_equal(fa.get_state(), fb.get_state())
    # RNG states, counters and policy extras.
    assert torch.equal(pa.generator.get_state(), pb.generator.get_state())
    assert pa.np_random.bit_generator.state == pb.np_random.bit_generator.state
    assert (b.iteration, b.counters, b._episodes.total) == (a.iteration, a.counters, a._episodes.total)
    assert pb.global_timestep == pa.global_timestep > 0
    if algo == "PPO":
        assert pb.kl_coeff == pa.kl_coeff
    _assert_state_equal(pa.get_state(), pb.get_state())

    # Greedy actions are equal; so are the next sampled (exploring) actions.
    obs = (0.1 * np.random.default_rng(0).normal(size=(5, 4))).astype(np.float32)
    for o in obs:
        assert a.compute_single_action(o, explore=False) == b.compute_single_action(o, explore=False)
    draws_a = [a.compute_single_action(o, explore=True) for o in obs for _ in range(4)]
    draws_b = [b.compute_single_action(o, explore=True) for o in obs for _ in range(4)]
    assert draws_a == draws_b and len(set(draws_a)) > 1
    act_a, _, _ = pa.compute_actions(obs, explore=True)
    with torch.no_grad():  # the torch sampling path draws from `generator`
        act_b, _, _ = pb.compute_actions(obs, explore=True)
    np.testing.assert_array_equal(act_a, act_b)

    # After restoring both, sampling restarts the episodes from the same seeds.
    a.restore(path)
    b.restore(path)
    sa, sb = a.workers.local_worker().sample(), b.workers.local_worker().sample()
    assert set(sa) == set(sb)
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
    a.stop()
    b.stop()


def test_from_checkpoint_rebuilds_the_trainer(tmp_path):
    a = make("PPO", tmp_path, "a", callbacks=RecordingCallbacks)
    a.train()
    path = a.save()
    assert os.path.dirname(path) == a.logdir
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    assert manifest["algorithm"] == "PPO" and manifest["iteration"] == 1
    assert manifest["config"]["callbacks"] == {"__callable__": "tests.checkpoint.test_checkpoint:RecordingCallbacks"}
    b = Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    assert type(b) is PPOTrainer and b.iteration == 1 and b.config["model"]["fcnet_hiddens"] == [16, 16]
    assert isinstance(b.callbacks, RecordingCallbacks)
    _assert_state_equal(a.get_weights(), b.get_weights())
    c = PPOTrainer.from_checkpoint(path, {"lr": 1e-3}, logdir=str(tmp_path / "c"))
    assert c.config["lr"] == 1e-3 and c.config["seed"] == 7
    assert c.train()["training_iteration"] == 2
    for t in (a, b, c):
        t.stop()


def test_from_checkpoint_names_a_callable_it_cannot_import(tmp_path):
    class LocalCallbacks(DefaultCallbacks):  # defined in a function: not importable by name
        pass

    a = make("PG", tmp_path, "a", callbacks=LocalCallbacks)
    path = a.save()
    with pytest.raises(CheckpointError, match=r"config key 'callbacks'.*config_overrides=\{'callbacks': \.\.\.\}"):
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    b = Trainer.from_checkpoint(path, {"callbacks": LocalCallbacks}, logdir=str(tmp_path / "c"))
    assert isinstance(b.callbacks, LocalCallbacks)
    a.stop()
    b.stop()


def _worker_view(worker):
    policy = worker.get_policy()
    return (policy.get_weights(), worker.filters[PID].get_state(), policy.generator.get_state().numpy(),
            worker.worker_index)


def test_restore_reaches_remote_workers(ray_session, tmp_path):
    """With Ray workers: every worker gets the weights and filters; each keeps RNG streams of
    its own (derived from the checkpoint and its index), and resumes repeat."""
    config = dict(ALGOS["PPO"][1], num_workers=2, num_cpus_per_worker=0.25)
    a = PPOTrainer(config=config, env="CartPole-v1", logdir=str(tmp_path / "a"))
    a.train()
    path = a.save()
    b = PPOTrainer(config=dict(config, seed=8), env="CartPole-v1", logdir=str(tmp_path / "b"))
    b.restore(path)
    views = b.workers.foreach_worker(_worker_view)
    assert [v[3] for v in views] == [0, 1, 2]
    local_weights = a.get_weights()[PID]
    for weights, filt, _, _ in views:
        _assert_state_equal(local_weights, weights)
        _assert_state_equal(a.workers.local_worker().filters[PID].get_state(), filt)
    rngs = [v[2].tobytes() for v in views]
    assert rngs[0] == a.get_policy().generator.get_state().numpy().tobytes() and len(set(rngs)) == 3
    a.restore(path)
    a.train()
    b.train()
    _assert_state_equal(a.get_weights(), b.get_weights())
    a.stop()
    b.stop()


def map_agent_to_policy(agent_id, episode, worker, **kwargs):
    return f"p{agent_id}"


def test_multi_agent_round_trip(tmp_path):
    """Two policies: each one's state comes back, and from_checkpoint re-imports the mapping fn."""
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    config = dict(ALGOS["PPO"][1], sgd_minibatch_size=50, model={"fcnet_hiddens": [8]},
                  multiagent={"policies": {"p0", "p1"}, "policy_mapping_fn": map_agent_to_policy})
    a = PPOTrainer(env=MultiAgentCartPole, config=config, logdir=str(tmp_path / "a"))
    a.train()
    path = a.save()
    assert sorted(os.listdir(os.path.join(path, "policies"))) == ["p0", "p1"]
    b = Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    assert b.config["multiagent"]["policy_mapping_fn"] is map_agent_to_policy
    for pid in ("p0", "p1"):
        _assert_state_equal(a.get_policy(pid).get_state(), b.get_policy(pid).get_state())
    a.restore(path)
    a.train()
    b.train()
    _assert_state_equal(a.get_weights(), b.get_weights())
    a.stop()
    b.stop()


def test_the_smoothing_window_survives_a_checkpoint(tmp_path):
    """`rlfleet train`'s checkpoints (`continue_from_checkpoint`) and a resume keep the episodes
    the smoothed statistics are taken over: with long episodes and few ending per iteration,
    the mean return read "n/a" after each timed checkpoint, then averaged only the episodes
    since it. Multi-agent, so the per-policy rewards come back too."""
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole

    config = dict(ALGOS["PPO"][1], sgd_minibatch_size=50, model={"fcnet_hiddens": [8]},
                  metrics_smoothing_episodes=1000,
                  multiagent={"policies": {"p0", "p1"}, "policy_mapping_fn": map_agent_to_policy})
    a = PPOTrainer(env=MultiAgentCartPole, config=config, logdir=str(tmp_path / "a"))
    a.train()
    before = a.train()
    assert before["episodes_total"] > 0
    path = a.save(continue_from_checkpoint=True)
    b = Trainer.from_checkpoint(path, logdir=str(tmp_path / "b"))
    for trainer in (a, b):
        after = trainer.train()
        # The window (up to 1000 episodes) still holds every episode since the start.
        assert len(after["hist_stats"]["episode_reward"]) == after["episodes_total"] > before["episodes_total"]
        assert after["hist_stats"]["episode_reward"][:before["episodes_total"]] == pytest.approx(
            before["hist_stats"]["episode_reward"])
        assert set(after["policy_reward_mean"]) == {"p0", "p1"}
    assert a.train()["episode_reward_mean"] == pytest.approx(b.train()["episode_reward_mean"])
    a.stop()
    b.stop()


def _off_policy_cases():
    # Their smoke configs, shorter; SAC once (its CartPole variant costs more, same state).
    return [(a, e, dict(c, timesteps_per_iteration=100, learning_starts=32)) for a, e, c in SMOKE
            if (a, e) != ("SAC", "CartPole-v1")]


@pytest.mark.parametrize("algo,env,config", _off_policy_cases(), ids=[f"{a}-{e}" for a, e, _ in _off_policy_cases()])
def test_off_policy_round_trip(algo, env, config, tmp_path):
    """Every landed off-policy algorithm: policy state (weights, target nets, every optimizer,
    RNG, exploration) comes back; with store_buffer_in_checkpoints the replay buffer too, and
    two trainers restored from one checkpoint then train identically."""
    from rlfleet.registry import get_trainer_class

    cls = get_trainer_class(algo)
    config = dict(config, store_buffer_in_checkpoints=True)
    a = cls(env=env, config=config, logdir=str(tmp_path / "a"))
    a.train()
    path = a.save()
    b = cls(env=env, config=dict(config, seed=5), logdir=str(tmp_path / "b"))
    b.restore(path)
    _assert_state_equal(a.get_policy().get_state(), b.get_policy().get_state())
    _assert_state_equal(a.local_replay_buffer.get_state(), b.local_replay_buffer.get_state())
    assert len(b.local_replay_buffer) > 0 and b.counters == a.counters
    a.restore(path)
    a.train()
    b.train()
    _assert_state_equal(a.get_weights(), b.get_weights())
    a.stop()
    b.stop()


# --- deterministic resume in fresh processes ---------------------------------------------------
_RESUME_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, torch
    torch.set_num_threads(1)
    from rlfleet.trainer import Trainer
    t = Trainer.from_checkpoint(sys.argv[1], logdir=sys.argv[3])
    for _ in range(2):
        t.train()
    w = t.get_weights()["default_policy"]
    np.savez(sys.argv[2], iteration=t.iteration, **w)
    t.stop()
""")


def test_resume_is_deterministic_in_fresh_processes(tmp_path):
    a = make("PPO", tmp_path, "a")
    a.train()
    a.train()
    path = a.save(str(tmp_path / "ckpt"))
    a.stop()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO, "src"), REPO]))
    procs = [subprocess.Popen([sys.executable, "-c", _RESUME_SCRIPT, path, str(tmp_path / f"w{i}.npz"),
                               str(tmp_path / f"log{i}")], env=env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-3000:]
    w0, w1 = np.load(tmp_path / "w0.npz"), np.load(tmp_path / "w1.npz")
    assert int(w0["iteration"]) == 4 and set(w0.files) == set(w1.files)
    saved = read_checkpoint(path).state["worker"]["policies"][PID]["weights"]
    for key in saved:
        assert w0[key].tobytes() == w1[key].tobytes(), key  # bit-identical
        assert not np.array_equal(w0[key], saved[key]) or key.endswith("bias"), key  # it did train


# --- bad checkpoints -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One PPO and one PG checkpoint (read-only: tests copy before damaging)."""
    root = tmp_path_factory.mktemp("saved")
    out = {}
    for algo in ("PPO", "PG"):
        t = make(algo, root, algo)
        t.train()
        out[algo] = t.save(str(root / f"{algo}_ckpts"))
        t.stop()
    return out


@pytest.fixture
def ppo(tmp_path):
    t = make("PPO", tmp_path, "fresh")
    yield t
    t.stop()


def _copy(src, tmp_path, name="copy"):
    import shutil

    dst = str(tmp_path / name / os.path.basename(src))
    shutil.copytree(src, dst)
    return dst


def _weights_file(path):
    return os.path.join(path, "policies", PID, "weights.safetensors")


def _rewrite_manifest(path, fn):
    mpath = os.path.join(path, "manifest.json")
    manifest = json.load(open(mpath))
    fn(manifest)
    with open(mpath, "w") as f:
        json.dump(manifest, f)


def _record(path, rel):
    import hashlib

    data = open(os.path.join(path, *rel.split("/")), "rb").read()
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _missing_file(path):
    os.remove(_weights_file(path))


def _truncated(path):
    data = open(_weights_file(path), "rb").read()
    open(_weights_file(path), "wb").write(data[: len(data) // 2])


def _bit_flip(path):
    data = bytearray(open(_weights_file(path), "rb").read())
    data[-7] ^= 0x10
    open(_weights_file(path), "wb").write(bytes(data))


def _newer_version(path):
    _rewrite_manifest(path, lambda m: m.update(format_version=99, rlfleet_version="9.0.0"))


def _no_manifest(path):
    os.remove(os.path.join(path, "manifest.json"))


def _not_ours(path):
    _rewrite_manifest(path, lambda m: m.update(format="something-else"))


def _traversal(path):
    _rewrite_manifest(path, lambda m: m["files"].update({"../escape.json": {"sha256": "0", "size": 1}}))


@pytest.mark.parametrize("damage, message", [
    (_missing_file, r"incomplete: the file 'policies/default_policy/weights.safetensors'.* is missing"),
    (_truncated, r"'policies/default_policy/weights.safetensors'.* truncated or corrupted: \d+ bytes, .* records \d+"),
    (_bit_flip, r"'policies/default_policy/weights.safetensors'.* corrupted: its SHA-256 is"),
    (_newer_version, r"format version 99 \(written by rlfleet 9.0.0\); this rlfleet .* reads format versions up to 1"),
    (_no_manifest, r"not an rlfleet checkpoint: it has no manifest.json"),
    (_not_ours, r"not an rlfleet checkpoint manifest \(format 'something-else'"),
    (_traversal, r"'../escape.json', which is not a plain relative path"),
], ids=["missing", "truncated", "bitflip", "newer", "no-manifest", "foreign", "traversal"])
def test_bad_checkpoints_name_the_problem(damage, message, saved, ppo, tmp_path):
    path = _copy(saved["PPO"], tmp_path)
    damage(path)
    before = ppo.get_weights()
    with pytest.raises(CheckpointError, match=message):
        ppo.restore(path)
    with pytest.raises(CheckpointError, match=message):
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "never"))
    _assert_state_equal(before, ppo.get_weights())  # nothing was applied


def test_missing_folder(ppo, tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint folder at"):
        ppo.restore(str(tmp_path / "nope"))


def test_checkpoint_of_another_algorithm(saved, ppo, tmp_path):
    with pytest.raises(CheckpointError, match=r"written by a PG trainer and cannot be restored into a PPO trainer"):
        ppo.restore(saved["PG"])
    with pytest.raises(CheckpointError, match=r"written by a PG trainer; PPOTrainer.from_checkpoint cannot load it"):
        PPOTrainer.from_checkpoint(saved["PG"], logdir=str(tmp_path / "x"))


def test_shape_mismatch_names_the_tensor_and_both_shapes(saved, tmp_path):
    other = make("PPO", tmp_path, "wide", model={"fcnet_hiddens": [32, 16]})
    with pytest.raises(CheckpointError, match=r"tensor 'trunk.0.weight' has shape \(16, 4\) in the checkpoint, "
                                              r"but the model expects \(32, 4\)"):
        other.restore(saved["PPO"])
    other.stop()


# --- planted pickle payloads ---------------------------------------------------------------------
class _Payload:
    """Unpickling this creates the file `marker` (as a real exploit would run any code)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(path, marker):
    pkl = pickle.dumps(_Payload(marker))
    open(os.path.join(path, "evil.pkl"), "wb").write(pkl)
    np.save(os.path.join(path, "evil.npy"), np.array([_Payload(marker)], dtype=object), allow_pickle=True)
    open(os.path.join(path, "policies", PID, "evil.pkl"), "wb").write(pkl)
    return pkl


def _point_at(path, target):
    """Tampers state.json so the weights come from `target`, and re-signs everything."""
    index_path = os.path.join(path, "state.json")
    index = json.load(open(index_path))
    index["worker"]["policies"][PID]["weights"]["trunk.0.weight"] = {"__array__": {"file": target, "key": "x"}}
    json.dump(index, open(index_path, "w"))

    def sign(m):
        m["files"][target] = _record(path, target)
        m["files"]["state.json"] = _record(path, "state.json")
    _rewrite_manifest(path, sign)


@pytest.mark.parametrize("attack", ["planted-only", "manifest-lists-pkl", "manifest-lists-npy",
                                    "pickle-as-safetensors", "pickle-as-json"])
def test_planted_pickle_payloads_never_run(attack, saved, ppo, tmp_path):
    marker = tmp_path / "PWNED"
    # The payload is live: unpickling it elsewhere does create its marker.
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Payload(probe))).close()
    assert probe.exists()

    path = _copy(saved["PPO"], tmp_path)
    pkl = _plant(path, marker)
    if attack == "manifest-lists-pkl":
        _point_at(path, "evil.pkl")
    elif attack == "manifest-lists-npy":
        _point_at(path, "evil.npy")
    elif attack == "pickle-as-safetensors":
        open(_weights_file(path), "wb").write(pkl)
        _rewrite_manifest(path, lambda m: m["files"].update(
            {"policies/default_policy/weights.safetensors": _record(path, "policies/default_policy/weights.safetensors")}))
    elif attack == "pickle-as-json":
        open(os.path.join(path, "state.json"), "wb").write(pkl)
        _rewrite_manifest(path, lambda m: m["files"].update({"state.json": _record(path, "state.json")}))

    if attack == "planted-only":  # files nobody lists are never read: the checkpoint loads
        ppo.restore(path)
        Trainer.from_checkpoint(path, logdir=str(tmp_path / "fc")).stop()
    else:
        with pytest.raises(CheckpointError) as info:
            ppo.restore(path)
        assert re.search(r"never hold|not a valid safetensors|not valid JSON", str(info.value)), str(info.value)
        with pytest.raises(CheckpointError):
            Trainer.from_checkpoint(path, logdir=str(tmp_path / "fc"))
        with pytest.raises(CheckpointError):
            cli_main_quiet(["evaluate", path, "--episodes", "1"])
    assert not marker.exists()


def cli_main_quiet(argv):
    code = cli.main(argv)
    if code == cli.EXIT_USAGE:
        raise CheckpointError("usage error")
    return code


# --- interrupted saves ---------------------------------------------------------------------------
_SAVE_LOOP = textwrap.dedent("""
    # A zygote: builds the trainer once, then per line on stdin forks a child that saves in
    # a loop until the test SIGKILLs it (one interpreter start for all rounds).
    import os, sys, torch
    torch.set_num_threads(1)
    from rlfleet.algorithms.ppo import PPOTrainer
    t = PPOTrainer(config={"seed": 1, "num_envs_per_worker": 1}, env="CartPole-v1", logdir=sys.argv[2])
    print("ready", flush=True)
    for _ in sys.stdin:
        pid = os.fork()
        if pid == 0:
            i = 0
            while True:
                i += 1
                t.iteration = i % 3  # new folders and replacements of existing ones
                t.save(sys.argv[1])
        print(pid, flush=True)
        os.waitpid(pid, 0)
        print("reaped", flush=True)
""")


def test_killed_saves_never_leave_a_broken_checkpoint(tmp_path):
    parent = str(tmp_path / "ckpts")
    os.makedirs(parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO, "src"), REPO]))
    rng = random.Random(0)
    zygote = subprocess.Popen([sys.executable, "-c", _SAVE_LOOP, parent, str(tmp_path / "log")], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert zygote.stdout.readline().strip() == b"ready", zygote.stderr.read().decode()[-2000:]
        for _ in range(6):
            zygote.stdin.write(b"go\n")
            zygote.stdin.flush()
            child = int(zygote.stdout.readline())
            deadline = time.monotonic() + 60
            while not list_checkpoints(parent) and time.monotonic() < deadline:
                time.sleep(0.02)  # a loaded machine: the first round needs one finished save to keep
            time.sleep(rng.uniform(0.05, 0.3))
            os.kill(child, signal.SIGKILL)
            assert zygote.stdout.readline().strip() == b"reaped"
            names = os.listdir(parent)
            listed = list_checkpoints(parent)
            assert listed, names  # earlier saves survive
            for name in names:
                full = os.path.join(parent, name)
                if re.fullmatch(r"checkpoint_\d+", name):
                    assert full in listed
                    read_checkpoint(full)  # every visible checkpoint loads in full
                else:  # only hidden temp folders of the killed save
                    assert name.startswith(".checkpoint_") and full not in listed, name
    finally:
        zygote.kill()
        zygote.communicate()
    # A later save cleans up after the dead writers; the survivors load into a trainer.
    t = PPOTrainer(config={"seed": 1, "num_envs_per_worker": 1}, env="CartPole-v1", logdir=str(tmp_path / "t"))
    t.save(parent)
    assert all(not n.startswith(".") for n in os.listdir(parent))
    for path in list_checkpoints(parent):
        t.restore(path)
    t.stop()


# --- pruning and the CLI -------------------------------------------------------------------------
def test_keep_checkpoints_num_prunes_the_oldest(tmp_path):
    t = make("PG", tmp_path, "t")
    for i in range(1, 5):
        t.iteration = i
        t.save(keep_checkpoints_num=2)
    assert [os.path.basename(p) for p in list_checkpoints(t.logdir)] == ["checkpoint_3", "checkpoint_4"]
    t.stop()


def test_cli_train_checkpoints_then_evaluate(tmp_path, capsys):
    config = json.dumps(dict(ALGOS["PPO"][1], model={"fcnet_hiddens": [8]}))
    code = cli.main(["train", "--run", "PPO", "--env", "CartPole-v1", "--config", config,
                     "--stop", '{"training_iteration": 3}', "--local-dir", str(tmp_path),
                     "--checkpoint-freq", "1", "--checkpoint-at-end", "--keep-checkpoints-num", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    logdir = re.search(r"Results: (.*)", out).group(1).strip()
    ckpts = list_checkpoints(logdir)
    assert [os.path.basename(p) for p in ckpts] == ["checkpoint_2", "checkpoint_3"]

    out_file = tmp_path / "returns.json"
    code = cli.main(["evaluate", ckpts[-1], "--episodes", "3", "--out", str(out_file)])
    out = capsys.readouterr().out
    assert code == 0, out
    returns = [float(x) for x in re.findall(r"Episode \d+: return ([\d.]+)", out)]
    report = json.loads(out_file.read_text())
    assert len(returns) == 3 and [e["return"] for e in report["episodes"]] == returns
    assert report["mean_return"] == pytest.approx(np.mean(returns))
    assert re.search(r"Mean return over 3 episodes: ", out)
    # Greedy and seeded: a second run prints the same returns.
    cli.main(["evaluate", ckpts[-1], "--episodes", "3"])
    assert [float(x) for x in re.findall(r"Episode \d+: return ([\d.]+)", capsys.readouterr().out)] == returns


def test_cli_evaluate_bad_checkpoint_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["evaluate", str(tmp_path / "missing"), "--episodes", "1"]) == cli.EXIT_USAGE
    assert "no checkpoint folder at" in capsys.readouterr().err


def test_a_failing_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """Disk full (an OSError) midway through a save: a clear error naming the folder, the
    earlier checkpoint intact and loadable, no partial files left; the trainer goes on."""
    import errno

    import rlfleet.checkpoint.folder as ck
    from rlfleet.checkpoint import CheckpointSaveError

    t = make("PG", tmp_path, "t")
    t.train()
    first = t.save()
    first_manifest = open(os.path.join(first, "manifest.json"), "rb").read()
    weights_1 = t.get_weights()
    t.train()
    real_write = ck.write_safetensors_synced
    calls = []

    def full_after_one_file(path, arrays):
        calls.append(path)
        if len(calls) == 1:
            return real_write(path, arrays)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:  # part of the file reaches the disk, then it is full
            f.write(b"\0" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    def check_untouched():
        names = os.listdir(t.logdir)  # no partial or hidden folder left
        assert [n for n in names if n.startswith((".", "checkpoint"))] == ["checkpoint_1"], names
        assert open(os.path.join(first, "manifest.json"), "rb").read() == first_manifest
        read_checkpoint(first)

    monkeypatch.setattr(ck, "write_safetensors_synced", full_after_one_file)
    with pytest.raises(CheckpointSaveError) as info:
        t.save()
    target = os.path.join(t.logdir, "checkpoint_2")
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert re.search(rf"saving the checkpoint '{re.escape(target)}' failed while writing policies/default_policy/"
                     r".*\.safetensors: \[Errno 28\] No space left on device\. Nothing was saved", str(info.value))
    assert isinstance(info.value.__cause__, OSError)
    check_untouched()

    # Replacing a checkpoint of the same iteration: the manifest write fails, the old one stays.
    monkeypatch.undo()
    real_synced = ck.write_synced

    def manifest_fails(path, data):
        if path.endswith("manifest.json"):
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        return real_synced(path, data)

    monkeypatch.setattr(ck, "write_synced", manifest_fails)
    t.iteration = 1
    with pytest.raises(CheckpointSaveError, match=r"checkpoint_1' failed while writing manifest.json: .*quota"):
        t.save()
    check_untouched()

    # The final rename fails: the previous folder (renamed aside first) is put back.
    monkeypatch.undo()
    real_rename = os.rename

    def rename_fails(src, dst):
        if ".tmp-" in os.path.basename(src):
            raise OSError(errno.EIO, "Input/output error")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename_fails)
    with pytest.raises(CheckpointSaveError, match="failed while moving the finished folder into place"):
        t.save()
    monkeypatch.undo()
    check_untouched()

    t.restore(first)
    _assert_state_equal(t.get_weights(), weights_1)
    t.iteration = 2
    assert t.train()["training_iteration"] == 3
    assert os.path.basename(t.save()) == "checkpoint_3"
    t.stop()


def test_off_policy_resume_keeps_the_update_owed_by_training_intensity(tmp_path):
    from rlfleet.algorithms.dqn import DQNTrainer

    # 100 sampled steps x 48 / 32 = 150 replayed rows per iteration: 4.6875 updates, so a
    # fraction of an update is owed at every save; a resume must carry it.
    config = {"seed": 0, "num_workers": 0, "train_batch_size": 32, "learning_starts": 32, "training_intensity": 1.5,
              "timesteps_per_iteration": 100, "min_iter_time_s": 0, "rollout_fragment_length": 4,
              "store_buffer_in_checkpoints": True, "model": {"fcnet_hiddens": [16]}}
    a = DQNTrainer(env="CartPole-v1", config=config, logdir=str(tmp_path / "a"))
    a.train()
    assert 0 < a.get_state()["update_credit"] < 1
    path = a.save()
    b = DQNTrainer(env="CartPole-v1", config=dict(config, seed=5), logdir=str(tmp_path / "b"))
    b.restore(path)
    a.restore(path)
    for _ in range(2):
        ra, rb = a.train(), b.train()
    assert ra["num_env_steps_trained"] == rb["num_env_steps_trained"]
    wa, wb = a.get_weights()["default_policy"], b.get_weights()["default_policy"]
    assert all(wa[k].tobytes() == wb[k].tobytes() for k in wa)
    a.stop()
    b.stop()
