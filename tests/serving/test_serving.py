"""The policy server's guard (serving/): every bad request is a 4xx naming the problem, and the
server goes on serving; pickles are refused; the token rule on non-default binds; TLS;
batches reported twice are trained on once. Real sockets, all on loopback."""
from __future__ import annotations

import pickle
import subprocess
import threading

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlfleet.serving.http_client import HTTPClient, ServerRefused, ServerUnreachable
from rlfleet.serving.policy_client import PolicyClient
from rlfleet.serving.security import ServerSecurity
from rlfleet.serving.wire import MSGPACK, decode_body, encode_batch, encode_body
from tests.serving_helpers import cartpole_server, free_port, local_server, raw_request

OBS = [0.01, -0.02, 0.03, 0.04]
ENDPOINTS = ["/v1/start_episode", "/v1/get_action", "/v1/log_action", "/v1/log_returns", "/v1/end_episode",
             "/v1/report_samples", "/v1/trained_episodes"]


@pytest.fixture(scope="module")
def served():
    """A PPO trainer's own worker serving on a free port (nothing trains: the tests read the reader)."""
    port = free_port()
    trainer = cartpole_server(port=port, max_body_bytes=200_000)
    server = local_server(trainer)
    yield server, port
    server.close()
    trainer.stop()


def post(port: int, path: str, value, content_type: str = MSGPACK):
    # Asks for its own format back (without Accept, errors come back as JSON: http_server.py).
    status, body = raw_request(port, path, encode_body(value, content_type), {"Content-Type": content_type,
                                                                              "Accept": content_type})
    return status, decode_body(body, content_type) if body else {}


def play_one_episode(client: PolicyClient, steps: int = 3) -> str:
    eid = client.start_episode()
    for _ in range(steps):
        assert client.get_action(eid, OBS) in (0, 1)
        client.log_returns(eid, 1.0)
    client.end_episode(eid, OBS)
    return eid


@pytest.mark.parametrize("path, body, status, message", [
    ("/v1/get_action", {"episode_id": "nope", "observation": OBS}, 400, "'nope' is unknown; start one"),
    ("/v1/get_action", {"observation": OBS}, 400, "lacks the field 'episode_id'"),
    ("/v1/get_action", {"episode_id": 7, "observation": OBS}, 400, "field 'episode_id' must be str"),
    ("/v1/start_episode", {"training_enabled": "yes"}, 400, "field 'training_enabled' must be bool"),
    ("/v1/report_samples", {"batch": {"count": 0, "policies": {"other": {"obs": [1, 2, 3]}}}}, 400,
     "batch count"),
    ("/v1/report_samples", {"batch": {"count": 1, "policies": {"intruder": {"x": np.zeros(1)}}}}, 400,
     "holds policy 'intruder'"),
    ("/v1/report_samples", {"batch": {"count": 2, "policies": {"default_policy": {
        "obs": np.zeros((2, 4)), "actions": np.zeros(2), "rewards": np.array([1.0, np.nan])}}}}, 400,
     "rewards must be finite"),
    ("/v1/report_samples", {"batch": {"count": 2, "policies": {"default_policy": {
        "obs": np.zeros((2, 4)), "actions": np.zeros(3), "rewards": np.zeros(2)}}}}, 400, "differ in length"),
    ("/v1/trained_episodes", {"episode_ids": "abc"}, 400, "field 'episode_ids' must be list"),
    ("/v1/trained_episodes", {"episode_ids": [1, 2]}, 400, "'episode_ids' must be a list of at most"),
    ("/v1/nothing", {}, 404, "no such endpoint"),
])
def test_bad_requests_get_a_4xx_naming_the_problem(served, path, body, status, message):
    server, port = served
    got, answer = post(port, path, body)
    assert got == status and message in answer["error"], answer


def test_bad_episode_steps_are_refused_and_the_episode_goes_on(served):
    server, port = served
    _, answer = post(port, "/v1/start_episode", {})
    eid = answer["episode_id"]
    for body, message in [
        ({"observation": [0.0, 0.0]}, "shape"),
        ({"observation": [float("nan")] * 4}, "observation[0] is nan"),
        ({"observation": "left"}, "observation"),
    ]:
        status, answer = post(port, "/v1/log_action", dict(body, episode_id=eid, action=0))
        assert status == 400 and message in answer["error"], answer
    status, answer = post(port, "/v1/log_action", {"episode_id": eid, "observation": OBS, "action": 3})
    assert status == 400 and "action 3 is not in the action space" in answer["error"]
    status, answer = post(port, "/v1/log_returns", {"episode_id": eid, "reward": float("nan")})
    assert status == 400 and "reward is nan" in answer["error"]
    # JSON has no NaN: the same reward in a JSON body is a malformed body.
    status, answer = raw_request(port, "/v1/log_returns", b'{"episode_id": "%s", "reward": NaN}' % eid.encode(),
                                 {"Content-Type": "application/json"})
    assert status == 400 and b"NaN" in answer
    # JSON works for valid requests too; the episode is intact.
    status, answer = post(port, "/v1/log_action", {"episode_id": eid, "observation": OBS, "action": 1}, "application/json")
    assert status == 200, answer
    assert post(port, "/v1/end_episode", {"episode_id": eid, "observation": OBS})[0] == 200


def test_transport_errors(served):
    server, port = served
    pickled = pickle.dumps({"episode_id": "x", "observation": OBS})
    for content_type in (MSGPACK, "application/json", "application/python-pickle"):
        status, body = raw_request(port, "/v1/get_action", pickled, {"Content-Type": content_type})
        assert status == 415 and b"pickle" in body, body
    status, body = raw_request(port, "/v1/get_action", b"{}", {"Content-Type": "text/plain"})
    assert status == 415 and b"application/msgpack" in body
    status, body = raw_request(port, "/v1/get_action", b"\xc1\xff\x00", {"Content-Type": MSGPACK})
    assert status == 400 and b"malformed" in body
    status, body = raw_request(port, "/v1/get_action", b"x" * 300_000, {"Content-Type": MSGPACK})
    assert status == 413 and b"at most 200000" in body
    status, body = raw_request(port, "/v1/get_action", method="GET")
    assert status == 405
    # Arrays of object dtype are not rebuilt (no pickle behind a dtype either).
    array = {"__ndarray__": True, "dtype": "|O", "shape": [1], "data": b"\x00" * 8}
    status, body = raw_request(port, "/v1/get_action", msgpack.packb({"episode_id": "x", "observation": array}),
                               {"Content-Type": MSGPACK})
    assert status == 400 and b"not accepted" in body
    assert HTTPClient(server.url).call("/v1/health")["status"] == "ok"
    status, body = raw_request(port, "/v1/health", method="GET", headers={"Accept": "application/json"})
    assert status == 200 and decode_body(body, "application/json")["status"] == "ok"  # curl-friendly


_values = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats() | st.text(max_size=8)
                       | st.binary(max_size=16),
                       lambda children: st.lists(children, max_size=4) | st.dictionaries(
                           st.sampled_from(["episode_id", "observation", "action", "reward", "batch", "count",
                                            "policies", "metrics", "training_enabled", "truncated", "info",
                                            "__ndarray__", "dtype", "shape", "data"]), children, max_size=5),
                       max_leaves=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(ENDPOINTS), body=st.one_of(_values.map(lambda v: msgpack.packb(v)), st.binary(max_size=64)))
def test_fuzzed_requests_never_crash_the_server(served, path, body):
    server, port = served
    status, _ = raw_request(port, path, body, {"Content-Type": MSGPACK})
    assert status < 500 or status == 503, (path, body)


def test_after_fuzzing_batches_hold_only_valid_steps(served):
    """What reaches training after all the bad requests above: well-formed rows only."""
    server, port = served
    client = PolicyClient(server.url)
    for _ in range(60):  # 300 steps: one fragment (256) of the embedded sampler
        play_one_episode(client, steps=5)
    batch = server.next().policy_batches["default_policy"]
    assert np.isfinite(batch["rewards"]).all() and np.isfinite(batch["obs"]).all()
    assert batch["obs"].shape[1:] == (4,) and set(np.unique(batch["actions"])) <= {0, 1}


def test_a_remote_client_keeps_finished_episodes_until_training_took_them(served):
    """The answers to end_episode name the kept episodes training took; a bad `confirm` list is
    refused before the episode ends; the client holds at most max_unconfirmed_episodes."""
    server, port = served
    while not server._queue.empty():  # what earlier tests left
        server.next()
    _, started = post(port, "/v1/start_episode", {})
    assert post(port, "/v1/end_episode", {"episode_id": started["episode_id"], "observation": OBS,
                                          "confirm": [None]})[0] == 400
    client = PolicyClient(server.url)
    played = [play_one_episode(client, steps=5) for _ in range(60)]  # 300 steps: one fragment (256)
    assert client.unconfirmed_episodes == played  # nothing trained yet
    server.next()
    last = play_one_episode(client, steps=5)
    kept = client.unconfirmed_episodes
    assert played[-1] in kept and last in kept and played[0] not in kept and len(kept) < len(played)
    assert post(port, "/v1/trained_episodes", {"episode_ids": played})[1]["trained"] == \
        [eid for eid in played if eid not in kept]

    tight = PolicyClient(server.url, max_unconfirmed_episodes=2, retry_deadline_s=0.3)
    play_one_episode(tight)
    with pytest.raises(RuntimeError, match="max_unconfirmed_episodes=2"):
        play_one_episode(tight)
    with pytest.raises(ValueError, match="max_unconfirmed_episodes=0"):
        PolicyClient(server.url, max_unconfirmed_episodes=0)


def test_a_report_sent_twice_is_trained_on_once(served):
    server, port = served
    batch = {"count": 2, "policies": {"default_policy": {
        "obs": np.zeros((2, 4), np.float32), "actions": np.zeros(2, np.int64), "rewards": np.ones(2, np.float32),
        "eps_id": np.zeros(2, np.int64)}}}
    report = {"report_id": "r-1", "batch": batch, "metrics": [{"episode_length": 2, "episode_reward": 2.0}]}
    while not server._queue.empty():  # what earlier tests left
        server.next()
    answers = []
    sender = threading.Thread(target=lambda: answers.append(post(port, "/v1/report_samples", report)))
    sender.start()
    got = server.next()  # acknowledges it
    sender.join(10)
    assert answers and answers[0][0] == 200 and got.count == 2
    assert post(port, "/v1/report_samples", report) == (200, {"taken": True})
    assert server._queue.empty() and [m.episode_reward for m in server.pop_metrics()][-1] == 2.0


# --- who may connect ---------------------------------------------------------------------------
def test_a_non_loopback_bind_needs_a_token_and_checks_it():
    with pytest.raises(ValueError, match="binding '127.0.0.2' needs a token"):
        ServerSecurity.checked("127.0.0.2")
    with pytest.raises(ValueError, match="16 or more characters"):
        ServerSecurity.checked("127.0.0.2", token="short")
    token = "a-long-enough-test-token"
    port = free_port("127.0.0.2")
    trainer = cartpole_server(port=port, address="127.0.0.2", token=token)
    server = local_server(trainer)
    try:
        assert server.url == f"http://127.0.0.2:{port}"
        for headers in ({}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": token}):
            status, body = raw_request(port, "/v1/health", method="GET", headers=headers, host="127.0.0.2")
            assert status == 401 and b"token" in body
        with pytest.raises(ServerRefused, match="401"):
            PolicyClient(server.url).start_episode()
        client = PolicyClient(server.url, token=token)
        assert client.health()["status"] == "ok"
        play_one_episode(client)
    finally:
        server.close()
        trainer.stop()


def test_tls_from_a_cert_and_key(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    with pytest.raises(ValueError, match="TLS needs both tls_cert and tls_key"):
        ServerSecurity.checked("127.0.0.1", tls_cert=str(cert))
    port = free_port()
    trainer = cartpole_server(port=port, tls_cert=str(cert), tls_key=str(key))
    server = local_server(trainer)
    try:
        assert server.url.startswith("https://")
        client = PolicyClient(server.url, tls_ca=str(cert))
        play_one_episode(client)
        with pytest.raises(ServerUnreachable):  # a client that does not trust the certificate
            HTTPClient(server.url, retry_deadline_s=0.5).call("/v1/health")
    finally:
        server.close()
        trainer.stop()


def test_batch_encoding_round_trips():
    from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
    from rlfleet.serving.wire import decode_batch

    part = SampleBatch({"obs": np.random.rand(3, 4).astype(np.float32), "actions": np.arange(3),
                        "rewards": np.ones(3, np.float32), "dones": np.array([False, False, True])})
    body = decode_body(encode_body({"batch": encode_batch(MultiAgentBatch({"p": part}, 3))}), MSGPACK)
    back = decode_batch(body["batch"], ["p"], max_rows=10).policy_batches["p"]
    for k, v in part.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].dtype == v.dtype


def test_a_multi_agent_server_takes_dicts_per_agent():
    port = free_port()
    trainer = cartpole_server(port=port, rollout_fragment_length=4, multiagent={
        "policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker=None, **kw: f"p{aid}"})
    server = local_server(trainer)
    try:
        client = PolicyClient(server.url)
        assert client.health()["multi_agent"] is True
        eid = client.start_episode()
        for _ in range(4):
            actions = client.get_action(eid, {0: OBS, 1: OBS})
            assert set(actions) == {0, 1} and set(actions.values()) <= {0, 1}
            client.log_returns(eid, {0: 1.0, 1: 0.5})
        with pytest.raises(ServerRefused, match="must be a dict"):
            client.get_action(eid, OBS)
        client.end_episode(eid, {0: OBS, 1: OBS})
        batch = server.next()
        assert set(batch.policy_batches) == {"p0", "p1"}
        np.testing.assert_allclose(batch.policy_batches["p1"]["rewards"], 0.5)
    finally:
        server.close()
        trainer.stop()
