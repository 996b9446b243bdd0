"""PolicyServerInput: an `input` reader fed by policy clients over HTTP (one server per rollout worker).

    from rlfleet.serving import policy_server_input
    config = {"env": None, "observation_space": obs_space, "action_space": act_space,
              "input": policy_server_input(base_port=9900), "input_evaluation": []}

`policy_server_input(address, base_port)` gives the `input` callable: each worker that samples
serves on `base_port + worker_index` (remote workers 1..N; with `num_workers: 0` the trainer's
own worker, on `base_port`). Clients (serving/policy_client.py) drive it in two ways:

- "remote" inference: the client's simulator calls `start_episode`, `get_action`,
  `log_action`, `log_returns`, `end_episode`; the server acts with an embedded copy of the
  worker (its own policies, weights refreshed after every batch it hands in) whose env is an
  `ExternalEnv` fed by those requests (env/external_env.py, rollout/external_sampler.py);
- "local" inference: the client acts with its own copy of the policy (`get_weights` every
  `update_interval` s, `get_worker_spec` once) and posts finished batches (`report_samples`).

Both kinds of batches reach the trainer through `next()`; the episodes' metrics through
`pop_metrics()`. A reported batch is acknowledged (200) once `next()` has handed it to training
(a client that retries with the same `report_id` never adds it twice); until then the client
keeps it and retries, so a server killed meanwhile loses none it acknowledged. Episodes played
in "remote" mode live in the server until training takes the batch that holds them; `end_episode`
answers at once (waiting for training would stall a lone simulator, whose batch closes only when
more steps arrive), so the client keeps each finished episode's steps until the server confirms
that training took it: `end_episode` and `trained_episodes` requests carry the ids the client
still holds, and the answer names those training took (remembered for the last
`_ACKED_MEMORY` ids). A client that finds a restarted server sends the unconfirmed episodes
again, as logged steps (policy_client.py): a finished episode is trained on at least once.
The steps of episodes running at the kill are lost; the client starts them again there.

Every request is checked before anything changes (serving/http_server.py for the transport,
env/external_env.py for episode state and spaces, wire.py for batches and metrics); a bad one
is a 4xx naming the problem and the server goes on serving everyone else.
"""
from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence

from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.external_multi_agent_env import ExternalMultiAgentEnv
from rlfleet.offline.io_context import IOContext
from rlfleet.policy.sample_batch import MultiAgentBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.rollout.policy_mapping import multi_agent_configured
from rlfleet.rollout.rollout_worker import RolloutWorker
from rlfleet.serving.http_server import DEFAULT_MAX_BODY_BYTES, PolicyHTTPServer
from rlfleet.serving.security import ServerSecurity, token_from_env
from rlfleet.serving.wire import (OCTETS, WireError, as_arrays, decode_batch, decode_metrics, encode_weights, field,
                                  plain)
from rlfleet.utils.json_codec import encode, qualified_name

logger = logging.getLogger(__name__)

# How long a `report_samples` request waits for training to take its batch before answering
# 503 (the client retries with the same report_id, and waits again).
ACK_WAIT_S = 20.0
# Reported batches remembered as taken, so that a retried report is not trained on twice; and
# "remote" episode ids remembered as trained, for the clients' confirmations.
_ACKED_MEMORY = 10_000
# The most episode ids one request may ask to have confirmed.
MAX_CONFIRM_IDS = 10_000


def policy_server_input(address: str = "127.0.0.1", base_port: int = 9900, **kwargs: Any
                        ) -> Callable[[IOContext], "PolicyServerInput"]:
    """The `input` callable: a PolicyServerInput on `base_port + worker_index` of each worker
    that samples (keyword arguments: as for PolicyServerInput)."""
    def make(ioctx: IOContext) -> "PolicyServerInput":
        return PolicyServerInput(ioctx, address, base_port + ioctx.worker_index, **kwargs)

    return make


class _Served(ExternalEnv):
    """The embedded worker's env: episodes are driven by HTTP requests, not by `run()`."""

    def run(self) -> None:
        threading.Event().wait()  # requests call the episode methods from the server's threads


class _ServedMultiAgent(ExternalMultiAgentEnv):
    def run(self) -> None:
        threading.Event().wait()


class _Report:
    """A batch on its way to training; `taken` is set once `next()` handed it over.
    `episode_ids`: the "remote" episodes that end in it."""

    __slots__ = ("batch", "metrics", "taken", "report_id", "episode_ids")

    def __init__(self, batch: MultiAgentBatch, metrics: List[RolloutMetrics], report_id: Optional[str],
                 episode_ids: Sequence[str] = ()):
        self.batch, self.metrics, self.report_id = batch, metrics, report_id
        self.episode_ids = list(episode_ids)
        self.taken = threading.Event()


class PolicyServerInput:
    """An input reader served over HTTP (see the module docstring).

    Args:
        ioctx: the worker's IOContext.
        address: the host to bind; anything but 127.0.0.1 / localhost / ::1 needs `token`.
        port: the TCP port (0: any free one; see `port`).
        token: the shared secret clients send (default: the RLFLEET_SERVER_TOKEN environment variable).
        tls_cert, tls_key: PEM files: serve HTTPS.
        max_concurrent: episodes that may run at once in "remote" mode.
        max_body_bytes: the largest request accepted.
        on_batch_taken: called (in the training thread) with the ids of the "remote" episodes
            that end in each batch `next()` hands to training.
    """

    def __init__(self, ioctx: IOContext, address: str = "127.0.0.1", port: int = 9900, *,
                 token: Optional[str] = None, tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
                 max_concurrent: int = 100, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 on_batch_taken: Optional[Callable[[List[str]], None]] = None):
        worker = ioctx.worker
        if worker is None:
            raise ValueError("PolicyServerInput needs the rollout worker (IOContext.worker); use it as 'input'")
        filt = worker.config.get("observation_filter", "NoFilter")
        if filt != "NoFilter":
            raise ValueError(f"'observation_filter': {filt!r} is not available with PolicyServerInput (each client "
                             "would filter with its own statistics); use 'NoFilter'")
        security = ServerSecurity.checked(address, token_from_env(token), tls_cert, tls_key,
                                          what=f"PolicyServerInput (worker {ioctx.worker_index})")
        self.worker = worker
        self.max_concurrent = max_concurrent
        self.multi_agent = multi_agent_configured(worker.config)
        # The most rows a reported batch may hold: generous (clients may use other fragment
        # lengths), yet bounded, like max_body_bytes.
        self.max_rows = max(int(worker.config.get("train_batch_size", 4000)),
                            int(worker.config.get("rollout_fragment_length", 200))) * 4
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._pending: Dict[str, _Report] = {}
        self._acked: "OrderedDict[str, None]" = OrderedDict()
        self._trained: "OrderedDict[str, None]" = OrderedDict()  # "remote" episode ids
        self._on_batch_taken = on_batch_taken
        self._lock = threading.Lock()
        self._metrics: List[RolloutMetrics] = []
        # Batches next() handed out, by where they were played: "remote" episodes acted on
        # here, "local" ones reported by clients acting themselves.
        self.batches_taken = {"remote": 0, "local": 0}
        self._child: Optional[RolloutWorker] = None
        self._child_env: Optional[ExternalEnv] = None
        self._weights: Optional[bytes] = None
        self._new_weights: Optional[tuple] = None  # for the embedded worker, applied between its batches
        self._publish_weights()
        self._closed = False
        routes = {
            ("GET", "/v1/health"): self._health,
            ("GET", "/v1/weights"): lambda body: (self._weights, OCTETS),
            ("GET", "/v1/worker_spec"): self._worker_spec,
            ("POST", "/v1/start_episode"): self._start_episode,
            ("POST", "/v1/get_action"): self._get_action,
            ("POST", "/v1/log_action"): self._log_action,
            ("POST", "/v1/log_returns"): self._log_returns,
            ("POST", "/v1/end_episode"): self._end_episode,
            ("POST", "/v1/trained_episodes"): self._trained_episodes,
            ("POST", "/v1/report_samples"): self._report_samples,
        }
        self.server = PolicyHTTPServer(port=port, routes=routes, security=security, max_body_bytes=max_body_bytes,
                                       name=f"PolicyServerInput-{ioctx.worker_index}").start()
        logger.info("PolicyServerInput of worker %d serving on %s", ioctx.worker_index, self.server.url)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        return self.server.url

    # --- the reader -----------------------------------------------------------------------------
    def next(self) -> MultiAgentBatch:
        """The next batch a client played (blocks until one is there)."""
        self._publish_weights()
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        self._metrics.extend(item.metrics)
        self.batches_taken["local" if item.report_id is not None else "remote"] += 1
        with self._lock:
            if item.report_id is not None:
                self._pending.pop(item.report_id, None)
                _remember(self._acked, [item.report_id])
            _remember(self._trained, item.episode_ids)
        item.taken.set()
        if self._on_batch_taken is not None and item.report_id is None:
            self._on_batch_taken(list(item.episode_ids))
        return item.batch

    def pop_metrics(self) -> List[RolloutMetrics]:
        """The metrics of the episodes whose batches `next()` handed out since the last call."""
        out, self._metrics = self._metrics, []
        return out

    def close(self) -> None:
        """Stops serving (the worker calls it when it stops); answers already sent stand."""
        if not self._closed:
            self._closed = True
            self.server.stop()

    def _publish_weights(self) -> None:
        """Snapshots the worker's weights (in the thread that trains: never half-updated) for
        "local" clients and the embedded worker."""
        weights = self.worker.get_weights()
        timestep = max((p.global_timestep for p in self.worker.policy_map.values()), default=0)
        self._weights = encode_weights(weights, timestep)
        self._new_weights = (weights, timestep)

    # --- the embedded worker ("remote" inference) -----------------------------------------------
    def _env(self) -> ExternalEnv:
        with self._lock:
            if self._child_env is None:
                self._child_env = self._start_child()
        return self._child_env

    def _start_child(self) -> ExternalEnv:
        parent = self.worker
        if self.multi_agent:
            env: ExternalEnv = _ServedMultiAgent(max_concurrent=self.max_concurrent)
        else:
            (pid,) = list(parent.policy_map)
            env = _Served(parent.policy_map[pid].action_space, parent.preprocessors[pid].original_space,
                          max_concurrent=self.max_concurrent)
        config = dict(parent.config, input="sampler", output=None, num_envs_per_worker=1, sample_async=False,
                      remote_worker_envs=False)
        self._child = RolloutWorker(env_creator=lambda ctx: env, policy_class=parent.default_policy_class,
                                    config=config, worker_index=parent.worker_index, num_workers=parent.num_workers)
        threading.Thread(target=self._child_loop, name="PolicyServerInput-sampler", daemon=True).start()
        return env

    def _child_loop(self) -> None:
        child = self._child
        try:
            while True:
                update, self._new_weights = self._new_weights, None
                if update is not None:
                    child.set_weights(update[0], {"timestep": update[1]})
                batch = child.sample()
                self._queue.put(_Report(batch, child.get_metrics(), None, child.sampler.last_batch_episode_ids))
        except BaseException as exc:  # handed to the trainer by next()
            logger.exception("PolicyServerInput: the embedded sampler failed")
            self._queue.put(exc)

    # --- routes ---------------------------------------------------------------------------------
    def _health(self, body: Dict[str, Any]) -> Dict[str, Any]:
        return {"status": "ok", "worker_index": self.worker.worker_index, "server_id": self.server.server_id,
                "multi_agent": self.multi_agent}

    def _worker_spec(self, body: Dict[str, Any]) -> Dict[str, Any]:
        """What a "local" client needs to build its own worker: the config and each policy's spaces."""
        worker = self.worker
        config = {k: v for k, v in worker.config.items() if k not in ("input", "output", "env", "callbacks")}
        return {
            "config": encode(config),
            "policy_class": qualified_name(worker.default_policy_class),
            "policies": {pid: {"observation_space": encode(worker.preprocessors[pid].original_space),
                               "action_space": encode(policy.action_space),
                               "policy_class": qualified_name(type(policy))}
                         for pid, policy in worker.policy_map.items()},
            "multi_agent": self.multi_agent,
        }

    def _start_episode(self, body: Dict[str, Any]) -> Dict[str, Any]:
        eid = field(body, "episode_id", (str, type(None)), None)
        training_enabled = field(body, "training_enabled", (bool,), True)
        return {"episode_id": self._env().start_episode(eid, training_enabled)}

    def _get_action(self, body: Dict[str, Any]) -> Dict[str, Any]:
        eid = field(body, "episode_id", (str,))
        return {"action": plain(self._env().get_action(eid, as_arrays(field(body, "observation", (object,)))))}

    def _log_action(self, body: Dict[str, Any]) -> Dict[str, Any]:
        eid = field(body, "episode_id", (str,))
        self._env().log_action(eid, as_arrays(field(body, "observation", (object,))),
                               as_arrays(field(body, "action", (object,))))
        return {}

    def _log_returns(self, body: Dict[str, Any]) -> Dict[str, Any]:
        eid = field(body, "episode_id", (str,))
        info = field(body, "info", (dict, type(None)), None)
        self._env().log_returns(eid, field(body, "reward", (int, float, dict)), info)
        return {}

    def _end_episode(self, body: Dict[str, Any]) -> Dict[str, Any]:
        eid = field(body, "episode_id", (str,))
        truncated = field(body, "truncated", (bool,), False)
        asked = _episode_ids(body, "confirm")
        self._env().end_episode(eid, as_arrays(field(body, "observation", (object,))), truncated)
        # The server id tells the client which server holds the episode now (a restart loses it).
        return {"trained": self._trained_of(asked), "server_id": self.server.server_id}

    def _trained_episodes(self, body: Dict[str, Any]) -> Dict[str, Any]:
        return {"trained": self._trained_of(_episode_ids(body, "episode_ids"))}

    def _trained_of(self, ids: List[str]) -> List[str]:
        """The episodes among `ids` that training took (see the module docstring)."""
        with self._lock:
            return [i for i in ids if i in self._trained]

    def _report_samples(self, body: Dict[str, Any]) -> Dict[str, Any]:
        report_id = field(body, "report_id", (str, type(None)), None)
        with self._lock:
            if report_id is not None and report_id in self._acked:
                return {"taken": True}
            item = self._pending.get(report_id) if report_id is not None else None
        if item is None:
            batch = decode_batch(field(body, "batch", (dict,)), list(self.worker.policy_map), self.max_rows)
            metrics = decode_metrics(field(body, "metrics", (list,), []))
            item = _Report(batch, metrics, report_id or uuid.uuid4().hex)
            with self._lock:
                self._pending[item.report_id] = item
            self._queue.put(item)
        if not item.taken.wait(ACK_WAIT_S):
            raise WireError(f"report {item.report_id!r} is queued but training has not taken it yet; retry with "
                            "the same report_id", 503)
        return {"taken": True}


def _episode_ids(body: Dict[str, Any], name: str) -> List[str]:
    ids = field(body, name, (list,), [])
    if len(ids) > MAX_CONFIRM_IDS or not all(isinstance(i, str) for i in ids):
        raise WireError(f"field {name!r} must be a list of at most {MAX_CONFIRM_IDS} episode ids (strings)")
    return ids


def _remember(memory: "OrderedDict[str, None]", keys: Sequence[str]) -> None:
    """Adds `keys` to a bounded memory, forgetting the oldest beyond `_ACKED_MEMORY`."""
    for key in keys:
        memory[key] = None
    while len(memory) > _ACKED_MEMORY:
        memory.popitem(last=False)


__all__ = ["PolicyServerInput", "policy_server_input", "MAX_CONFIRM_IDS"]
