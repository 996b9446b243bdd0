"""Policy clients in their own processes playing CartPole against training servers, over real
loopback sockets (examples/serving/cartpole_client.py and cartpole_server.py).

The runs to a mean return of 150 in each inference mode are the examples' own (README,
"External envs and policy serving"); here one client per mode lifts the return well above a
random policy's (~22) within a small budget, so that CI stays quick on a busy machine.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from rlfleet.serving.http_client import HTTPClient
from rlfleet.serving.policy_client import PolicyClient
from tests.helpers import train_until
from tests.serving_helpers import ROOT, SERVER_SCRIPT, cartpole_server, free_port, start_client, stop


def test_ppo_learns_from_client_processes_in_both_modes():
    """One simulator process per inference mode feeds the same server; the mean return rises
    well above a random policy's (~22), and both kinds of batches were trained on."""
    port = free_port()
    trainer = cartpole_server(port=port)
    clients = [start_client(port, mode, "--update-interval", "0.5", "--seed", str(seed))
               for seed, mode in enumerate(("remote", "local"))]
    try:
        # Generous: how stale the local client's weights get depends on the machine's load.
        result, history = train_until(trainer, reward=60, max_timesteps=30000)
        taken = dict(trainer.workers.local_worker().sampler.reader.batches_taken)
    finally:
        trainer.stop()
        errors = [stop(c)[1][-2000:] for c in clients]
    assert result["episode_reward_mean"] >= 60, (history, errors)
    assert taken["remote"] > 0 and taken["local"] > 0, taken


@pytest.mark.slow
def test_dqn_trains_on_actions_a_client_only_logged():
    """Every episode is played by the simulator's own random controller (log_action); DQN
    trains on them (that DQN learns through log_action: tests/env/test_external_env.py, in-process)."""
    port = free_port()
    trainer = cartpole_server("DQN", port=port)
    rng = np.random.default_rng(0)

    def simulate():
        client = PolicyClient(f"http://127.0.0.1:{port}")
        env = gym.make("CartPole-v1")
        while True:
            eid, (obs, _) = client.start_episode(), env.reset(seed=int(rng.integers(1000)))
            done = False
            while not done:
                action = int(rng.integers(2))
                client.log_action(eid, obs.tolist(), action)
                obs, reward, terminated, truncated, _ = env.step(action)
                client.log_returns(eid, reward)
                done = terminated or truncated
            client.end_episode(eid, obs.tolist(), truncated=truncated and not terminated)

    threading.Thread(target=simulate, daemon=True).start()
    try:
        result = trainer.train()
        while result["timesteps_total"] < 600:  # learning starts at 500
            result = trainer.train()
        assert result["info"]["learner"]["default_policy"]  # learned on the logged data
        assert 15 < result["episode_reward_mean"] < 40  # the random controller's episodes
    finally:
        trainer.stop()


def test_two_clients_against_two_remote_workers(ray_session):
    """num_workers: 2 -> servers on base+1 and base+2; one client per server, one per mode."""
    base = free_port(span=3)
    trainer = cartpole_server(port=base, num_workers=2, rollout_fragment_length=128, train_batch_size=256)
    clients = [start_client(base + 1, "remote"), start_client(base + 2, "local")]
    try:
        result = trainer.train()  # PPO waits for a batch from every worker: both servers were fed
        assert result["num_healthy_workers"] == 2 and result["timesteps_total"] >= 256
        assert all(c.poll() is None for c in clients)
    finally:
        trainer.stop()
        errors = [stop(c)[1] for c in clients]
    assert result["episodes_total"] > 0, errors


def _lines(proc: subprocess.Popen) -> "queue.Queue[dict]":
    lines: "queue.Queue[dict]" = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            if line.startswith(b"{"):
                lines.put(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    return lines


def _server(port: int, ckpt_dir: str, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen([sys.executable, str(SERVER_SCRIPT), "--port", str(port), "--checkpoint-dir", ckpt_dir,
                             "--stop-reward", "1e9", "--stop-timesteps", "1000000000", *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_server_killed_and_restarted_from_its_checkpoint_while_the_client_retries(tmp_path):
    """A "remote" client keeps playing through a SIGKILL and a restart from the checkpoint, and
    every episode whose `end_episode` the killed server had answered reaches training: those it
    had not trained on yet are sent again to the restarted server (policy_client.py)."""
    port = free_port()
    first = _server(port, str(tmp_path), "--print-trained-episodes")
    first_lines = _lines(first)
    acked: list = []  # episode ids whose end_episode the first server answered
    kill_now, killed, stopping = threading.Event(), threading.Event(), threading.Event()
    errors: list = []
    client = PolicyClient(f"http://127.0.0.1:{port}", retry_deadline_s=120)

    def simulate() -> None:
        env = gym.make("CartPole-v1")
        try:
            for seed in range(10_000):
                eid, (obs, _) = client.start_episode(), env.reset(seed=seed)
                done = steps = 0
                while not done and not stopping.is_set():
                    obs, _, terminated, truncated, _ = env.step(client.get_action(eid, obs.tolist()))
                    client.log_returns(eid, 1.0)
                    done, steps = terminated or truncated, steps + 1
                    if steps == 2 and kill_now.is_set() and not killed.is_set():
                        first.send_signal(signal.SIGKILL)  # mid-episode, just after an acknowledged one
                        first.wait(30)
                        killed.set()
                if stopping.is_set():
                    return
                client.end_episode(eid, obs.tolist(), truncated=truncated and not terminated)
                if not killed.is_set():
                    acked.append(eid)
        except BaseException as exc:  # reported by the assertions below
            errors.append(exc)

    thread = threading.Thread(target=simulate, daemon=True)
    thread.start()
    second = None
    try:
        before, trained_first = _read_until(first_lines, lambda lines, ids: bool(lines), 120)
        kill_now.set()
        assert killed.wait(120), errors
        more_lines, more_ids = _read_until(first_lines, lambda lines, ids: False, 0.5)  # what it printed last
        before, trained_first = before + more_lines, trained_first | more_ids
        time.sleep(1.0)  # the client now retries against a closed port
        assert thread.is_alive(), errors
        second = _server(port, str(tmp_path), "--restore", "--print-trained-episodes")
        after, trained_second = _read_until(
            _lines(second), lambda lines, ids: bool(lines) and set(acked) <= trained_first | ids, 180)
        # Training resumes from the last checkpoint: its iteration and step counts go on.
        assert after[0]["training_iteration"] == before[-1]["training_iteration"] + 1
        assert after[0]["timesteps_total"] > before[-1]["timesteps_total"]
        assert thread.is_alive() and not errors, errors  # it kept playing through the restart
        # The killed server had answered end_episode for episodes it never trained on (the one
        # just before the kill at least); every acknowledged episode reached training anyway.
        assert set(acked) - trained_first, (acked, trained_first)
        assert set(acked) <= trained_first | trained_second, sorted(set(acked) - trained_first - trained_second)
        assert client.episodes_resent >= len(set(acked) - trained_first)
    finally:
        stopping.set()
        for proc in (first, second):
            if proc is not None:
                stop(proc)


def _read_until(lines: "queue.Queue[dict]", done, timeout_s: float):
    """The iteration lines and trained episode ids a server printed, until `done(lines, ids)`
    or `timeout_s` (then what came so far)."""
    iterations: list = []
    trained: set = set()
    deadline = time.monotonic() + timeout_s
    while not done(iterations, trained) and time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, min(1.0, deadline - time.monotonic())))
        except queue.Empty:
            continue
        if "trained_episode_ids" in line:
            trained.update(line["trained_episode_ids"])
        else:
            iterations.append(line)
    return iterations, trained


def test_a_local_client_refuses_classes_from_untrusted_modules():
    port = free_port()
    trainer = cartpole_server(port=port)
    server = trainer.workers.local_worker().sampler.reader
    try:
        original = server._worker_spec
        server.server.routes[("GET", "/v1/worker_spec")] = lambda body: dict(
            original(body), policy_class="os:system")
        with pytest.raises(ValueError, match="'os:system'"):
            PolicyClient(server.url, inference_mode="local")
    finally:
        server.close()
        trainer.stop()



def test_a_local_client_gives_up_after_retry_deadline_s_naming_the_server(tmp_path):
    """The server process is killed under a "local" client: within `retry_deadline_s` (plus
    a backoff) the simulator's next call raises, naming the server's address and the last
    failure, instead of waiting forever for an action."""
    port = free_port()
    server = _server(port, str(tmp_path))
    outcome: list = []
    played = threading.Event()

    def simulate(client: PolicyClient) -> None:
        env = gym.make("CartPole-v1")
        try:
            for seed in range(100_000):
                eid, (obs, _) = client.start_episode(), env.reset(seed=seed)
                done = False
                while not done:
                    obs, reward, terminated, truncated, _ = env.step(client.get_action(eid, obs.tolist()))
                    client.log_returns(eid, float(reward))
                    done = terminated or truncated
                client.end_episode(eid, obs.tolist(), truncated=truncated and not terminated)
                played.set()
        except Exception as exc:  # what the test expects
            outcome.append(exc)

    try:
        HTTPClient(f"http://127.0.0.1:{port}", retry_deadline_s=120).call("/v1/health")  # it is up
        client = PolicyClient(f"http://127.0.0.1:{port}", inference_mode="local", update_interval=0.2,
                              retry_deadline_s=1.0)
        thread = threading.Thread(target=simulate, args=(client,), daemon=True)
        thread.start()
        assert played.wait(60), outcome
        server.send_signal(signal.SIGKILL)
        server.wait(30)
        killed = time.monotonic()
        thread.join(60)
        assert not thread.is_alive(), "the client kept waiting after retry_deadline_s"
    finally:
        stop(server)
    (error,) = outcome
    assert isinstance(error, ConnectionError), repr(error)
    message = str(error)
    assert f"http://127.0.0.1:{port}" in message and "retry_deadline_s=1.0" in message, message
    assert "Connection" in message, message  # the last failure: refused, or reset by the kill
    assert time.monotonic() - killed < 20
