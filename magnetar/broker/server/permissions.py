"""Authorization of binary-protocol operations (Pulsar's model, see
:mod:`magnetar.security.authorization`): a PRODUCER needs "produce", a
SUBSCRIBE "consume" (and the subscription's role list, if any), on the
topic's namespace or the topic itself; super-users and the tenant's admin
roles may do anything. Off unless ``authorization_enabled``.

Failure modes: AuthorizationError (nothing is created); metadata errors
propagate (the handler answers ServiceNotReady).
"""
from __future__ import annotations

from magnetar.broker.errors import AuthorizationError
from magnetar.broker.namespaces import resources
from magnetar.broker.topic_name import TopicName
from magnetar.security.authorization import Authorizer


async def check(authorizer: Authorizer | None, store, role: str | None, action: str, name: TopicName,
                subscription: str | None = None) -> None:
    """Raise AuthorizationError unless ``role`` may ``action`` on ``name``."""
    if authorizer is None or not authorizer.enabled or authorizer.is_super_user(role):
        return
    try:
        tenant = await resources.get_tenant(store, name.tenant)
    except resources.ResourceNotFound:
        tenant = None
    policies = await resources.namespace_policies(store, name.namespace_name)
    if not authorizer.may(role, action, str(name), policies.get("auth_policies"), tenant, subscription):
        who = f"role {role!r}" if role else "an anonymous client"
        raise AuthorizationError(f"{who} may not {action} on {name}"
                                 + (f" (subscription {subscription})" if subscription else ""))
