"""Authentication of one binary-protocol connection, as a state machine.

No sockets and no clocks of its own: the connection shell feeds it CONNECT
and AUTH_RESPONSE contents and periodic ticks (with the time), and does what
the returned value says. States::

    AWAITING_CONNECT --connect ok--> AUTHENTICATED --tick, expired--> CHALLENGED
          |                            ^   |                             |
          |                            |   +--tick, expired, client      |
          |                            |      cannot refresh --> CLOSED  |
          |                            +------- auth_response ok --------+
          +--connect refused--> CLOSED        (same role)        |
                                                 auth_response refused, role
                                                 changed, or next tick --> CLOSED

Pulsar's rules kept here: a refused credential closes the connection after
an ``AuthenticationError``; an expired credential is challenged with
``AUTH_CHALLENGE`` carrying :data:`REFRESH_AUTH_DATA` when the client
announced ``supports_auth_refresh``, and the connection is closed otherwise;
a challenge not answered by the next check closes it; a refresh may not
change the role.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .authentication import Authenticator
from .errors import AuthenticationError
from .providers import Credential, PeerCertificate

#: The challenge payload that asks a client for a fresh credential.
REFRESH_AUTH_DATA = b"PulsarAuthRefresh"


class AuthState(enum.Enum):
    AWAITING_CONNECT = "awaiting-connect"
    AUTHENTICATED = "authenticated"
    CHALLENGED = "challenged"
    CLOSED = "closed"


@dataclass(frozen=True)
class Accept:
    """Go on: the connection's role is ``role`` (None: anonymous, no role)."""
    role: str | None


@dataclass(frozen=True)
class Refuse:
    """Send AuthenticationError with ``reason``, then close the connection."""
    reason: str


@dataclass(frozen=True)
class Challenge:
    """Send AUTH_CHALLENGE(method, REFRESH_AUTH_DATA)."""
    method: str
    data: bytes = REFRESH_AUTH_DATA


@dataclass(frozen=True)
class Close:
    """Close the connection (no answer is owed); ``reason`` is for the log."""
    reason: str


class ConnectionAuth:
    def __init__(self, authenticator: Authenticator, peer: PeerCertificate | None = None) -> None:
        self.authenticator = authenticator
        self.peer = peer
        self.state = AuthState.AWAITING_CONNECT
        self.credential: Credential | None = None
        self.supports_refresh = False

    @property
    def role(self) -> str | None:
        return self.credential.role if self.credential is not None else None

    def connect(self, method: str, data: bytes, supports_refresh: bool) -> Accept | Refuse:
        """The client's CONNECT (``auth_method_name``, ``auth_data``, feature flag)."""
        if self.state is not AuthState.AWAITING_CONNECT:
            return self._refuse("CONNECT sent twice")
        self.supports_refresh = supports_refresh
        try:
            self.credential = self.authenticator.authenticate(method, data, self.peer)
        except AuthenticationError as exc:
            return self._refuse(str(exc))
        self.state = AuthState.AUTHENTICATED
        return Accept(self.role)

    def tick(self, now: float) -> Challenge | Close | None:
        """A periodic check at wall-clock ``now``: what to do about expiry."""
        if self.state is AuthState.CHALLENGED:
            self.state = AuthState.CLOSED
            return Close("the client did not answer the authentication refresh challenge in time")
        if self.state is not AuthState.AUTHENTICATED or self.credential is None:
            return None
        if not self.credential.expired(now):
            return None
        if not self.supports_refresh:
            self.state = AuthState.CLOSED
            return Close("the credential expired and the client does not support authentication refresh")
        self.state = AuthState.CHALLENGED
        return Challenge(self.credential.method)

    def auth_response(self, method: str, data: bytes) -> Accept | Refuse:
        """The client's AUTH_RESPONSE to a challenge."""
        if self.state is not AuthState.CHALLENGED:
            return self._refuse("AUTH_RESPONSE without a challenge")
        previous = self.credential
        try:
            fresh = self.authenticator.authenticate(method or previous.method, data, self.peer)
        except AuthenticationError as exc:
            return self._refuse(f"refreshed credential refused: {exc}")
        if fresh is None or fresh.role != previous.role:
            return self._refuse("the role may not change when a credential is refreshed")
        self.credential = fresh
        self.state = AuthState.AUTHENTICATED
        return Accept(fresh.role)

    def _refuse(self, reason: str) -> Refuse:
        self.state = AuthState.CLOSED
        return Refuse(reason)
