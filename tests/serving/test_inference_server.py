"""`rlfleet serve CHECKPOINT` (serving/inference_server.py): actions of a restored policy over
HTTP: batches of observations, recurrent state in and out, explore on or off, concurrent
requests batched, bad requests refused, the token rule, and the CLI in its own process."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from rlfleet.registry import get_trainer_class
from rlfleet.serving.http_client import HTTPClient, ServerRefused
from rlfleet.serving.inference_server import serve_checkpoint
from tests.serving_helpers import ROOT, free_port, raw_request

TINY = {"seed": 0, "num_workers": 0, "rollout_fragment_length": 64, "train_batch_size": 64, "sgd_minibatch_size": 32,
        "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}}
OBS = [[0.01, 0.02, -0.03, 0.04], [0.1, -0.2, 0.05, 0.3], [-0.05, 0.0, 0.02, -0.1]]


def checkpoint(tmp_path_factory, name: str, **config) -> str:
    trainer = get_trainer_class("PPO")(env="CartPole-v1", config=dict(TINY, **config))
    try:
        trainer.train()
        return trainer.save(str(tmp_path_factory.mktemp(name)))
    finally:
        trainer.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = serve_checkpoint(checkpoint(tmp_path_factory, "mlp"), port=0, batch_wait_ms=5.0).start()
    yield server
    server.stop()
    server.trainer.stop()


def test_actions_for_a_batch_match_the_restored_policy(served):
    client = HTTPClient(served.url)
    health = client.call("/v1/health")
    assert health["status"] == "ok" and health["policies"]["default_policy"]["recurrent"] is False
    answer = client.call("/v1/compute_actions", {"observations": OBS})
    policy = served.worker.get_policy()
    expected, _, _ = policy.compute_actions(np.asarray(OBS, np.float32), explore=False)
    assert answer["actions"] == expected.tolist() and "state_out" not in answer
    # Exploring samples: over many rows both actions show up (greedy: one per observation).
    explored = client.call("/v1/compute_actions", {"observations": [OBS[0]] * 64, "explore": True})["actions"]
    assert set(explored) == {0, 1}


def test_concurrent_requests_share_forward_passes(served):
    client = HTTPClient(served.url)
    before = served.batches_run
    answers = []

    def ask():
        for _ in range(10):
            answers.append(client.call("/v1/compute_actions", {"observations": [OBS[1]]})["actions"])

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 80 and len({a[0] for a in answers}) == 1
    assert served.batches_run - before < 80  # some requests were answered together


@pytest.mark.parametrize("body, message", [
    ({"observations": [[0.0, 0.0]]}, "observations[0]"),
    ({"observations": [[float("nan")] * 4]}, "observations[0][0] is nan"),
    ({"observations": []}, "holds 0 rows"),
    ({"observations": OBS, "policy_id": "other"}, "unknown policy_id 'other'"),
    ({"observations": OBS, "state": [[0.0]] * 3}, "not recurrent"),
    ({"observations": OBS, "explore": "yes"}, "field 'explore' must be bool"),
])
def test_bad_requests_are_refused_naming_the_problem(served, body, message):
    with pytest.raises(ServerRefused, match="400") as info:
        HTTPClient(served.url).call("/v1/compute_actions", body)
    assert message in info.value.message


def test_recurrent_state_goes_in_and_out(tmp_path_factory):
    path = checkpoint(tmp_path_factory, "lstm", model={"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8,
                                                       "max_seq_len": 8})
    server = serve_checkpoint(path, port=0).start()
    try:
        client = HTTPClient(server.url)
        shapes = client.call("/v1/health")["policies"]["default_policy"]["state_shapes"]
        assert len(shapes) >= 2 and all(s == [8] for s in shapes)  # h and c (of the value net too)
        first = client.call("/v1/compute_actions", {"observations": OBS[:2]})
        assert len(first["state_out"]) == 2 and np.asarray(first["state_out"][0][0]).shape == (8,)
        second = client.call("/v1/compute_actions", {"observations": OBS[:2], "state": first["state_out"],
                                                     "prev_actions": first["actions"], "prev_rewards": [1.0, 1.0]})
        assert not np.allclose(second["state_out"][0][0], first["state_out"][0][0])
        with pytest.raises(ServerRefused, match="'state' must hold one entry per observation"):
            client.call("/v1/compute_actions", {"observations": OBS[:2], "state": first["state_out"][:1]})
    finally:
        server.stop()
        server.trainer.stop()


def test_the_cli_serves_and_keeps_the_token_rule(served, capsys, monkeypatch):
    ckpt = served.checkpoint_path
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("RLFLEET_SERVER_TOKEN", None)
    monkeypatch.delenv("RLFLEET_SERVER_TOKEN", raising=False)
    from rlfleet.cli.main import main

    assert main(["serve", ckpt, "--host", "127.0.0.2"]) == 2
    assert "binding '127.0.0.2' needs a token" in capsys.readouterr().err
    port = free_port("127.0.0.2")
    token = "a-long-enough-test-token"
    proc = subprocess.Popen([sys.executable, "-m", "rlfleet.cli", "serve", ckpt, "--host", "127.0.0.2", "--port",
                             str(port), "--token", token], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert b"on http://127.0.0.2:" in proc.stdout.readline()
        assert raw_request(port, "/v1/health", method="GET", host="127.0.0.2")[0] == 401
        answer = HTTPClient(f"http://127.0.0.2:{port}", token=token).call("/v1/compute_actions", {"observations": OBS})
        assert len(answer["actions"]) == 3
    finally:
        proc.kill()
        proc.communicate(timeout=30)

