"""Credentials the client presents: what the official client's
``AuthenticationToken`` and ``AuthenticationBasic`` send.

An authentication object names its method and produces its data; the data
is asked for again when the broker challenges an expiring credential
(AUTH_CHALLENGE), so a token given as a callable or a file is re-read then.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable


class Authentication:
    """No credential (the broker's anonymous role, if any)."""

    method = "none"

    def data(self) -> bytes:
        return b""


class AuthenticationToken(Authentication):
    """A JWT: a string, a callable returning one, or ``file:///path`` (re-read
    at each challenge)."""

    method = "token"

    def __init__(self, token: str | Callable[[], str]) -> None:
        if not token:
            raise ValueError("AuthenticationToken needs a token")
        self._token = token

    def data(self) -> bytes:
        token = self._token
        if callable(token):
            token = token()
        elif token.startswith("file://"):
            token = Path(token[len("file://"):]).read_text()
        return token.strip().encode()


class AuthenticationBasic(Authentication):
    method = "basic"

    def __init__(self, username: str, password: str) -> None:
        if not username or ":" in username:
            raise ValueError("AuthenticationBasic needs a user name without ':'")
        self._data = f"{username}:{password}".encode()

    def data(self) -> bytes:
        return self._data


def from_broker_client_settings(plugin: str, parameters: str) -> Authentication:
    """Pulsar's ``brokerClientAuthenticationPlugin`` / ``...Parameters`` pair:
    ``token`` (or Pulsar's AuthenticationToken class name) with ``token:<jwt>``
    or ``file:///path``; ``basic`` with ``user:password``. ValueError otherwise."""
    kind = plugin.rsplit(".", 1)[-1].lower()
    if not plugin:
        return Authentication()
    if kind in ("token", "authenticationtoken"):
        value = parameters.strip()
        if value.startswith("token:"):
            value = value[len("token:"):]
        return AuthenticationToken(value)
    if kind in ("basic", "authenticationbasic"):
        user, sep, password = parameters.partition(":")
        if not sep:
            raise ValueError("basic broker client parameters must be user:password")
        return AuthenticationBasic(user, password)
    raise ValueError(f"broker client authentication plugin {plugin!r} is not supported: use token or basic")
