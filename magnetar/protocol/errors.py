"""Errors of the protocol layer, and the ServerError codes of the wire.

:class:`ProtocolError` is the one exception the codec raises for bytes it
cannot accept (garbage, truncation beyond a frame boundary, an oversized
frame, a required field missing). A connection that sees it has lost framing
and must be closed; the broker logs the message as the reason.
"""
from __future__ import annotations

from . import magnetar_api_pb2 as pb

ServerError = pb.ServerError


class ProtocolError(Exception):
    """The peer sent bytes that break the protocol; close the connection."""


class FrameTooLarge(ProtocolError):
    """A frame's declared size is above the negotiated limit."""


def error_name(code: int) -> str:
    """The ServerError's name for ``code`` (``"UnknownError(1234)"`` if unknown)."""
    try:
        return pb.ServerError.Name(code)
    except ValueError:
        return f"UnknownError({code})"
