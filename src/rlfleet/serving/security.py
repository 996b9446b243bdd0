"""Who may talk to a server: the bind rule, the token and TLS (one place for every server).

| bind host                                  | token                        |
| ------------------------------------------ | ---------------------------- |
| exactly `127.0.0.1`, `localhost` or `::1`  | optional (checked when set)  |
| anything else (`0.0.0.0`, `127.0.0.2`, ..) | required: no token, no server |

A token is a string of `TOKEN_MIN_LENGTH` (16) or more characters, given as the server's
`token=` keyword (`rlfleet serve --token`) or the `RLFLEET_SERVER_TOKEN` environment variable.
Errors name the setting as the caller spells it (`SettingNames`: Python keywords by
default, `CLI_NAMES` for `rlfleet serve`'s flags). A client sends the token as
`Authorization: Bearer <token>`; a missing or wrong one is answered 401 (compared in
constant time). TLS is on when both a certificate and its key are
given (PEM files); the client then connects with `https://` and checks the certificate
against `tls_ca` (or the system's roots).
"""
from __future__ import annotations

import hmac
import os
import ssl
from dataclasses import dataclass
from typing import Optional

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_ENV_VAR = "RLFLEET_SERVER_TOKEN"
TOKEN_MIN_LENGTH = 16  # 16 random characters: far beyond guessing over a network
TOKEN_EXAMPLE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


@dataclass(frozen=True)
class SettingNames:
    """How errors name the security settings: as the caller's user spells them."""

    token: str = "token=..."
    tls_cert: str = "tls_cert"
    tls_key: str = "tls_key"


PYTHON_NAMES = SettingNames()
CLI_NAMES = SettingNames(token="--token TOKEN", tls_cert="--tls-cert", tls_key="--tls-key")


@dataclass(frozen=True)
class ServerSecurity:
    """The checked security settings of one server.

    Attributes:
        host: the address it binds.
        token: the shared secret clients must send (None: none asked, loopback only).
        tls_cert, tls_key: PEM files; TLS is on when both are set.
    """

    host: str
    token: Optional[str] = None
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None

    @classmethod
    def checked(cls, host: str, token: Optional[str] = None, tls_cert: Optional[str] = None,
                tls_key: Optional[str] = None, *, what: str = "the server",
                names: SettingNames = PYTHON_NAMES) -> "ServerSecurity":
        """The settings, after the bind rule (see the module docstring) and file checks.

        Args:
            names: how the errors name the settings (`CLI_NAMES` for a command line).

        Raises:
            ValueError: naming the setting and the fix.
        """
        if not isinstance(host, str) or not host:
            raise ValueError(f"{what}: address {host!r} must be a host name or IP address")
        if token is not None and (not isinstance(token, str) or len(token) < TOKEN_MIN_LENGTH):
            got = f"{len(token)} characters" if isinstance(token, str) else f"a {type(token).__name__}"
            raise ValueError(f"{what}: the token ({names.token} or ${TOKEN_ENV_VAR}) must be a string of "
                             f"{TOKEN_MIN_LENGTH} or more characters, got {got}; make one with {TOKEN_EXAMPLE}")
        if host not in LOOPBACK_HOSTS and token is None:
            raise ValueError(f"{what}: binding {host!r} needs a token (anyone who can reach it could act as "
                             f"your simulator or read your policy): pass {names.token} with a secret of "
                             f"{TOKEN_MIN_LENGTH} or more characters (make one with {TOKEN_EXAMPLE}) or set "
                             f"${TOKEN_ENV_VAR}; or bind one of {sorted(LOOPBACK_HOSTS)}")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError(f"{what}: TLS needs both {names.tls_cert} and {names.tls_key} (PEM files); got only "
                             f"{names.tls_cert if tls_key is None else names.tls_key}")
        for name, path in ((names.tls_cert, tls_cert), (names.tls_key, tls_key)):
            if path is not None and not os.path.isfile(path):
                raise ValueError(f"{what}: {name} {path!r} is not a file")
        return cls(host, token, tls_cert, tls_key)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    def ssl_context(self) -> Optional[ssl.SSLContext]:
        if not self.tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.tls_cert, self.tls_key)
        return context

    def token_ok(self, authorization: Optional[str]) -> bool:
        """Whether an `Authorization` header carries the token (always True without one)."""
        if self.token is None:
            return True
        scheme, _, given = (authorization or "").partition(" ")
        return scheme == "Bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())


def token_from_env(token: Optional[str]) -> Optional[str]:
    """`token`, else the `RLFLEET_SERVER_TOKEN` environment variable, else None."""
    return token if token is not None else (os.environ.get(TOKEN_ENV_VAR) or None)


def client_ssl_context(url: str, tls_ca: Optional[str]) -> Optional[ssl.SSLContext]:
    """The client's TLS context for an `https://` address (None for `http://`)."""
    if not url.startswith("https://"):
        return None
    return ssl.create_default_context(cafile=tls_ca)
