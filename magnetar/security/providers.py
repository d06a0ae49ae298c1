"""Authentication providers: credentials in, a role out.

Each provider has Pulsar's method name (what a client sends in CONNECT's
``auth_method_name`` and what ``authentication_providers`` lists):

- ``token``: ``auth_data`` is a JWT (:mod:`.tokens`); the role is its ``sub``
  claim; the credential expires with the token's ``exp``.
- ``basic``: ``auth_data`` is ``user:password`` checked against an htpasswd
  file (:mod:`.htpasswd`); the role is the user name.
- ``tls``: no ``auth_data``; the role is the common name (CN) of the client
  certificate the TLS handshake verified.

:meth:`authenticate` returns a :class:`Credential` or raises
:class:`~.errors.AuthenticationError` with a reason safe to show the client.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from typing import TYPE_CHECKING

from .errors import AuthenticationError

if TYPE_CHECKING:  # the token and htpasswd modules load their libraries only when configured
    from .tokens import TokenVerifier


@dataclass(frozen=True)
class Credential:
    """What a checked credential proved."""
    role: str
    method: str
    #: Seconds since the epoch after which it no longer holds; None: never.
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


@dataclass(frozen=True)
class PeerCertificate:
    """The verified client certificate of a TLS connection (as ``ssl.getpeercert()`` gives it)."""
    subject: tuple

    @property
    def common_name(self) -> str | None:
        for rdn in self.subject:
            for key, value in rdn:
                if key == "commonName":
                    return value
        return None


class Provider(Protocol):
    method: str

    def authenticate(self, data: bytes, peer: PeerCertificate | None) -> Credential: ...


class TokenProvider:
    method = "token"

    def __init__(self, verifier: TokenVerifier) -> None:
        self.verifier = verifier

    def authenticate(self, data: bytes, peer: PeerCertificate | None) -> Credential:
        if data.startswith(b"Bearer "):
            data = data[len(b"Bearer "):]
        claims = self.verifier.verify(data)
        return Credential(claims.role, self.method, claims.expires_at)


class BasicProvider:
    """Checks ``user:password``; remembers recent successes so reconnects skip bcrypt.

    The memory holds a keyed digest of the password (key made per process),
    never the password; it is dropped when the file is reloaded.
    """
    method = "basic"
    _REMEMBERED = 1024

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self._key = secrets.token_bytes(32)
        self._ok: OrderedDict[bytes, str] = OrderedDict()

    def authenticate(self, data: bytes, peer: PeerCertificate | None) -> Credential:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("basic credentials must be UTF-8 user:password") from None
        user, sep, password = text.partition(":")
        if not sep or not user:
            raise AuthenticationError("basic credentials must be user:password")
        digest = hmac.new(self._key, data, hashlib.sha256).digest()
        if self._ok.get(digest) == user:
            self._ok.move_to_end(digest)
            return Credential(user, self.method)
        from . import htpasswd

        htpasswd.check(self.users, user, password)
        self._ok[digest] = user
        if len(self._ok) > self._REMEMBERED:
            self._ok.popitem(last=False)
        return Credential(user, self.method)


class TlsProvider:
    method = "tls"

    def authenticate(self, data: bytes, peer: PeerCertificate | None) -> Credential:
        if peer is None:
            raise AuthenticationError("tls authentication needs a client certificate on a TLS connection")
        role = peer.common_name
        if not role:
            raise AuthenticationError("the client certificate has no common name (CN)")
        return Credential(role, self.method)
