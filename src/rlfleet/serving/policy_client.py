"""PolicyClient: a simulator's side of a policy server (serving/policy_server_input.py).

    client = PolicyClient("http://127.0.0.1:9900", inference_mode="local", update_interval=5.0)
    eid = client.start_episode()
    action = client.get_action(eid, obs)
    client.log_returns(eid, reward)
    client.end_episode(eid, obs)

RLlib 1.x's `PolicyClient` methods (so its clients port unchanged), in two inference modes:

- "remote": every call is a request; the server acts and learns from what it records.
- "local": the client acts with its own copy of the worker (built from the server's
  `worker_spec`: its config and policies' spaces; classes re-imported only from trusted
  modules: rlfleet, gymnasium, your own imported code and `trusted_modules`). Its weights are
  fetched every `update_interval` seconds (safetensors bytes); its finished batches go to the
  server from a background thread, each with a `report_id`, until the server acknowledges
  that training took them.

A server that cannot be reached is retried with backoff (serving/http_client.py) until
`retry_deadline_s`; then the call raises `ServerUnreachable` (a ConnectionError) naming the
server's address and the last failure. In "local" mode the requests run in the client's
background threads: the simulator's next call raises it (one waiting in `get_action` too),
and so does every call after. When the server restarted (a new server id), "remote" episodes that were
running are started again there under the same id before the call is repeated: the steps
they had made before the restart are lost, the rest of each episode is not.

Finished "remote" episodes are never lost: the client keeps each one's calls (observations
sent, actions received, rewards, final observation) until the server confirms that training
took the batch holding it (the answers to later `end_episode` calls name those it took), and
sends the unconfirmed ones again to a restarted server, as logged steps (`log_action`) under
their own ids. An episode trained just before a kill, whose confirmation never came back, is
thus trained on twice: at least once, never lost. At most `max_unconfirmed_episodes` finished
episodes are kept; `end_episode` waits for confirmations beyond that (training takes no
batches from the server: the trainer is slow or stopped), up to `retry_deadline_s`.
"""
from __future__ import annotations

import copy
import logging
import queue
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.external_multi_agent_env import ExternalMultiAgentEnv
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.rollout.rollout_worker import RolloutWorker
from rlfleet.serving.http_client import HTTPClient, ServerRefused, ServerUnreachable
from rlfleet.serving.policy_server_input import MAX_CONFIRM_IDS
from rlfleet.serving.wire import decode_weights, encode_batch, encode_metrics, plain
from rlfleet.utils.json_codec import ImportTrust, decode, find_untrusted

logger = logging.getLogger(__name__)
INFERENCE_MODES = ("remote", "local")
# How often a client holding `max_unconfirmed_episodes` asks the server for confirmations.
_CONFIRM_POLL_S = 0.5
# How often a "local" simulator's wait (for an action, for room in the outbox) checks whether
# the client's background threads gave up.
_FAILURE_POLL_S = 0.1


class _Ended:
    """A finished "remote" episode kept until training took it: its calls, in order
    (("act", obs, action), ("rewards", reward, info), ("end", obs, truncated)), and the id of
    the server that holds it."""

    __slots__ = ("calls", "server_id")

    def __init__(self, calls: List[tuple], server_id: Optional[str]):
        self.calls, self.server_id = calls, server_id


class _ClientEnv(ExternalEnv):
    """The local worker's env: the client's methods call it from the simulator's threads.
    `failure` is what stopped the client's background threads: a `get_action` waiting for
    the sampler raises it rather than wait forever."""

    failure: Optional[BaseException] = None

    def run(self) -> None:
        threading.Event().wait()

    def get_action(self, episode_id: str, observation: Any) -> Any:
        reply: "queue.Queue[Any]" = queue.Queue(maxsize=1)
        self._record_step(episode_id, self._per_agent(observation, "observation"), reply, None)
        while True:
            try:
                return self._from_agents(reply.get(timeout=_FAILURE_POLL_S))
            except queue.Empty:
                if self.failure is not None:
                    raise self.failure


class _ClientMultiAgentEnv(ExternalMultiAgentEnv):
    failure: Optional[BaseException] = None
    run = _ClientEnv.run
    get_action = _ClientEnv.get_action


class PolicyClient:
    """Plays episodes against a policy server (see the module docstring).

    Args:
        address: the server, `http://host:port` or `https://host:port`.
        inference_mode: "remote" (the server acts) or "local" (this process acts).
        update_interval: "local": seconds between weight refreshes (None: only at the start
            and on `update_policy_weights()`).
        token: the server's token (sent as `Authorization: Bearer ...`).
        tls_ca: the CA file of the server's certificate (https).
        trusted_modules: "local": modules the server's config may name classes from, besides
            rlfleet, gymnasium and your own modules already imported.
        config_overrides: "local": config entries replacing the server's (e.g. a
            `multiagent.policy_mapping_fn` that cannot travel).
        retry_deadline_s: how long to keep retrying an unreachable server, then `ServerUnreachable`
            naming its address and the last failure (and, "remote", how long to wait for
            confirmations when `max_unconfirmed_episodes` are kept).
        timeout_s: per request.
        max_unconfirmed_episodes: "remote": finished episodes kept until training took them.
    """

    def __init__(self, address: str, inference_mode: str = "remote", update_interval: Optional[float] = 10.0, *,
                 token: Optional[str] = None, tls_ca: Optional[str] = None,
                 trusted_modules: Optional[Sequence[str]] = None, config_overrides: Optional[dict] = None,
                 retry_deadline_s: float = 300.0, timeout_s: float = 60.0, max_unconfirmed_episodes: int = 1000):
        if inference_mode not in INFERENCE_MODES:
            raise ValueError(f"PolicyClient(inference_mode={inference_mode!r}): use one of {INFERENCE_MODES}")
        if update_interval is not None and not (isinstance(update_interval, (int, float)) and update_interval > 0):
            raise ValueError(f"PolicyClient(update_interval={update_interval!r}): give seconds > 0, or None")
        if not (isinstance(max_unconfirmed_episodes, int) and 1 <= max_unconfirmed_episodes <= MAX_CONFIRM_IDS):
            raise ValueError(f"PolicyClient(max_unconfirmed_episodes={max_unconfirmed_episodes!r}): give an int in "
                             f"1..{MAX_CONFIRM_IDS}")
        self.inference_mode = inference_mode
        self.max_unconfirmed_episodes = max_unconfirmed_episodes
        self.retry_deadline_s = retry_deadline_s
        self.update_interval = update_interval
        self._http = HTTPClient(address, token=token, tls_ca=tls_ca, timeout_s=timeout_s,
                                retry_deadline_s=retry_deadline_s)
        self._open: Dict[str, List[Any]] = {}  # "remote": episode id -> [training_enabled, server id]
        self._open_lock = threading.Lock()
        # "remote", learned-from episodes: the calls of those running, and those finished that
        # training has not taken yet (see the module docstring).
        self._calls: Dict[str, List[tuple]] = {}
        self._unconfirmed: "OrderedDict[str, _Ended]" = OrderedDict()
        self._resend_lock = threading.Lock()
        self._synced_server: Optional[str] = None  # the server the unconfirmed episodes were checked against
        self.episodes_resent = 0
        self.worker: Optional[RolloutWorker] = None
        self._env: Optional[ExternalEnv] = None
        self._last_update = 0.0
        self.reports_sent = 0
        if inference_mode == "local":
            self._build_local_worker(trusted_modules, config_overrides or {})
            self.update_policy_weights()
            self._outbox: "queue.Queue[Any]" = queue.Queue(maxsize=8)
            self._error: Optional[BaseException] = None
            threading.Thread(target=self._sample_loop, name="PolicyClient-sampler", daemon=True).start()
            threading.Thread(target=self._send_loop, name="PolicyClient-sender", daemon=True).start()

    # --- RLlib 1.x's PolicyClient methods ----------------------------------------------------
    def start_episode(self, episode_id: Optional[str] = None, training_enabled: bool = True) -> str:
        """Starts an episode; returns its id."""
        if self._env is not None:
            return self._local().start_episode(episode_id, training_enabled)
        answer = self._http.call("/v1/start_episode", {"episode_id": episode_id, "training_enabled": training_enabled})
        eid = answer["episode_id"]
        with self._open_lock:
            self._open[eid] = [training_enabled, self._http.server_id]
            if training_enabled:
                self._calls[eid] = []
        self._resend_if_restarted()
        return eid

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The action for `observation` (a dict per agent for a multi-agent server)."""
        if self._env is not None:
            return self._local().get_action(episode_id, observation)
        action = self._episode_call("/v1/get_action", episode_id, {"observation": observation})["action"]
        self._record(episode_id, "act", observation, action)
        return action

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action taken by another controller (off-policy)."""
        if self._env is not None:
            return self._local().log_action(episode_id, observation, action)
        self._episode_call("/v1/log_action", episode_id, {"observation": observation, "action": plain(action)})
        self._record(episode_id, "act", observation, plain(action))

    def log_returns(self, episode_id: str, reward: Any, info: Optional[dict] = None) -> None:
        """Adds `reward` (a dict per agent for a multi-agent server) to the current step."""
        if self._env is not None:
            return self._local().log_returns(episode_id, reward, info)
        self._episode_call("/v1/log_returns", episode_id, {"reward": plain(reward), "info": info})
        self._record(episode_id, "rewards", plain(reward), info)

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """Ends the episode (terminal, or `truncated` by a time limit)."""
        if self._env is not None:
            return self._local().end_episode(episode_id, observation, truncated)
        with self._open_lock:
            asked = list(self._unconfirmed)
        answer = self._episode_call("/v1/end_episode", episode_id,
                                    {"observation": observation, "truncated": truncated, "confirm": asked})
        with self._open_lock:
            self._open.pop(episode_id, None)
            calls = self._calls.pop(episode_id, None)
            if calls:  # an episode without a step leaves no rows to lose
                calls.append(("end", copy.deepcopy(observation), truncated))
                self._unconfirmed[episode_id] = _Ended(calls, answer.get("server_id"))
        self._confirmed(answer.get("trained", []))
        if len(self._unconfirmed) >= self.max_unconfirmed_episodes:
            self._wait_for_confirmations()

    def update_policy_weights(self) -> None:
        """"local": fetches the server's current weights now."""
        if self.worker is None:
            raise ValueError("update_policy_weights() is for inference_mode='local' (the server holds the weights)")
        weights, timestep = decode_weights(self._http.call("/v1/weights"))
        self.worker.set_weights(weights, {"timestep": timestep})
        self._last_update = time.monotonic()

    def health(self) -> Dict[str, Any]:
        return self._http.call("/v1/health")

    def close(self) -> None:
        self._http.close()

    @property
    def unconfirmed_episodes(self) -> List[str]:
        """"remote": the finished episodes kept until the server confirms that training took them."""
        with self._open_lock:
            return list(self._unconfirmed)

    # --- "remote" ------------------------------------------------------------------------------
    def _record(self, episode_id: str, kind: str, first: Any, second: Any) -> None:
        with self._open_lock:
            calls = self._calls.get(episode_id)
            if calls is not None:  # copies: the simulator may reuse its arrays
                calls.append((kind, copy.deepcopy(first), copy.deepcopy(second)))

    def _confirmed(self, trained: List[str]) -> None:
        with self._open_lock:
            for eid in trained:
                self._unconfirmed.pop(eid, None)

    def _wait_for_confirmations(self) -> None:
        """Holds the simulator until training took some of the kept episodes (bounded memory)."""
        deadline = time.monotonic() + self.retry_deadline_s
        while True:
            with self._open_lock:
                asked = list(self._unconfirmed)
            if len(asked) < self.max_unconfirmed_episodes:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"PolicyClient: {len(asked)} finished episodes are still not confirmed as trained "
                                   f"after {self.retry_deadline_s} s (max_unconfirmed_episodes="
                                   f"{self.max_unconfirmed_episodes}); is the trainer taking batches from "
                                   f"{self._http.address}? Raise max_unconfirmed_episodes or retry_deadline_s")
            self._confirmed(self._http.call("/v1/trained_episodes", {"episode_ids": asked})["trained"])
            self._resend_if_restarted()
            time.sleep(_CONFIRM_POLL_S)

    def _resend_if_restarted(self) -> None:
        """Sends the unconfirmed episodes again to a server that does not hold them (a restart)."""
        if self._http.server_id == self._synced_server:
            return
        with self._resend_lock:
            while True:
                current = self._http.server_id
                with self._open_lock:
                    lost = [(eid, ended) for eid, ended in self._unconfirmed.items() if ended.server_id != current]
                if not lost:
                    self._synced_server = current
                    return
                logger.warning("PolicyClient: the server restarted; sending %d finished episodes it had not trained "
                               "on again", len(lost))
                for eid, ended in lost:
                    try:
                        ended.server_id = self._resend(eid, ended.calls)
                    except ServerRefused:
                        if self._http.server_id == current:
                            raise
                        break  # it restarted again meanwhile: start over with the new server
                    self.episodes_resent += 1

    def _resend(self, eid: str, calls: List[tuple]) -> str:
        """One finished episode as logged steps; returns the id of the server that took it."""
        self._http.call("/v1/start_episode", {"episode_id": eid, "training_enabled": True})
        answer: Dict[str, Any] = {}
        for kind, first, second in calls:
            if kind == "act":
                self._http.call("/v1/log_action", {"episode_id": eid, "observation": first, "action": second})
            elif kind == "rewards":
                self._http.call("/v1/log_returns", {"episode_id": eid, "reward": first, "info": second})
            else:
                answer = self._http.call("/v1/end_episode", {"episode_id": eid, "observation": first,
                                                             "truncated": second})
        return answer["server_id"]

    def _episode_call(self, path: str, episode_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
        body = dict(body, episode_id=episode_id)
        try:
            answer = self._http.call(path, body)
        except ServerRefused as exc:
            with self._open_lock:
                state = self._open.get(episode_id)
            if exc.status != 400 or state is None or state[1] == self._http.server_id or "is unknown" not in exc.message:
                raise
            # The server restarted and lost the episode: start it again there, then repeat the call.
            logger.warning("PolicyClient: the server restarted; episode %r starts again there", episode_id)
            self._http.call("/v1/start_episode", {"episode_id": episode_id, "training_enabled": state[0]})
            state[1] = self._http.server_id
            answer = self._http.call(path, body)
        self._resend_if_restarted()
        return answer

    # --- "local" -------------------------------------------------------------------------------
    def _local(self) -> ExternalEnv:
        if self._error is not None:
            raise self._error
        return self._env

    def _fail(self, exc: BaseException) -> None:
        """Stops "local" acting: the simulator's calls (and a waiting `get_action`) raise the
        first failure of the client's threads."""
        if self._error is not None:
            return
        if isinstance(exc, ServerUnreachable):
            error: BaseException = ServerUnreachable(
                f"PolicyClient: gave up on the server at {self._http.address} after retry_deadline_s="
                f"{self.retry_deadline_s} s without an answer; last failure: {exc.last_failure}. Start the "
                "server again and create a new client (batches not yet delivered are lost), or raise "
                "retry_deadline_s to wait longer")
        else:
            error = RuntimeError(f"PolicyClient: the local sampler stopped ({type(exc).__name__}: {exc})")
        error.__cause__ = exc
        self._error = error
        self._env.failure = error

    def _build_local_worker(self, trusted_modules: Optional[Sequence[str]], overrides: dict) -> None:
        spec = self._http.call("/v1/worker_spec")
        trust = ImportTrust(trusted_modules, where="PolicyClient(trusted_modules=...)")
        found = find_untrusted(spec, trust, {"config": overrides})
        if found:
            names = ", ".join(f"{u.name!r} (at {u.path})" for u in found)
            modules = sorted({u.module.split(".")[0] for u in found})
            raise ValueError(f"PolicyClient: the server's worker spec names {names}, from modules this process does "
                             f"not trust; nothing was imported. Trust them with trusted_modules={modules}, or pass "
                             "the values yourself in config_overrides")
        importer = trust.importer()
        config = decode(spec["config"], overrides, importer=importer)
        policies = MultiAgentSettings.from_config(config).policies
        if isinstance(policies, dict):
            config["multiagent"]["policies"] = {pid: PolicySpec(*p) if isinstance(p, list) else p
                                                for pid, p in policies.items()}
        config.update(input="sampler", output=None, num_workers=0, num_envs_per_worker=1, sample_async=False,
                      callbacks=overrides.get("callbacks", DefaultCallbacks), remote_worker_envs=False)
        if spec["multi_agent"]:
            env: ExternalEnv = _ClientMultiAgentEnv()
        else:
            (only,) = spec["policies"].values()
            env = _ClientEnv(decode(only["action_space"]), decode(only["observation_space"]))
        policy_class = importer(spec["policy_class"], "policy_class")
        self.worker = RolloutWorker(env_creator=lambda ctx: env, policy_class=policy_class, config=config)
        self._env = env

    def _sample_loop(self) -> None:
        worker = self.worker
        try:
            while True:
                if self.update_interval is not None and time.monotonic() - self._last_update >= self.update_interval:
                    self.update_policy_weights()  # between batches: the sampler's own thread acts
                batch = worker.sample()
                report = {"report_id": uuid.uuid4().hex, "batch": encode_batch(batch),
                          "metrics": encode_metrics(worker.get_metrics())}
                while True:  # the outbox is full while the server does not answer
                    if self._error is not None:
                        return
                    try:
                        self._outbox.put(report, timeout=_FAILURE_POLL_S)
                        break
                    except queue.Full:
                        pass
        except BaseException as exc:
            logger.error("PolicyClient: the local sampler failed: %s: %s", type(exc).__name__, exc,
                         exc_info=not isinstance(exc, ServerUnreachable))
            self._fail(exc)

    def _send_loop(self) -> None:
        while True:
            report = self._outbox.get()
            try:
                self._http.call("/v1/report_samples", report)  # retried until acknowledged (or the deadline)
                self.reports_sent += 1
            except BaseException as exc:
                logger.error("PolicyClient: a batch could not be delivered: %s: %s", type(exc).__name__, exc,
                             exc_info=not isinstance(exc, ServerUnreachable))
                self._fail(exc)
                return


__all__ = ["PolicyClient", "INFERENCE_MODES"]
