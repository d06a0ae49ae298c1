"""Who may call the admin API: authentication and authorization, Pulsar's model.

With ``authentication_enabled`` every request proves a role with the same
providers as the binary protocol: ``Authorization: Bearer <jwt>`` (token),
``Authorization: Basic <base64 user:password>`` (basic), or the client
certificate of an https connection (tls, CN as the role). A request without
a credential gets the ``anonymous_user_role`` if there is one, else 401.
Health, version, metrics and the OpenAPI description stay open (monitoring
and load balancers call them without credentials).

With ``authorization_enabled`` the role must also be allowed, as in Pulsar:

- clusters (changes), tenants (listing, creating, deleting) and brokers
  (changes): super-users;
- a tenant, its namespaces and their topics: the tenant's admin roles
  (``adminRoles``) and super-users;
- reading a topic (stats, internal stats, partitions, last message id, its
  lookup): also the roles that may produce or consume on it.

A refusal is 401 (no or bad credential) or 403 (not allowed), JSON
``{"reason": ...}``; nothing is done.

The web console's files (``/console/``) are open like the monitoring paths:
the page must load to ask for a login. Its API (``/console/api/``) needs a
role; what it may read is checked by the console per resource with
:func:`may`, the same rules as the admin paths it reads.
"""
from __future__ import annotations

import base64
import binascii
import json
import re

from aiohttp import web

from magnetar.broker.namespaces import resources
from magnetar.security import tls
from magnetar.security.errors import AuthenticationError

from .console.assets import is_asset
from .params import BROKER

#: Paths anyone may call (monitoring).
OPEN = frozenset({"/admin/v2/brokers/health", "/admin/v2/brokers/version", "/metrics", "/admin/v2/openapi.json"})
CONSOLE_API = "/console/api/"
ROLE = "magnetar.role"


def _open(path: str) -> bool:
    return path in OPEN or is_asset(path)

_TENANT_PATH = re.compile(r"^/admin/v2/(?:tenants|namespaces|persistent|non-persistent|schemas)/([^/]+)")
_TOPIC_READ = re.compile(r"^/(?:admin/v2|lookup/v2/topic)/persistent/([^/]+)/([^/]+)/([^/]+)"
                         r"(?:/(?:stats|internalStats|partitions|partitioned-stats|lastMessageId))?$")


def _unauthorized(reason: str) -> web.HTTPException:
    return web.HTTPUnauthorized(text=json.dumps({"reason": reason}), content_type="application/json",
                                headers={"WWW-Authenticate": 'Bearer realm="magnetar", Basic realm="magnetar"'})


def _forbidden(reason: str) -> web.HTTPException:
    return web.HTTPForbidden(text=json.dumps({"reason": reason}), content_type="application/json")


def _credential(request: web.Request, authenticator):
    header = request.headers.get("Authorization", "")
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
    peer = tls.peer_certificate(ssl_object) if ssl_object is not None else None
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return authenticator.authenticate("token", value.strip().encode())
    if scheme.lower() == "basic" and value:
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise AuthenticationError("Basic credentials must be base64 of user:password") from None
        return authenticator.authenticate("basic", decoded)
    if header:
        raise AuthenticationError(f"unsupported Authorization scheme {scheme!r}: use Bearer or Basic")
    if peer is not None and "tls" in authenticator.providers:
        return authenticator.authenticate("tls", b"", peer)
    return authenticator.authenticate("none", b"")


async def may(request: web.Request, method: str, path: str) -> bool:
    """Whether the request's role may call ``method path`` of the admin API
    (True when authorization is off). For the console's own endpoints."""
    service = request.app[BROKER].service
    authorizer = getattr(service, "authorizer", None)
    if authorizer is None or not authorizer.enabled:
        return True
    return await _allowed(service, request.get(ROLE), method, path)


async def _allowed(service, role: str | None, method: str, path: str) -> bool:
    authorizer = service.authorizer
    if authorizer.is_super_user(role):
        return True
    match = _TENANT_PATH.match(path)
    topic = _TOPIC_READ.match(path) if method == "GET" else None
    if match is None and topic is None:
        # Clusters, brokers, the tenants list: super-users only; reading the
        # clusters and brokers is harmless and needed by tools.
        return method == "GET" and (path.startswith("/admin/v2/clusters") or path.startswith("/admin/v2/brokers"))
    tenant = match.group(1) if match is not None else topic.group(1)
    try:
        tenant_info = await resources.get_tenant(service.store, tenant)
    except Exception:
        tenant_info = None
    if authorizer.is_tenant_admin(role, tenant_info):
        return path != f"/admin/v2/tenants/{tenant}" or method == "GET"  # the tenant itself: super-users
    if topic is not None and role is not None:
        name = f"persistent://{topic.group(1)}/{topic.group(2)}/{topic.group(3)}"
        policies = await resources.namespace_policies(service.store, f"{topic.group(1)}/{topic.group(2)}")
        return authorizer.may(role, "lookup", name, policies.get("auth_policies"), tenant_info)
    return False


@web.middleware
async def access(request: web.Request, handler):
    broker = request.app[BROKER]
    service = broker.service
    authenticator = getattr(service, "authenticator", None)
    if _open(request.path) or authenticator is None or not authenticator.enabled:
        return await handler(request)
    try:
        credential = _credential(request, authenticator)
    except AuthenticationError as exc:
        raise _unauthorized(str(exc)) from None
    role = credential.role if credential is not None else None
    if role is None:
        raise _unauthorized("authentication is required: send Authorization: Bearer <token> or Basic")
    request[ROLE] = role
    if request.path.startswith(CONSOLE_API):
        return await handler(request)  # the console checks each resource it reads (may)
    authorizer = getattr(service, "authorizer", None)
    if authorizer is not None and authorizer.enabled and not await _allowed(service, role, request.method,
                                                                            request.path):
        raise _forbidden(f"role {role!r} may not {request.method} {request.path}")
    return await handler(request)
