"""A small threaded HTTP server for the policy servers (standard library only).

Routes are `(method, path) -> handler(body) -> answer`, where `body` is the decoded request
map (wire.py; `{}` for a GET) and the answer a map or `(bytes, content type)`. A map goes out
as JSON or msgpack, as the request's `Accept` header chooses (`response_format`):

| `Accept` header                                   | a POST's answer        | a GET's answer, every error |
| ------------------------------------------------- | ---------------------- | --------------------------- |
| names `application/msgpack` (or ranks it first)   | msgpack                | msgpack                     |
| names `application/json` (or ranks it first)      | JSON                   | JSON                        |
| none, `*/*`, or neither type (curl, a browser)    | the request body's format | JSON                     |

so `curl URL` reads plain JSON, and rlfleet's own client (http_client.py) asks for msgpack.
Before a handler runs, every request is checked, in this order, and refused with a 4xx whose
body `{"error": ...}` names the problem:

| check                                   | status |
| --------------------------------------- | ------ |
| unknown path / method                   | 404 / 405 |
| token missing or wrong (security.py)    | 401    |
| POST without Content-Length             | 411    |
| body over `max_body_bytes`              | 413    |
| pickled body, other content type        | 415    |
| malformed body, bad field, a handler's ValueError | 400 |

A handler's other exception is a 500 naming it (logged); the server goes on serving every
other request. Each connection is served by its own thread (HTTP/1.1 keep-alive).
"""
from __future__ import annotations

import logging
import socket
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional, Tuple

from rlfleet.serving.security import ServerSecurity
from rlfleet.serving.wire import JSON, MSGPACK, WireError, decode_body, encode_body

logger = logging.getLogger(__name__)

Handler = Callable[[Dict[str, Any]], Any]
SERVER_ID_HEADER = "X-Rlfleet-Server-Id"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024


class PolicyHTTPServer(ThreadingHTTPServer):
    """Serves `routes` on `(security.host, port)` (see the module docstring).

    Args:
        port: the TCP port (0: any free one; read `port` after).
        routes: `{(method, path): handler}`.
        security: the checked bind / token / TLS settings.
        max_body_bytes: the largest request body accepted.
        name: for logs and the thread's name.

    Attributes:
        server_id: a fresh id per server start (clients see a restart by it).
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *, port: int, routes: Dict[Tuple[str, str], Handler], security: ServerSecurity,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, name: str = "rlfleet-server"):
        self.routes = dict(routes)
        self.security = security
        self.max_body_bytes = int(max_body_bytes)
        self.server_id = uuid.uuid4().hex
        self.name = name
        if ":" in security.host:
            self.address_family = socket.AF_INET6
        super().__init__((security.host, int(port)), _RequestHandler)
        context = security.ssl_context()
        if context is not None:
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        host = self.security.host
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.security.tls else 'http'}://{host}:{self.port}"

    def start(self) -> "PolicyHTTPServer":
        """Serves in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request is routine (a killed simulator): one debug line."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            logger.debug("%s: %s from %s", self.name, error, client_address)
        else:
            super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the second waits for the
    # client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server: PolicyHTTPServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        logger.debug("%s: " + format, self.server.name, *args)

    def _serve(self, method: str) -> None:
        server = self.server
        asked = accepted_format(self.headers.get("Accept"))
        fmt = asked or JSON  # errors and GETs
        try:
            path = self.path.split("?", 1)[0]
            handler = server.routes.get((method, path))
            if handler is None:
                if any(p == path for _, p in server.routes):
                    raise WireError(f"{method} is not allowed on {path}", 405)
                raise WireError(f"no such endpoint {path!r}; endpoints: "
                                f"{sorted({p for _, p in server.routes})}", 404)
            if not server.security.token_ok(self.headers.get("Authorization")):
                raise WireError("missing or wrong token: send the header 'Authorization: Bearer <token>'", 401)
            body = self._read_body() if method == "POST" else {}
            answer = handler(body)
        except WireError as exc:
            self._reply(exc.status, {"error": str(exc)}, fmt)
            return
        except ValueError as exc:
            self._reply(400, {"error": str(exc)}, fmt)
            return
        except Exception as exc:  # the server stays up for everyone else
            logger.exception("%s: %s %s failed", server.name, method, self.path)
            self._reply(500, {"error": f"{type(exc).__name__}: {exc}"}, fmt)
            return
        if isinstance(answer, tuple):
            self._send(200, answer[0], answer[1])
        else:
            self._reply(200, answer, response_format(asked, method, self.headers.get("Content-Type")))

    def _read_body(self) -> Dict[str, Any]:
        length = self.headers.get("Content-Length")
        if length is None:
            raise WireError("a POST needs a Content-Length header", 411)
        try:
            size = int(length)
        except ValueError:
            raise WireError(f"Content-Length {length!r} is not a number") from None
        if size < 0 or size > self.server.max_body_bytes:
            raise WireError(f"the body has {size} bytes; this server accepts at most "
                            f"{self.server.max_body_bytes}", 413)
        body = self.rfile.read(size)
        if len(body) != size:
            raise WireError(f"the body ended after {len(body)} of its {size} bytes")
        return decode_body(body, self.headers.get("Content-Type") or "")

    def _reply(self, status: int, value: Dict[str, Any], fmt: str) -> None:
        data = encode_body(value, fmt)
        # A final newline, so that a shell prompt after `curl URL` starts on its own line.
        self._send(status, data + b"\n" if fmt == JSON else data, fmt)

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        if status >= 400:
            # The request's body may be unread (or half read): the connection cannot be reused.
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header(SERVER_ID_HEADER, self.server.server_id)
        self.send_header("Vary", "Accept")  # the same URL answers JSON or msgpack (caches must tell them apart)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)


def accepted_format(accept: Optional[str]) -> Optional[str]:
    """The body format an `Accept` header asks for: JSON or msgpack, whichever of the two it
    names with the higher q-value (the first named on a tie); None when it names neither
    (absent, `*/*`, `text/html`, ...). See RFC 9110, section 12.5.1."""
    best, best_q = None, 0.0
    for part in (accept or "").split(","):
        media, *params = [p.strip() for p in part.split(";")]
        media = media.lower()
        if media not in (JSON, MSGPACK):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > best_q:
            best, best_q = media, q
    return best


def response_format(asked: Optional[str], method: str, content_type: Optional[str]) -> str:
    """A successful answer's format: the one `Accept` asked for, else a POST's own body format,
    else JSON (see the module docstring)."""
    if asked is not None:
        return asked
    sent = (content_type or "").split(";")[0].strip().lower()
    return MSGPACK if method == "POST" and sent == MSGPACK else JSON


__all__ = ["PolicyHTTPServer", "accepted_format", "response_format", "SERVER_ID_HEADER", "DEFAULT_MAX_BODY_BYTES"]
