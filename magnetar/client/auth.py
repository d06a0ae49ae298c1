"""Credentials the client presents: what the official client's
``AuthenticationToken``, ``AuthenticationBasic`` and ``AuthenticationTLS`` send.

An authentication object names its method and produces its data; the data
is asked for again when the broker challenges an expiring credential
(AUTH_CHALLENGE), so a token given as a callable or a file is re-read then.
``AuthenticationTLS`` sends no data: its certificate is presented in the TLS
handshake (the client puts it in its TLS context), and the broker takes the
certificate's common name as the role.
"""
from __future__ import annotations

import json
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


class AuthenticationTLS(Authentication):
    """A client certificate and its private key (PEM files), like
    ``pulsar.AuthenticationTLS(certificate_path, private_key_path)``.

    Only meaningful on ``pulsar+ssl://``: on a plain connection the broker
    sees no certificate and refuses the CONNECT (AuthenticationError). The
    files are read when the client builds its TLS context; a missing or
    unusable file makes the client's constructor raise InvalidConfiguration.
    """

    method = "tls"

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        if not certificate_path or not private_key_path:
            raise ValueError("AuthenticationTLS needs a certificate file and a private key file")
        self.certificate_path = str(certificate_path)
        self.private_key_path = str(private_key_path)

    def data(self) -> bytes:
        return b""


def _tls_parameters(parameters: str) -> AuthenticationTLS:
    """Pulsar's AuthenticationTls parameters: ``tlsCertFile:/path,tlsKeyFile:/path``
    (the JSON form ``{"tlsCertFile": ..., "tlsKeyFile": ...}`` too)."""
    text = parameters.strip()
    if text.startswith("{"):
        try:
            values = {str(k): str(v) for k, v in json.loads(text).items()}
        except (ValueError, AttributeError):
            raise ValueError("tls broker client parameters: malformed JSON") from None
    else:
        values = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, value = item.partition(":")
            if not sep:
                raise ValueError(f"tls broker client parameters: {item!r} is not key:value")
            values[key.strip()] = value.strip()
    cert, key = values.get("tlsCertFile", ""), values.get("tlsKeyFile", "")
    if not cert or not key:
        raise ValueError("tls broker client parameters must be tlsCertFile:/path/cert.pem,tlsKeyFile:/path/key.pem")
    return AuthenticationTLS(cert, key)


def from_broker_client_settings(plugin: str, parameters: str) -> Authentication:
    """Pulsar's ``brokerClientAuthenticationPlugin`` / ``...Parameters`` pair:
    ``token`` (or Pulsar's AuthenticationToken class name) with ``token:<jwt>``
    or ``file:///path``; ``basic`` with ``user:password``; ``tls`` (or
    AuthenticationTls) with ``tlsCertFile:/path,tlsKeyFile:/path``. ValueError
    otherwise."""
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
    if kind in ("tls", "authenticationtls"):
        return _tls_parameters(parameters)
    raise ValueError(f"broker client authentication plugin {plugin!r} is not supported: use token, basic or tls")
