"""The client side of the wire: one keep-alive connection per thread, retries with backoff.

`call(path, body)` POSTs a map (GET without one) and returns the answer map (or raw bytes
for `application/octet-stream`). A server that cannot be reached (refused, reset, timed
out, 502-504 from a proxy) is retried with exponential backoff (`retry_delay_s`, doubled up to
`max_retry_delay_s`) until `retry_deadline_s` passes; a 4xx is the caller's mistake and raises
`ServerRefused` at once, with the server's message. `on_reconnect` is called with the new
server id whenever the answering server is not the one that answered before (it restarted).
"""
from __future__ import annotations

import http.client
import logging
import threading
import time
from typing import Any, Callable, Dict, Optional, Union
from urllib.parse import urlsplit

from rlfleet.serving.http_server import SERVER_ID_HEADER
from rlfleet.serving.security import client_ssl_context
from rlfleet.serving.wire import MSGPACK, OCTETS, WireError, decode_body, encode_body

logger = logging.getLogger(__name__)
_RETRY_STATUSES = frozenset({502, 503, 504})


class ServerRefused(ValueError):
    """The server answered a request with an error status (its message included)."""

    def __init__(self, status: int, message: str, path: str):
        super().__init__(f"{path}: {status} {message}")
        self.status = status
        self.message = message


class ServerUnreachable(ConnectionError):
    """No answer from the server before `retry_deadline_s` passed.

    Attributes:
        address: the server's address.
        last_failure: the last attempt's error, in words.
    """

    def __init__(self, message: str, *, address: str = "", last_failure: str = ""):
        super().__init__(message)
        self.address = address
        self.last_failure = last_failure


class HTTPClient:
    """Calls one server (see the module docstring).

    Args:
        address: `http://host:port` or `https://host:port`.
        token: sent as `Authorization: Bearer <token>` when set.
        tls_ca: the CA file that signed the server's certificate (https only; None: system roots).
        timeout_s: per request.
        retry_deadline_s: how long to keep retrying an unreachable server (0: never retry).
        retry_delay_s, max_retry_delay_s: the backoff.
    """

    def __init__(self, address: str, *, token: Optional[str] = None, tls_ca: Optional[str] = None,
                 timeout_s: float = 60.0, retry_deadline_s: float = 300.0, retry_delay_s: float = 0.1,
                 max_retry_delay_s: float = 5.0, on_reconnect: Optional[Callable[[str], None]] = None):
        parts = urlsplit(address)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
            raise ValueError(f"address {address!r} must look like http://127.0.0.1:9900 or https://host:port")
        self.address = address.rstrip("/")
        self._host, self._port, self._https = parts.hostname, parts.port, parts.scheme == "https"
        self._ssl = client_ssl_context(self.address, tls_ca)
        # Asks for msgpack explicitly: a server answers JSON to a request that names no format.
        self._headers = {"Content-Type": MSGPACK, "Accept": MSGPACK}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self.timeout_s = timeout_s
        self.retry_deadline_s = retry_deadline_s
        self.retry_delay_s = retry_delay_s
        self.max_retry_delay_s = max_retry_delay_s
        self.on_reconnect = on_reconnect
        self.server_id: Optional[str] = None
        self._local = threading.local()
        self._id_lock = threading.Lock()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout_s, context=self._ssl)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def call(self, path: str, body: Optional[Dict[str, Any]] = None) -> Union[Dict[str, Any], bytes]:
        """POSTs `body` to `path` (GET when None); the answer (see the module docstring)."""
        data = encode_body(body) if body is not None else None
        method = "GET" if body is None else "POST"
        deadline = time.monotonic() + self.retry_deadline_s
        delay = self.retry_delay_s
        while True:
            try:
                return self._once(method, path, data)
            except (OSError, http.client.HTTPException, _Retry) as exc:
                self._drop_connection()
                if time.monotonic() + delay > deadline:
                    failure = f"{type(exc).__name__}: {exc}"
                    raise ServerUnreachable(f"{self.address}{path}: no answer within retry_deadline_s="
                                            f"{self.retry_deadline_s} s (last failure: {failure})",
                                            address=self.address, last_failure=failure) from None
                logger.debug("%s%s: %s; retrying in %.2f s", self.address, path, exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, self.max_retry_delay_s)

    def _once(self, method: str, path: str, data: Optional[bytes]) -> Union[Dict[str, Any], bytes]:
        conn = self._connection()
        conn.request(method, path, body=data, headers=self._headers)
        response = conn.getresponse()
        payload = response.read()
        if response.status in _RETRY_STATUSES:
            raise _Retry(f"status {response.status}")
        self._note_server(response.getheader(SERVER_ID_HEADER))
        content_type = response.getheader("Content-Type") or ""
        if response.status >= 400:
            try:
                message = decode_body(payload, content_type).get("error", "")
            except WireError:
                message = payload[:200].decode("utf-8", "replace")
            if response.getheader("Connection", "").lower() == "close":
                self._drop_connection()
            raise ServerRefused(response.status, message, path)
        if content_type.startswith(OCTETS):
            return payload
        return decode_body(payload, content_type)

    def _note_server(self, server_id: Optional[str]) -> None:
        if server_id is None:
            return
        with self._id_lock:
            previous, self.server_id = self.server_id, server_id
        if previous is not None and previous != server_id and self.on_reconnect is not None:
            self.on_reconnect(server_id)

    def close(self) -> None:
        self._drop_connection()


class _Retry(Exception):
    """A status that means "try again" (a proxy in front of a restarting server)."""


__all__ = ["HTTPClient", "ServerRefused", "ServerUnreachable"]
