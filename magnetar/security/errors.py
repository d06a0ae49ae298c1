"""The two ways a request is refused for security reasons.

They map onto Pulsar's ``ServerError.AuthenticationError`` (the credential is
missing, malformed, wrong or expired: the binary connection is closed, the
admin API answers 401) and ``ServerError.AuthorizationError`` (the role is
known but may not do this: the request fails, the connection stays, the admin
API answers 403).
"""
from __future__ import annotations


class AuthenticationError(Exception):
    """The credential does not prove a role."""


class AuthorizationError(Exception):
    """The role may not perform the operation."""
