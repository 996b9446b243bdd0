"""PolicyClient: a simulator's side of a policy server (serving/policy_server_input.py).

    client = PolicyClient("http://127.0.0.1:9900", inference_mode="local", update_interval=5.0)
    eid = client.start_episode()
    action = client.get_action(eid, obs)
    client.log_returns(eid, reward)
    client.end_episode(eid, obs)

The reference's methods, in two inference modes:

- "remote": every call is a request; the server acts and learns from what it records.
- "local": the client acts with its own copy of the worker (built from the server's
  `worker_spec`: its config and policies' spaces; classes re-imported only from trusted
  modules: rlfleet, gymnasium, your own imported code and `trusted_modules`). Its weights are
  fetched every `update_interval` seconds (safetensors bytes); its finished batches go to the
  server from a background thread, each with a `report_id`, until the server acknowledges
  that training took them.

A server that cannot be reached is retried with backoff (serving/http_client.py) until
`retry_deadline_s`. When the server restarted (a new server id), "remote" episodes that were
running are started again there under the same id before the call is repeated: the steps
they had made before the restart are lost, the rest of each episode is not.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.external_multi_agent_env import ExternalMultiAgentEnv
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.rollout.rollout_worker import RolloutWorker
from rlfleet.serving.http_client import HTTPClient, ServerRefused
from rlfleet.serving.wire import decode_weights, encode_batch, encode_metrics, plain
from rlfleet.utils.json_codec import ImportTrust, decode, find_untrusted

logger = logging.getLogger(__name__)
INFERENCE_MODES = ("remote", "local")


class _ClientEnv(ExternalEnv):
    """The local worker's env: the client's methods call it from the simulator's threads."""

    def run(self) -> None:
        threading.Event().wait()


class _ClientMultiAgentEnv(ExternalMultiAgentEnv):
    def run(self) -> None:
        threading.Event().wait()


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
        retry_deadline_s: how long to keep retrying an unreachable server.
        timeout_s: per request.
    """

    def __init__(self, address: str, inference_mode: str = "remote", update_interval: Optional[float] = 10.0, *,
                 token: Optional[str] = None, tls_ca: Optional[str] = None,
                 trusted_modules: Optional[Sequence[str]] = None, config_overrides: Optional[dict] = None,
                 retry_deadline_s: float = 300.0, timeout_s: float = 60.0):
        if inference_mode not in INFERENCE_MODES:
            raise ValueError(f"PolicyClient(inference_mode={inference_mode!r}): use one of {INFERENCE_MODES}")
        if update_interval is not None and not (isinstance(update_interval, (int, float)) and update_interval > 0):
            raise ValueError(f"PolicyClient(update_interval={update_interval!r}): give seconds > 0, or None")
        self.inference_mode = inference_mode
        self.update_interval = update_interval
        self._http = HTTPClient(address, token=token, tls_ca=tls_ca, timeout_s=timeout_s,
                                retry_deadline_s=retry_deadline_s)
        self._open: Dict[str, List[Any]] = {}  # "remote": episode id -> [training_enabled, server id]
        self._open_lock = threading.Lock()
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

    # --- the reference's methods --------------------------------------------------------------
    def start_episode(self, episode_id: Optional[str] = None, training_enabled: bool = True) -> str:
        """Starts an episode; returns its id."""
        if self._env is not None:
            return self._local().start_episode(episode_id, training_enabled)
        answer = self._http.call("/v1/start_episode", {"episode_id": episode_id, "training_enabled": training_enabled})
        eid = answer["episode_id"]
        with self._open_lock:
            self._open[eid] = [training_enabled, self._http.server_id]
        return eid

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The action for `observation` (a dict per agent for a multi-agent server)."""
        if self._env is not None:
            return self._local().get_action(episode_id, observation)
        return self._episode_call("/v1/get_action", episode_id, {"observation": observation})["action"]

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action taken by another controller (off-policy)."""
        if self._env is not None:
            return self._local().log_action(episode_id, observation, action)
        self._episode_call("/v1/log_action", episode_id, {"observation": observation, "action": plain(action)})

    def log_returns(self, episode_id: str, reward: Any, info: Optional[dict] = None) -> None:
        """Adds `reward` (a dict per agent for a multi-agent server) to the current step."""
        if self._env is not None:
            return self._local().log_returns(episode_id, reward, info)
        self._episode_call("/v1/log_returns", episode_id, {"reward": plain(reward), "info": info})

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False) -> None:
        """Ends the episode (terminal, or `truncated` by a time limit)."""
        if self._env is not None:
            return self._local().end_episode(episode_id, observation, truncated)
        self._episode_call("/v1/end_episode", episode_id, {"observation": observation, "truncated": truncated})
        with self._open_lock:
            self._open.pop(episode_id, None)

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

    # --- "remote" ------------------------------------------------------------------------------
    def _episode_call(self, path: str, episode_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
        body = dict(body, episode_id=episode_id)
        try:
            return self._http.call(path, body)
        except ServerRefused as exc:
            with self._open_lock:
                state = self._open.get(episode_id)
            if exc.status != 400 or state is None or state[1] == self._http.server_id or "is unknown" not in exc.message:
                raise
            # The server restarted and lost the episode: start it again there, then repeat the call.
            logger.warning("PolicyClient: the server restarted; episode %r starts again there", episode_id)
            self._http.call("/v1/start_episode", {"episode_id": episode_id, "training_enabled": state[0]})
            state[1] = self._http.server_id
            return self._http.call(path, body)

    # --- "local" -------------------------------------------------------------------------------
    def _local(self) -> ExternalEnv:
        if self._error is not None:
            raise RuntimeError(f"PolicyClient: the local sampler stopped ({type(self._error).__name__}: "
                               f"{self._error})") from self._error
        return self._env

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
        policies = (config.get("multiagent") or {}).get("policies") or {}
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
                self._outbox.put({"report_id": uuid.uuid4().hex, "batch": encode_batch(batch),
                                  "metrics": encode_metrics(worker.get_metrics())})
        except BaseException as exc:
            logger.exception("PolicyClient: the local sampler failed")
            self._error = exc

    def _send_loop(self) -> None:
        while True:
            report = self._outbox.get()
            try:
                self._http.call("/v1/report_samples", report)  # retried until acknowledged (or the deadline)
                self.reports_sent += 1
            except BaseException as exc:
                logger.exception("PolicyClient: a batch could not be delivered")
                self._error = exc
                return


__all__ = ["PolicyClient", "INFERENCE_MODES"]
