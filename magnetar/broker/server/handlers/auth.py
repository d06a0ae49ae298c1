"""Authentication of a binary-protocol connection: CONNECT's credential,
AUTH_CHALLENGE / AUTH_RESPONSE when it expires.

The state machine is :class:`magnetar.security.connection_auth.ConnectionAuth`
(no I/O); this module does what it says. With authentication off (the
default) nothing here runs. Failure modes, as in Pulsar: a wrong, expired or
missing credential gets ERROR(AuthenticationError) and the connection is
closed before it can reach a topic; a client that cannot refresh an expired
credential, or does not answer the challenge by the next check, is
disconnected.
"""
from __future__ import annotations

import asyncio
import logging
import time

from magnetar.protocol import ServerError, pb
from magnetar.protocol.commands import Type, command, error
from magnetar.protocol.frames import Frame
from magnetar.security.connection_auth import Accept, Challenge, Close, ConnectionAuth, Refuse

from .session import UINT64_MAX, ClientSession

log = logging.getLogger(__name__)


def on_connect(session: ClientSession, frame: Frame) -> bool:
    """Check CONNECT's credential; True if the connection may go on."""
    authenticator = session.service.authenticator
    if authenticator is None or not authenticator.enabled:
        return True
    req = frame.command.connect
    auth = ConnectionAuth(authenticator, getattr(session, "peer_certificate", None))
    session.auth = auth
    refresh = req.HasField("feature_flags") and req.feature_flags.supports_auth_refresh
    outcome = auth.connect(req.auth_method_name or "", bytes(req.auth_data), refresh)
    if isinstance(outcome, Refuse):
        _refuse(session, outcome.reason)
        return False
    session.role = outcome.role
    session.spawn(_check_expiry(session, auth))
    return True


def on_auth_response(session: ClientSession, frame: Frame) -> None:
    auth = getattr(session, "auth", None)
    if auth is None:
        return  # authentication is off: nothing was asked
    resp = frame.command.authResponse
    outcome = auth.auth_response(resp.response.auth_method_name, bytes(resp.response.auth_data))
    if isinstance(outcome, Refuse):
        _refuse(session, outcome.reason)
    elif isinstance(outcome, Accept):
        log.info("connection from %s refreshed its credential (role %s)", session.peer, outcome.role)


async def _check_expiry(session: ClientSession, auth: ConnectionAuth) -> None:
    interval = session.config.auth_refresh_check_interval_s
    while True:
        await asyncio.sleep(interval)
        action = auth.tick(time.time())
        if isinstance(action, Challenge):
            session.write(command(Type.AUTH_CHALLENGE, server_version="Magnetar", protocol_version=20,
                                  challenge=pb.AuthData(auth_method_name=action.method, auth_data=action.data)))
        elif isinstance(action, Close):
            log.info("closing connection from %s: %s", session.peer, action.reason)
            session.close()
            return


def _refuse(session: ClientSession, reason: str) -> None:
    log.info("refusing connection from %s: %s", session.peer, reason)
    session.write(error(UINT64_MAX, ServerError.AuthenticationError, reason))
    session.close()
