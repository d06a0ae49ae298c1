"""The security room's one exception: a credential that proves no role.

:class:`AuthenticationError` maps onto Pulsar's ``ServerError.AuthenticationError``
(the credential is missing, malformed, wrong or expired): the binary
connection is closed, the admin API answers 401. A known role that may not do
something is the broker's refusal :class:`magnetar.broker.errors.AuthorizationError`
(the request fails, the connection stays, the admin API answers 403); it lives
with the other refusals, not here.
"""
from __future__ import annotations


class AuthenticationError(Exception):
    """The credential does not prove a role."""
