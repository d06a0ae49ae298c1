"""Permissions: ``/admin/v2/namespaces/{tenant}/{namespace}/permissions[/{role}]``.

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
