"""Chaos benchmark: training that survives killed workers and a killed driver. Not part of CI.

For each algorithm (IMPALA, APPO, APEX, PPO on CartPole-v1, small nets, `--workers` remote
Ray workers, `recreate_failed_workers: True`):

1. `rlfleet train` runs in a subprocess (its own run folder, a time-based checkpoint every
   `--checkpoint-every-s`, stop at `time_total_s` = `--minutes`), and this script SIGKILLs a
   random rollout worker process of it every `--kill-every-s` seconds;
2. once the run has a checkpoint and half its time has gone, the driver itself is SIGKILLed,
   and `rlfleet train --resume RUN_DIR` continues the run (the killing goes on);
3. an unkilled run of the same length gives the return to compare with.

How workers are found and killed: from outside, as the process tree of the driver. The
driver that starts Ray (`ray.init` with no cluster to join) is the parent of `gcs_server` and
the `raylet`, and the raylet of every Ray worker process; an actor's process names itself
`ray::RolloutWorker` (`ray::RolloutWorker.apply` while it runs a call). So the rollout
workers of *this* run are the driver's descendants whose command line starts with
`ray::RolloutWorker`. This is robust where the alternatives are not: the machine is shared and
other Ray clusters run on it (matching process names machine-wide would kill their workers);
killing from inside the driver (a callback calling `os.kill` on the pids its WorkerSet
reports) only fires between iterations and needs code in the trainer under test, while an
outside SIGKILL lands at any moment, mid-sample or mid-reply, as a preemption or the OOM
killer would. The same process tree, snapshotted while the driver lives, is what the
"left behind" check looks for after each driver exit: any raylet, gcs_server or `ray::`
worker of the run still alive is counted (must be 0).

Samples are counted exactly (rlfleet/rollout/sample_counters.py): with
`RLFLEET_SAMPLE_LEDGER_DIR` set, every worker process appends its running count of sampled
env steps to a file (the killed ones' last lines are their final counts), and the driver
reports its books as `info/sample_ledger` each iteration, carried through the checkpoint into
the resumed run. Lost = sampled (all worker processes of both driver lives) - trained -
still queued at the end, where "trained" means learned on at least once (APEX: stored in a
replay shard; rows evicted without being replayed count as stored). It includes the steps
the killed driver had sampled or trained on after its last checkpoint (the resume redoes
them) and those in flight when the run ended.

    PYTHONPATH=src .venv/bin/python benchmarks/chaos.py                       # all four, 2 min each
    PYTHONPATH=src .venv/bin/python benchmarks/chaos.py --algos IMPALA --minutes 1 --repeats 3

Prints one JSON line per run and a Markdown table of medians (min-max) per algorithm.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

import psutil

from rlfleet.rollout.sample_counters import LEDGER_DIR_ENV, read_persisted

SMALL = {"model": {"fcnet_hiddens": [32, 32]}, "num_envs_per_worker": 1, "num_cpus_per_worker": 0.25,
         "recreate_failed_workers": True, "seed": 0}
CONFIGS: Dict[str, Dict[str, Any]] = {
    "IMPALA": dict(SMALL, rollout_fragment_length=50, train_batch_size=500, min_iter_time_s=2, lr=0.001),
    "APPO": dict(SMALL, rollout_fragment_length=50, train_batch_size=500, min_iter_time_s=2, lr=0.001),
    "APEX": dict(SMALL, num_replay_buffer_shards=1, learning_starts=1000, buffer_size=20000, train_batch_size=64,
                 target_network_update_freq=2000, timesteps_per_iteration=1000, min_iter_time_s=2,
                 hiddens=[32], rollout_fragment_length=50, max_weight_sync_delay=200),
    "PPO": dict(SMALL, rollout_fragment_length=100, train_batch_size=1000, sgd_minibatch_size=128, num_sgd_iter=5,
                lr=0.001),
}
RAY_NAMES = ("raylet", "gcs_server", "ray::")


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()) or proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def ray_tree(driver_pid: int) -> Dict[int, str]:
    """`{pid: command line}` of the driver's descendants that are Ray's (raylet, gcs_server,
    Ray worker processes)."""
    try:
        children = psutil.Process(driver_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    out = {}
    for child in children:
        line = _cmdline(child)
        if any(name in line for name in RAY_NAMES):
            out[child.pid] = line
    return out


def _leftovers(pids: Dict[int, str], settle_s: float) -> tuple:
    """`(pids still alive after settle_s, seconds until the last one was gone)`: Ray's
    agents notice their raylet is gone within seconds, not at once."""
    start = time.monotonic()
    while alive(pids) and time.monotonic() - start < settle_s:
        time.sleep(0.25)
    return alive(pids), round(time.monotonic() - start, 2)


def alive(pids: Any) -> List[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return sorted(out)


class WorkerKiller(threading.Thread):
    """SIGKILLs a random `ray::RolloutWorker` process of `driver_pid` every `every_s` seconds
    while `armed` (from the driver's first result on: a trainer whose workers die while it is
    being built fails, as in RLlib 1.x); remembers every Ray process of the run it saw."""

    def __init__(self, every_s: float, rng: random.Random):
        super().__init__(daemon=True)
        self.every_s, self.rng = every_s, rng
        self.driver_pid: Optional[int] = None
        self.armed = False
        self.kills = 0
        self.seen: Dict[int, str] = {}  # pid -> command line, of every Ray process of the run seen
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.every_s):
            pid = self.driver_pid
            if pid is None:
                continue
            tree = ray_tree(pid)
            self.seen.update(tree)
            if not self.armed:
                continue
            workers = [p for p, line in tree.items() if line.startswith("ray::RolloutWorker")]
            if workers:
                try:
                    os.kill(self.rng.choice(workers), signal.SIGKILL)
                    self.kills += 1
                except ProcessLookupError:
                    pass

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _train_command(algo: str, config: Dict[str, Any], workers: int, minutes: float, local_dir: str,
                   checkpoint_every_s: float) -> List[str]:
    return [sys.executable, "-m", "rlfleet.cli", "train", "--run", algo, "--env", "CartPole-v1", "-q",
            "--config", json.dumps(dict(config, num_workers=workers)),
            "--stop", json.dumps({"time_total_s": minutes * 60}), "--local-dir", local_dir,
            "--checkpoint-every-s", str(checkpoint_every_s), "--checkpoint-at-end"]


def _start(cmd: List[str], ledger_dir: Optional[str], log: str) -> subprocess.Popen:
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    env.pop(LEDGER_DIR_ENV, None)
    if ledger_dir:
        env[LEDGER_DIR_ENV] = ledger_dir
    return subprocess.Popen(cmd, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def _rows(run_dir: str) -> List[Dict[str, Any]]:
    with open(os.path.join(run_dir, "result.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _logged_by(run_dir: str, pid: int) -> bool:
    """Whether the driver `pid` has logged a result in `run_dir` (it is training)."""
    try:
        return any(r.get("pid") == pid for r in _rows(run_dir))
    except (OSError, ValueError):  # not written yet, or a line being written
        return False


def _run_dir(local_dir: str) -> str:
    runs = [os.path.join(local_dir, d) for d in os.listdir(local_dir) if os.path.isdir(os.path.join(local_dir, d))]
    if len(runs) != 1:
        raise RuntimeError(f"expected one run folder in {local_dir}, found {runs}")
    return runs[0]


def _checkpoints(run_dir: str) -> List[int]:
    if not os.path.isdir(run_dir):
        return []
    return sorted(int(d.split("_")[1]) for d in os.listdir(run_dir)
                  if d.startswith("checkpoint_") and os.path.exists(os.path.join(run_dir, d, "manifest.json")))


def _resumable_mid_run(run_dir: str, stop_s: float) -> bool:
    """Whether `run_dir` has a checkpoint to resume from and time left after it (a driver
    killed once its time is up would only be killed at its last checkpoint)."""
    checkpoints = _checkpoints(run_dir)
    if not checkpoints:
        return False
    try:
        rows = {r["training_iteration"]: r for r in _rows(run_dir)}
    except (OSError, ValueError):
        return False
    newest = rows.get(checkpoints[-1])
    return newest is not None and newest["time_total_s"] < 0.8 * stop_s


def _final_return(rows: List[Dict[str, Any]]) -> float:
    # The mean over the last 3 iterations' reported means (one iteration's is noisy).
    returns = [r["episode_reward_mean"] for r in rows[-3:] if r.get("episode_reward_mean") is not None]
    return float(statistics.mean(returns)) if returns else float("nan")


def _wait(proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RuntimeError(f"{what} did not finish within {timeout_s:.0f} s")


def chaos_run(algo: str, args: argparse.Namespace, work: str, rng: random.Random) -> Dict[str, Any]:
    """One killed-and-resumed run of `algo`; its losses and leftovers."""
    os.makedirs(work, exist_ok=True)
    local_dir, log = os.path.join(work, "runs"), os.path.join(work, "train.log")
    life1, life2 = os.path.join(work, "ledger_1"), os.path.join(work, "ledger_2")
    limit_s = args.minutes * 60 * 4 + 300
    killer = WorkerKiller(args.kill_every_s, rng)
    killer.start()
    drivers: List[subprocess.Popen] = []
    try:
        return _chaos_lives(algo, args, rng, killer, drivers, local_dir, log, life1, life2, limit_s)
    finally:  # a failed run leaves nothing running
        killer.stop()
        for proc in drivers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _chaos_lives(algo: str, args: argparse.Namespace, rng: random.Random, killer: WorkerKiller,
                 drivers: List[subprocess.Popen], local_dir: str, log: str, life1: str, life2: str,
                 limit_s: float) -> Dict[str, Any]:
    driver = _start(_train_command(algo, CONFIGS[algo], args.workers, args.minutes, local_dir,
                                   args.checkpoint_every_s), life1, log)
    drivers.append(driver)
    killer.driver_pid = driver.pid
    started, kill_after_s = time.monotonic(), args.minutes * 60 * rng.uniform(0.4, 0.6)
    run_dir = None
    while driver.poll() is None and time.monotonic() - started < limit_s:  # === the driver kill ===
        time.sleep(0.5)
        killer.seen.update(ray_tree(driver.pid))
        if run_dir is None and os.path.isdir(local_dir) and os.listdir(local_dir):
            run_dir = _run_dir(local_dir)
        killer.armed = bool(run_dir) and _logged_by(run_dir, driver.pid)
        if run_dir and _resumable_mid_run(run_dir, args.minutes * 60) and time.monotonic() - started >= kill_after_s:
            killer.seen.update(ray_tree(driver.pid))
            os.kill(driver.pid, signal.SIGKILL)
            driver.wait()
            break
    if driver.returncode != -signal.SIGKILL:
        raise RuntimeError(f"{algo}: the run ended (code {driver.returncode}) before the driver kill; see {log}")
    rows_1 = _rows(run_dir)
    last_before_kill = max(r["training_iteration"] for r in rows_1)
    checkpoint = max(_checkpoints(run_dir))
    killer.armed = False
    left_after_kill, linger_after_kill = _leftovers(killer.seen, args.settle_s)
    driver = _start([sys.executable, "-m", "rlfleet.cli", "train", "-q", "--resume", run_dir], life2, log)
    drivers.append(driver)
    killer.driver_pid = driver.pid
    while driver.poll() is None:
        killer.seen.update(ray_tree(driver.pid))
        time.sleep(0.5)
        killer.armed = _logged_by(run_dir, driver.pid)
        if time.monotonic() - started > limit_s:
            driver.kill()
            raise RuntimeError(f"{algo}: the resumed run did not finish; see {log}")
    killer.armed = False
    if driver.returncode != 0:
        raise RuntimeError(f"{algo}: the resumed run failed (code {driver.returncode}); see {log}")
    left_at_end, linger_at_end = _leftovers(killer.seen, args.settle_s)
    rows = _rows(run_dir)
    ledger = rows[-1]["info"]["sample_ledger"]
    # The remote workers' counts (worker index 0 is each driver's own worker, which does not sample).
    reports_1 = [r for r in read_persisted(life1).values() if r["worker_index"] > 0]
    reports_2 = [r for r in read_persisted(life2).values() if r["worker_index"] > 0]
    sampled_1 = sum(r["handed_env_steps"] for r in reports_1)
    sampled = sampled_1 + sum(r["handed_env_steps"] for r in reports_2)
    lost = sampled - ledger["trained"] - ledger["queued"]
    # What the checkpoint resumed from had trained: the resumed driver's first books say so
    # (later rows may have restored again: the CLI continues from each checkpoint it saves).
    life_2 = [r for r in rows if r["pid"] != rows_1[0]["pid"]]
    if not life_2:
        raise RuntimeError(f"{algo}: the resumed run trained no iteration; see {log}")
    trained_at_resume = life_2[0]["info"]["sample_ledger"]["trained_at_restore"]
    iterations = [r["training_iteration"] for r in rows]
    return {
        "algo": algo, "kind": "chaos", "run_dir": run_dir, "final_return": _final_return(rows),
        "iterations": max(iterations), "iterations_logged_once": len(iterations) == len(set(iterations)),
        "iterations_lost": last_before_kill - checkpoint, "resumed_from_iteration": checkpoint,
        "samples_sampled": sampled, "samples_trained": ledger["trained"], "samples_queued_at_end": ledger["queued"],
        "samples_dropped": ledger["dropped_by_reason"], "samples_lost": lost, "samples_lost_pct": 100.0 * lost / sampled,
        "samples_lost_by_killed_driver": sampled_1 - trained_at_resume,
        "ledger_unaccounted": ledger["unaccounted"], "worker_kills": killer.kills,
        "worker_restarts": replacements_started(log),
        "ray_processes_left_after_driver_kill": len(left_after_kill), "ray_processes_left_at_end": len(left_at_end),
        "ray_linger_s_after_driver_kill": linger_after_kill, "ray_linger_s_at_end": linger_at_end,
        "left_behind": [f"{p} {killer.seen[p].split()[0]}" for p in sorted(set(left_after_kill) | set(left_at_end))],
    }


def replacements_started(log: str) -> int:
    """Replacement workers the drivers started (their "Recreating remote rollout worker(s)
    [i, ...]" warnings in `log`)."""
    count = 0
    with open(log, errors="replace") as f:
        for line in f:
            if "Recreating remote rollout worker(s) [" in line:
                count += len(line.split("[", 1)[1].split("]")[0].split(","))
    return count


def calm_run(algo: str, args: argparse.Namespace, work: str) -> Dict[str, Any]:
    """The same run, nothing killed."""
    os.makedirs(work, exist_ok=True)
    local_dir = os.path.join(work, "runs")
    driver = _start(_train_command(algo, CONFIGS[algo], args.workers, args.minutes, local_dir,
                                   args.checkpoint_every_s), None, os.path.join(work, "train.log"))
    _wait(driver, args.minutes * 60 * 3 + 300, f"{algo}'s unkilled run")
    if driver.returncode != 0:
        raise RuntimeError(f"{algo}: the unkilled run failed (code {driver.returncode}); see {work}/train.log")
    rows = _rows(_run_dir(local_dir))
    return {"algo": algo, "kind": "calm", "final_return": _final_return(rows), "iterations": len(rows),
            "samples_trained": rows[-1]["info"]["sample_ledger"]["trained"]}


def _median(values: List[float], digits: int = 0) -> str:
    med = statistics.median(values)
    fmt = f"{{:.{digits}f}}"
    return fmt.format(med) if len(values) == 1 else f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def table(results: List[Dict[str, Any]]) -> str:
    head = ("| algorithm | runs survived | worker kills | worker restarts | iterations lost | samples sampled | samples lost "
            "| lost % | of which in the killed driver's life | final return (chaos) | final return (unkilled) "
            "| Ray processes left | Ray processes gone after (s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for algo in dict.fromkeys(r["algo"] for r in results):
        chaos = [r for r in results if r["algo"] == algo and r["kind"] == "chaos"]
        failed = [r for r in results if r["algo"] == algo and r["kind"] == "failed"]
        if not chaos:
            lines.append(f"| {algo} | 0 of {len(failed)} survived |" + " |" * 11)
            continue
        calm = [r for r in results if r["algo"] == algo and r["kind"] == "calm"]
        col = lambda key, d=0: _median([float(r[key]) for r in chaos], d)  # noqa: E731
        lines.append(f"| {algo} | {len(chaos)} of {len(chaos) + len(failed)} | {col('worker_kills')} | {col('worker_restarts')} "
                     f"| {col('iterations_lost')} | {col('samples_sampled')} | {col('samples_lost')} "
                     f"| {col('samples_lost_pct', 1)} | {col('samples_lost_by_killed_driver')} "
                     f"| {col('final_return', 1)} | {_median([r['final_return'] for r in calm], 1) if calm else '-'} "
                     f"| {max(r['ray_processes_left_after_driver_kill'] + r['ray_processes_left_at_end'] for r in chaos)} "
                     f"| {max(max(r['ray_linger_s_after_driver_kill'], r['ray_linger_s_at_end']) for r in chaos):.1f} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algos", default="IMPALA,APPO,APEX,PPO")
    parser.add_argument("--minutes", type=float, default=2.0, help="training time of each run (time_total_s)")
    parser.add_argument("--workers", type=int, default=2, help="remote rollout workers (2-4)")
    parser.add_argument("--kill-every-s", type=float, default=10.0,
                        help="seconds between two worker kills (longer than a replacement takes to start)")
    parser.add_argument("--checkpoint-every-s", type=float, default=None,
                        help="time-based checkpoints (default: a quarter of the run)")
    parser.add_argument("--repeats", type=int, default=1, help="killed runs per algorithm")
    parser.add_argument("--calm-repeats", type=int, default=1, help="unkilled runs per algorithm")
    parser.add_argument("--settle-s", type=float, default=30.0,
                        help="seconds a driver's Ray processes get to exit after it did; those alive then are left behind")
    parser.add_argument("--seed", type=int, default=0, help="seeds the choice of victims and the kill times")
    parser.add_argument("--out", default=None, help="folder for the runs (default: a temporary one)")
    args = parser.parse_args(argv)
    if not 1 <= args.workers <= 8:
        parser.error(f"--workers {args.workers}: give 1 to 8 (the benchmark is meant for 2-4)")
    if args.checkpoint_every_s is None:
        args.checkpoint_every_s = max(5.0, args.minutes * 60 / 4)
    out = args.out or tempfile.mkdtemp(prefix="rlfleet_chaos_")
    rng = random.Random(args.seed)
    results = []
    for algo in args.algos.split(","):
        if algo not in CONFIGS:
            parser.error(f"--algos: {algo!r} is not one of {', '.join(CONFIGS)}")
        for k in range(args.repeats):
            try:
                results.append(chaos_run(algo, args, os.path.join(out, algo, f"chaos_{k}"), rng))
            except RuntimeError as e:  # a run that did not survive is a result too
                results.append({"algo": algo, "kind": "failed", "error": str(e)})
            print(json.dumps(results[-1]), flush=True)
        for k in range(args.calm_repeats):
            results.append(calm_run(algo, args, os.path.join(out, algo, f"calm_{k}")))
            print(json.dumps(results[-1]), flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
