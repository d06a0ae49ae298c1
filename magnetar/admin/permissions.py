"""Permissions: ``/admin/v2/namespaces/{tenant}/{namespace}/permissions[/{role}]``,
``.../permissions/subscription/{subscription}[/{role}]`` (who may consume from
a subscription) and ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/permissions[/{role}]``
(grants on one topic).

Grants are stored in the namespace's ``auth_policies`` (Pulsar's layout,
:mod:`magnetar.security.authorization`) with compare-and-set, so concurrent
grants do not overwrite each other. The broker enforces them on PRODUCER and
SUBSCRIBE once ``authorization_enabled`` is on. Failure modes: 404 for a
namespace that does not exist, 400 for unknown actions or a malformed body.
"""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.namespaces import resources
from magnetar.security import authorization

from .errors import bad_request
from .params import json_body, namespace_of, store_of
from .routes import OBJECT, RouteTable, json_answer, no_content

table = RouteTable("permissions")
PERMISSIONS = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"
ACTIONS = {"type": "array", "items": {"type": "string", "enum": list(authorization.ACTIONS)}}


@table.route("GET", PERMISSIONS, "The roles granted on the namespace and their actions", answer=OBJECT)
async def get_permissions(request: web.Request) -> web.Response:
    policies = await resources.get_namespace(store_of(request), namespace_of(request))
    return json_answer(authorization.normalized(policies.get("auth_policies"))["namespace_auth"])


@table.route("POST", PERMISSIONS + "/{role}", "Grant a role actions on the namespace (produce, consume, ...)",
             body=ACTIONS, errors=(400, 404, 412))
async def grant(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    try:
        role = authorization.validate_role(request.match_info["role"])
        actions = authorization.validate_actions(await json_body(request))
    except authorization.PermissionInputError as exc:
        raise bad_request(str(exc)) from None
    await resources.update_policy(store_of(request), namespace, "auth_policies",
                                  lambda auth: authorization.grant_namespace(auth, role, actions))
    return no_content()


@table.route("DELETE", PERMISSIONS + "/{role}", "Revoke a role's actions on the namespace", errors=(404, 412))
async def revoke(request: web.Request) -> web.Response:
    role = request.match_info["role"]
    await resources.update_policy(store_of(request), namespace_of(request), "auth_policies",
                                  lambda auth: authorization.revoke_namespace(auth, role))
    return no_content()


# -- subscriptions: which roles may consume from a subscription -----------------------
SUBSCRIPTION_PERMISSIONS = PERMISSIONS + "/subscription"
ROLES = {"type": "array", "items": {"type": "string"}}


@table.route("GET", SUBSCRIPTION_PERMISSIONS, "Subscriptions restricted to roles (subscription -> roles)",
             answer=OBJECT)
async def get_subscription_permissions(request: web.Request) -> web.Response:
    policies = await resources.get_namespace(store_of(request), namespace_of(request))
    return json_answer(authorization.normalized(policies.get("auth_policies"))["subscription_auth_roles"])


@table.route("POST", SUBSCRIPTION_PERMISSIONS + "/{subscription}",
             "Let only these roles (besides admins) consume from the subscription", body=ROLES,
             errors=(400, 404, 412))
async def grant_subscription(request: web.Request) -> web.Response:
    subscription = request.match_info["subscription"]
    roles = await json_body(request)
    if not isinstance(roles, list) or not roles:
        raise bad_request("the body must be a non-empty JSON list of roles")
    try:
        for role in roles:
            authorization.validate_role(role)
    except authorization.PermissionInputError as exc:
        raise bad_request(str(exc)) from None
    await resources.update_policy(store_of(request), namespace_of(request), "auth_policies",
                                  lambda auth: authorization.grant_subscription(auth, subscription, roles))
    return no_content()


@table.route("DELETE", SUBSCRIPTION_PERMISSIONS + "/{subscription}/{role}",
             "Take a role off a subscription's list", errors=(404, 412))
async def revoke_subscription(request: web.Request) -> web.Response:
    subscription, role = request.match_info["subscription"], request.match_info["role"]
    await resources.update_policy(store_of(request), namespace_of(request), "auth_policies",
                                  lambda auth: authorization.revoke_subscription(auth, subscription, role))
    return no_content()


# -- topics: grants on one topic (a partitioned topic's apply to its partitions) --------
TOPIC_PERMISSIONS = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/permissions"


def _topic(request: web.Request) -> str:
    return "persistent://{tenant}/{namespace}/{topic}".format(**request.match_info)


@table.route("GET", TOPIC_PERMISSIONS, "Every role's actions on the topic (the namespace's and the topic's own)",
             answer=OBJECT, errors=(404, 412))
async def get_topic_permissions(request: web.Request) -> web.Response:
    policies = await resources.get_namespace(store_of(request), namespace_of(request))
    return json_answer(authorization.topic_permissions(policies.get("auth_policies"), _topic(request)))


@table.route("POST", TOPIC_PERMISSIONS + "/{role}", "Grant a role actions on this topic only", body=ACTIONS,
             errors=(400, 404, 412))
async def grant_topic(request: web.Request) -> web.Response:
    topic = _topic(request)
    try:
        role = authorization.validate_role(request.match_info["role"])
        actions = authorization.validate_actions(await json_body(request))
    except authorization.PermissionInputError as exc:
        raise bad_request(str(exc)) from None
    await resources.update_policy(store_of(request), namespace_of(request), "auth_policies",
                                  lambda auth: authorization.grant_topic(auth, topic, role, actions))
    return no_content()


@table.route("DELETE", TOPIC_PERMISSIONS + "/{role}", "Revoke a role's grant on this topic", errors=(404, 412))
async def revoke_topic(request: web.Request) -> web.Response:
    topic, role = _topic(request), request.match_info["role"]
    await resources.update_policy(store_of(request), namespace_of(request), "auth_policies",
                                  lambda auth: authorization.revoke_topic(auth, topic, role))
    return no_content()
