"""Shared pieces of the serving tests: free ports, a CartPole training server in this process,
raw HTTP requests, and simulator processes (examples/serving/cartpole_client.py)."""
from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym

from rlfleet.registry import get_trainer_class
from rlfleet.serving import policy_server_input

ROOT = Path(__file__).resolve().parents[1]
CLIENT_SCRIPT = ROOT / "examples" / "serving" / "cartpole_client.py"
SERVER_SCRIPT = ROOT / "examples" / "serving" / "cartpole_server.py"
CARTPOLE = gym.make("CartPole-v1")


def free_port(host: str = "127.0.0.1", span: int = 1) -> int:
    """A port p with p .. p+span-1 free on `host` right now."""
    while True:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port + span < 65535 and all(_free(host, port + i) for i in range(1, span)):
            return port


def _free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def cartpole_server(run: str = "PPO", *, port: int, num_workers: int = 0, address: str = "127.0.0.1",
                    **overrides: Any):
    """A trainer whose input is a policy server per sampling worker (port + worker index);
    its settings are the example server's (examples/serving/cartpole_server.py)."""
    sys.path.insert(0, str(SERVER_SCRIPT.parent))
    try:
        import cartpole_server as example
    finally:
        sys.path.pop(0)
    config = dict(example.CONFIGS[run], env=None, observation_space=CARTPOLE.observation_space,
                  action_space=CARTPOLE.action_space, input_evaluation=[], num_workers=num_workers, seed=0,
                  metrics_smoothing_episodes=20, min_iter_time_s=0)
    server_kwargs = {k: overrides.pop(k) for k in ("token", "tls_cert", "tls_key", "max_body_bytes")
                     if k in overrides}
    config["input"] = policy_server_input(address, port, **server_kwargs)
    config.update(overrides)
    return get_trainer_class(run)(config=config)


def local_server(trainer):
    """The trainer's own worker's PolicyServerInput (started now, without sampling)."""
    return trainer.workers.local_worker().sampler.reader


def start_client(port: int, mode: str = "remote", *args: str, host: str = "127.0.0.1") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen([sys.executable, str(CLIENT_SCRIPT), "--address", f"http://{host}:{port}",
                             "--inference-mode", mode, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen) -> Tuple[str, str]:
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate(timeout=30)
    return out.decode(errors="replace"), err.decode(errors="replace")


def raw_request(port: int, path: str, body: bytes = b"", headers: Optional[Dict[str, str]] = None,
                method: str = "POST", host: str = "127.0.0.1") -> Tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(method, path, body=body if method == "POST" else None, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()

