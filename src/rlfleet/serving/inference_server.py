"""InferenceServer (`rlfleet serve CHECKPOINT`): actions of a trained policy over HTTP, nothing learned.

| endpoint                    | body → answer                                                     |
| --------------------------- | ----------------------------------------------------------------- |
| `GET /v1/health`            | → `{"status": "ok", "algorithm", "policies": {id: {"recurrent", "state_shapes"}}}` |
| `POST /v1/compute_actions`  | `{"observations": [obs, ...], "policy_id"?, "explore"? (default false), "state"? ([[row state tensors], ...] per row), "prev_actions"?, "prev_rewards"?}` → `{"actions": [...], "state_out": [[...], ...]}` (`state_out` for recurrent policies) |

The checkpoint is restored with `Trainer.from_checkpoint` and its trust rules (classes
re-imported from rlfleet, gymnasium, your imported code and `trusted_modules` only; nothing
unpickled). Observations go through the policy's preprocessor and filter (the filter's
statistics frozen), actions come back as the env takes them (unsquashed / clipped as in
training). Concurrent requests for the same policy and explore setting are batched: one
thread takes every request that arrives within `batch_wait_ms` of the first (up to
`max_batch` rows; it waits only while other requests are on their way, so a lone client
pays no wait) and answers them with one forward pass. A request of more than `max_batch`
rows is served in chunks of `max_batch`, one forward pass each; one of more than
`max_request_rows` (default 4096) is refused (413) naming that limit. The bind / token / TLS
rules are those of every rlfleet server (serving/security.py); bad requests are 4xx naming the
problem in terms the HTTP client can act on. Answers are JSON or msgpack as the request's
`Accept` header chooses (serving/http_server.py).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from rlfleet.env.checks import observation_problem
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.serving.http_server import DEFAULT_MAX_BODY_BYTES, PolicyHTTPServer
from rlfleet.serving.security import ServerSecurity, token_from_env
from rlfleet.serving.wire import WireError, as_arrays, field, plain
from rlfleet.utils.spaces import env_actions

logger = logging.getLogger(__name__)
DEFAULT_MAX_BATCH = 256
# 16 forward passes of the default max_batch: a client sending more holds the batching thread
# (and so every other client) that long; it should split its requests.
DEFAULT_MAX_REQUEST_ROWS = 4096
# What an observation outside its Box's bounds is told: the server cannot widen the policy's
# space, and training advice (disable_env_checking) means nothing to an HTTP client.
_BOUNDS_FIX = ("This server takes observations inside the observation space the policy was trained on: send "
               "the value as the env returns it, clipped into that range if your env can leave it")


class _Request:
    """One compute_actions call waiting for its rows of a batched forward pass."""

    __slots__ = ("policy_id", "explore", "obs", "state", "prev_actions", "prev_rewards", "done", "result", "error")

    def __init__(self, policy_id: str, explore: bool, obs: np.ndarray, state: Optional[List[np.ndarray]],
                 prev_actions: Optional[np.ndarray], prev_rewards: Optional[np.ndarray]):
        self.policy_id, self.explore, self.obs, self.state = policy_id, explore, obs, state
        self.prev_actions, self.prev_rewards = prev_actions, prev_rewards
        self.done = threading.Event()
        self.result: Optional[Dict[str, Any]] = None
        self.error: Optional[BaseException] = None


class InferenceServer:
    """Serves a restored trainer's policies (see the module docstring).

    Args:
        trainer: the restored trainer (its local worker's policies act).
        address, port: where to listen (port 0: any free one).
        token: the clients' shared secret (default: RLFLEET_SERVER_TOKEN); needed off loopback.
        tls_cert, tls_key: PEM files: serve HTTPS.
        max_batch: most rows in one forward pass (a longer request is served in chunks).
        max_request_rows: most rows in one request (more are refused, naming this limit).
        batch_wait_ms: how long the first request of a batch waits for others.
        max_body_bytes: the largest request accepted.
    """

    def __init__(self, trainer, *, address: str = "127.0.0.1", port: int = 8000, token: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None, max_batch: int = DEFAULT_MAX_BATCH,
                 max_request_rows: int = DEFAULT_MAX_REQUEST_ROWS, batch_wait_ms: float = 2.0,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        if int(max_batch) < 1 or int(max_request_rows) < 1 or batch_wait_ms < 0:
            raise ValueError(f"InferenceServer: max_batch={max_batch!r} and max_request_rows={max_request_rows!r} "
                             f"must be >= 1 and batch_wait_ms={batch_wait_ms!r} >= 0")
        security = ServerSecurity.checked(address, token_from_env(token), tls_cert, tls_key, what="rlfleet serve")
        self.trainer = trainer
        self.worker = trainer.workers.local_worker()
        self.max_batch = int(max_batch)
        self.max_request_rows = int(max_request_rows)
        self.batch_wait_s = float(batch_wait_ms) / 1000.0
        self.batches_run = 0  # forward passes so far (what batching saves shows here)
        self.checkpoint_path: Optional[str] = None  # where the trainer was restored from (serve_checkpoint)
        self._queue: "queue.Queue[_Request]" = queue.Queue()
        self._held: Optional[_Request] = None  # taken from the queue, too many rows for the batch it came to
        # Requests inside compute_actions: a batch waits for more only while others are on their way.
        self._waiting = 0
        self._waiting_lock = threading.Lock()
        routes = {("GET", "/v1/health"): self._health, ("POST", "/v1/compute_actions"): self._compute_actions}
        self.server = PolicyHTTPServer(port=port, routes=routes, security=security, max_body_bytes=max_body_bytes,
                                       name="rlfleet-serve")
        threading.Thread(target=self._batch_loop, name="rlfleet-serve-batcher", daemon=True).start()

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> "InferenceServer":
        self.server.start()
        return self

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def stop(self) -> None:
        self.server.stop()

    # --- routes -------------------------------------------------------------------------------
    def _health(self, body: Dict[str, Any]) -> Dict[str, Any]:
        policies = {}
        for pid, policy in self.worker.policy_map.items():
            state = policy.get_initial_state()
            policies[pid] = {"recurrent": policy.is_recurrent(), "state_shapes": [list(s.shape) for s in state]}
        return {"status": "ok", "algorithm": self.trainer._name, "policies": policies}  # as `--run` names it

    def _compute_actions(self, body: Dict[str, Any]) -> Dict[str, Any]:
        pid = field(body, "policy_id", (str,), DEFAULT_POLICY_ID)
        if pid not in self.worker.policy_map:
            raise WireError(f"unknown policy_id {pid!r}; this checkpoint's policies: {sorted(self.worker.policy_map)}")
        explore = field(body, "explore", (bool,), False)
        raw = field(body, "observations", (list, np.ndarray))
        if not raw:
            raise WireError("'observations' holds 0 rows; send a list of one or more observations")
        if len(raw) > self.max_request_rows:
            raise WireError(f"'observations' holds {len(raw)} rows; this server answers at most "
                            f"{self.max_request_rows} per request (max_request_rows, `rlfleet serve "
                            "--max-request-rows`): split them into several requests", 413)
        policy = self.worker.policy_map[pid]
        obs = self._preprocessed(pid, raw)
        state = self._state(policy, body.get("state"), len(obs))
        prev_actions = _optional_rows(body, "prev_actions", len(obs))
        prev_rewards = _optional_rows(body, "prev_rewards", len(obs))
        # More rows than one forward pass takes: chunks of max_batch, batched like separate requests.
        chunks = [_Request(pid, explore, obs[i:i + self.max_batch], _rows(state, i, self.max_batch),
                           _rows(prev_actions, i, self.max_batch), _rows(prev_rewards, i, self.max_batch))
                  for i in range(0, len(obs), self.max_batch)]
        with self._waiting_lock:
            self._waiting += len(chunks)
        try:
            for chunk in chunks:
                self._queue.put(chunk)
            for chunk in chunks:
                chunk.done.wait()
        finally:
            with self._waiting_lock:
                self._waiting -= len(chunks)
        for chunk in chunks:
            if chunk.error is not None:
                raise chunk.error
        result = dict(chunks[0].result)
        for chunk in chunks[1:]:
            for key, rows in chunk.result.items():
                result[key] = result[key] + rows
        return result

    def _preprocessed(self, pid: str, raw: Sequence[Any]) -> np.ndarray:
        pp, filt = self.worker.preprocessors[pid], self.worker.filters[pid]
        rows = []
        for i, o in enumerate(raw):
            o = as_arrays(o)
            problem = observation_problem(o, pp.original_space, where=f"observations[{i}]", bounds_fix=_BOUNDS_FIX)
            if problem is not None:
                raise WireError(problem)
            rows.append(filt(pp.transform(o), update=False))
        return np.stack(rows)

    def _state(self, policy, given: Any, rows: int) -> Optional[List[np.ndarray]]:
        """The state going in: per tensor `[rows, ...]` (the initial state where none is sent)."""
        initial = policy.get_initial_state()
        if not initial:
            if given is not None:
                raise WireError("this policy is not recurrent: send no 'state'")
            return None
        if given is None:
            return [np.repeat(s[None], rows, axis=0) for s in initial]
        if not isinstance(given, list) or len(given) != rows:
            raise WireError(f"'state' must hold one entry per observation ({rows}), each a list of "
                            f"{len(initial)} arrays shaped {[list(s.shape) for s in initial]}")
        out = []
        for k, s in enumerate(initial):
            try:
                column = np.asarray([np.asarray(row[k], np.float32) for row in given], np.float32)
            except (TypeError, ValueError, IndexError):
                column = None
            if column is None or column.shape[1:] != s.shape or not np.isfinite(column).all():
                raise WireError(f"'state' tensor {k} must be finite numbers shaped {list(s.shape)} per row")
            out.append(column)
        return out

    # --- batching -----------------------------------------------------------------------------
    def _batch_loop(self) -> None:
        while True:
            first, self._held = self._held or self._queue.get(), None
            batch = [first]
            rows = len(first.obs)
            deadline = time.monotonic() + self.batch_wait_s
            while rows < self.max_batch and len(batch) < self._waiting:
                timeout = deadline - time.monotonic()
                try:
                    nxt = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if rows + len(nxt.obs) > self.max_batch:
                    self._held = nxt  # it starts the next batch: no forward pass above max_batch rows
                    break
                batch.append(nxt)
                rows += len(nxt.obs)
            groups: Dict[tuple, List[_Request]] = {}
            for request in batch:
                groups.setdefault((request.policy_id, request.explore), []).append(request)
            for group in groups.values():
                self._run(group)

    def _run(self, group: List[_Request]) -> None:
        try:
            policy = self.worker.policy_map[group[0].policy_id]
            obs = np.concatenate([r.obs for r in group])
            state = None
            if group[0].state is not None:
                state = [np.concatenate([r.state[k] for r in group]) for k in range(len(group[0].state))]
            lengths = [len(r.obs) for r in group]
            prev_actions = _joined([r.prev_actions for r in group], lengths)
            prev_rewards = _joined([r.prev_rewards for r in group], lengths)
            actions, state_out, _ = policy.compute_actions(obs, state, prev_actions, prev_rewards,
                                                           explore=group[0].explore)
            cfg = policy.config
            to_env = env_actions(actions, policy.action_space, bool(cfg.get("normalize_actions", True)),
                                 bool(cfg.get("clip_actions", False)))
            self.batches_run += 1
            start = 0
            for r in group:
                end = start + len(r.obs)
                result: Dict[str, Any] = {"actions": [plain(_row(to_env, j)) for j in range(start, end)]}
                if state_out:
                    result["state_out"] = [[s[j].tolist() for s in state_out] for j in range(start, end)]
                r.result = result
                start = end
        except BaseException as exc:  # each caller answers 500 with it; the loop goes on
            logger.exception("rlfleet serve: a batch failed")
            for r in group:
                r.error = exc
        finally:
            for r in group:
                r.done.set()


def _row(actions: Any, j: int) -> Any:
    """Row j of env actions (an array, or a tuple / dict of arrays for nested action spaces)."""
    if isinstance(actions, dict):
        return {k: _row(v, j) for k, v in actions.items()}
    if isinstance(actions, tuple):
        return [_row(v, j) for v in actions]
    value = actions[j]
    return value.tolist() if isinstance(value, np.ndarray) else value


def _rows(column: Any, start: int, count: int) -> Any:
    """Rows start..start+count of a request's column (a list of per-tensor arrays for the state;
    None stays None)."""
    if column is None:
        return None
    if isinstance(column, list):
        return [c[start:start + count] for c in column]
    return column[start:start + count]


def _optional_rows(body: Dict[str, Any], name: str, rows: int) -> Optional[np.ndarray]:
    if name not in body or body[name] is None:
        return None
    arr = np.asarray(as_arrays(body[name]))
    if arr.dtype.kind not in "biuf" or len(arr) != rows or not np.isfinite(arr).all():
        raise WireError(f"{name!r} must hold one finite number (or action) per observation ({rows})")
    return arr


def _joined(parts: List[Optional[np.ndarray]], lengths: List[int]) -> Optional[np.ndarray]:
    """The batch's column: None when no request sent it; zeros for the requests that did not."""
    if all(p is None for p in parts):
        return None
    template = next(p for p in parts if p is not None)
    return np.concatenate([p if p is not None else np.zeros((n,) + template.shape[1:], template.dtype)
                           for p, n in zip(parts, lengths)])


def serve_checkpoint(checkpoint_path: str, *, trusted_modules: Optional[Sequence[str]] = None,
                     **server_kwargs: Any) -> InferenceServer:
    """Restores `checkpoint_path` (`Trainer.from_checkpoint`, its trust rules) and returns an
    InferenceServer on it (not yet started)."""
    import tempfile

    from rlfleet.trainer.evaluate_checkpoint import _NoLogger
    from rlfleet.trainer import Trainer

    overrides = {"num_workers": 0, "evaluation_interval": None, "evaluation_num_workers": 0, "input": "sampler",
                 "output": None}
    trainer = Trainer.from_checkpoint(checkpoint_path, overrides, trusted_modules=trusted_modules,
                                      logdir=tempfile.mkdtemp(prefix="rlfleet-serve-"),
                                      logger_creator=lambda cfg: _NoLogger())
    server = InferenceServer(trainer, **server_kwargs)
    server.checkpoint_path = checkpoint_path
    return server


__all__ = ["InferenceServer", "serve_checkpoint", "DEFAULT_MAX_BATCH", "DEFAULT_MAX_REQUEST_ROWS"]
