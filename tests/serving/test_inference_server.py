"""`rlfleet serve CHECKPOINT` (serving/inference_server.py): actions of a restored policy over
HTTP: batches of observations, recurrent state in and out, explore on or off, concurrent
requests batched, long requests served in chunks, JSON or msgpack as `Accept` chooses, bad
requests refused in terms the HTTP client can act on, the token rule, and the CLI in its own
process. (The serving guide's curl transcripts: tests/docs/test_serving_guide.py.)"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import json

import msgpack
import numpy as np
import pytest

from rlfleet.registry import get_trainer_class
from rlfleet.serving.http_client import HTTPClient, ServerRefused
from rlfleet.serving.inference_server import InferenceServer, serve_checkpoint
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
    # Out of bounds: which row and element, which bounds, what the server takes; no training advice.
    ({"observations": [OBS[0], [0.0, 0.0, 9.0, 0.0]]}, "observations[1][2] = 9 is above the bound 0.418879 of Box("),
    ({"observations": [[0.0, 0.0, 9.0, 0.0]]}, "this element's range is [-0.418879, 0.418879]). This server takes "
                                               "observations inside the observation space the policy was trained on"),
    ({"observations": OBS, "policy_id": "other"}, "unknown policy_id 'other'"),
    ({"observations": OBS, "state": [[0.0]] * 3}, "not recurrent"),
    ({"observations": OBS, "explore": "yes"}, "field 'explore' must be bool"),
])
def test_bad_requests_are_refused_naming_the_problem(served, body, message):
    with pytest.raises(ServerRefused, match="400") as info:
        HTTPClient(served.url).call("/v1/compute_actions", body)
    assert message in info.value.message and "disable_env_checking" not in info.value.message, info.value.message


def _request(url: str, path: str, body: bytes = b"", headers=None, method: str = "POST"):
    """(status, content type, body) of one raw request."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, path, body=body if method == "POST" else None, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()


def test_accept_chooses_json_or_msgpack(served):
    """curl (no Accept, or */*) reads JSON: health, actions for a JSON body, and every error;
    msgpack when asked for."""
    url, obs_json = served.url, json.dumps({"observations": OBS[:1]}).encode()
    for accept in (None, "*/*", "text/html,application/xhtml+xml,*/*;q=0.8", "application/json"):
        headers = {"Accept": accept} if accept else {}
        status, kind, body = _request(url, "/v1/health", headers=headers, method="GET")
        assert (status, kind) == (200, "application/json") and json.loads(body)["status"] == "ok"
        status, kind, body = _request(url, "/v1/compute_actions", method="GET", headers=headers)  # 405
        assert (status, kind) == (405, "application/json") and "GET is not allowed" in json.loads(body)["error"]
        status, kind, body = _request(url, "/v1/compute_actions", b"{}",
                                      dict(headers, **{"Content-Type": "text/plain"}))
        assert (status, kind) == (415, "application/json") and "application/json" in json.loads(body)["error"]
        status, kind, body = _request(url, "/v1/compute_actions", obs_json,
                                      dict(headers, **{"Content-Type": "application/json"}))
        assert (status, kind) == (200, "application/json") and len(json.loads(body)["actions"]) == 1
    msgpack_only = {"Accept": "application/msgpack"}
    status, kind, body = _request(url, "/v1/health", headers=msgpack_only, method="GET")
    assert (status, kind) == (200, "application/msgpack") and msgpack.unpackb(body)["status"] == "ok"
    status, kind, body = _request(url, "/v1/health", headers=msgpack_only)  # 405, in msgpack as asked
    assert (status, kind) == (405, "application/msgpack") and "POST is not allowed" in msgpack.unpackb(body)["error"]
    status, kind, body = _request(url, "/v1/compute_actions", obs_json,
                                  {"Content-Type": "application/json", "Accept": "application/msgpack"})
    assert (status, kind) == (200, "application/msgpack") and len(msgpack.unpackb(body)["actions"]) == 1
    packed = msgpack.packb({"observations": OBS[:1]})
    for accept, expected in ((None, "application/msgpack"), ("application/json", "application/json"),
                             ("application/msgpack;q=0.5, application/json", "application/json")):
        headers = dict({"Content-Type": "application/msgpack"}, **({"Accept": accept} if accept else {}))
        assert _request(url, "/v1/compute_actions", packed, headers)[:2] == (200, expected), accept


def test_a_request_above_max_batch_is_served_in_chunks(served):
    """300 rows with max_batch 256: two forward passes, one answer in order."""
    rows = np.random.default_rng(0).uniform(-0.2, 0.2, (300, 4)).astype(np.float32)
    before = served.batches_run
    answer = HTTPClient(served.url).call("/v1/compute_actions", {"observations": rows.tolist()})
    assert served.batches_run - before == 2
    expected, _, _ = served.worker.get_policy().compute_actions(rows, explore=False)
    assert answer["actions"] == expected.tolist()


def test_chunks_up_to_the_hard_limit_then_a_refusal_naming_it(served):
    small = InferenceServer(served.trainer, port=0, max_batch=4, max_request_rows=10).start()
    try:
        client = HTTPClient(small.url)
        rows = np.random.default_rng(1).uniform(-0.2, 0.2, (10, 4)).astype(np.float32)
        answer = client.call("/v1/compute_actions", {"observations": rows.tolist()})
        assert small.batches_run == 3  # 4 + 4 + 2 rows
        assert answer["actions"] == served.worker.get_policy().compute_actions(rows, explore=False)[0].tolist()
        with pytest.raises(ServerRefused, match="413") as info:
            client.call("/v1/compute_actions", {"observations": rows.tolist() + OBS[:1]})
        assert ("holds 11 rows; this server answers at most 10 per request (max_request_rows, `rlfleet serve "
                "--max-request-rows`)") in info.value.message
    finally:
        small.stop()


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
    err = capsys.readouterr().err  # the flag's name and the length; checked before the restore
    assert "binding '127.0.0.2' needs a token" in err and "pass --token TOKEN with a secret of 16 or more" in err, err
    assert "token=" not in err, err
    assert main(["serve", ckpt, "--host", "127.0.0.2", "--token", "short"]) == 2
    err = capsys.readouterr().err
    assert "the token (--token TOKEN or $RLFLEET_SERVER_TOKEN) must be a string of 16 or more characters, got 5" in err
    assert main(["serve", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    # The help's figures are the server's own (the parser imports nothing from rlfleet.serving).
    from rlfleet.cli import serve as cli_serve
    from rlfleet.serving import inference_server, security

    assert f"{security.TOKEN_MIN_LENGTH} or more characters" in cli_serve.TOKEN_RULE
    assert cli_serve.TOKEN_EXAMPLE == security.TOKEN_EXAMPLE
    assert all(h in cli_serve.TOKEN_RULE for h in security.LOOPBACK_HOSTS)
    assert (cli_serve.DEFAULT_MAX_BATCH, cli_serve.DEFAULT_MAX_REQUEST_ROWS) == (
        inference_server.DEFAULT_MAX_BATCH, inference_server.DEFAULT_MAX_REQUEST_ROWS)
    assert "--token TOKEN the clients' shared secret, 16 or more characters" in help_text, help_text
    assert "a token of 16 or more characters (--token TOKEN or $RLFLEET_SERVER_TOKEN) is required" in help_text
    # From Python, the same rule in the keyword's name.
    with pytest.raises(ValueError, match=r"pass token=\.\.\. with a secret of 16 or more characters"):
        InferenceServer(served.trainer, address="127.0.0.2", port=0)
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

