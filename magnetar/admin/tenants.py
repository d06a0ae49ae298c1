"""Tenants: ``/admin/v2/tenants``. A tenant is a name with Pulsar's TenantInfo
(``adminRoles``, ``allowedClusters``); it holds namespaces and cannot be
deleted while it has any (409)."""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.namespaces import resources

from .params import json_body, store_of, tenant_of
from .routes import STRING_LIST, RouteTable, json_answer, no_content

table = RouteTable("tenants")

TENANT_INFO = {"type": "object", "properties": {"adminRoles": STRING_LIST, "allowedClusters": STRING_LIST}}


@table.route("GET", "/admin/v2/tenants", "List the tenants", answer=STRING_LIST, errors=())
async def list_tenants(request: web.Request) -> web.Response:
    return json_answer(await resources.list_tenants(store_of(request)))


@table.route("GET", "/admin/v2/tenants/{tenant}", "Get a tenant's info", answer=TENANT_INFO, errors=(404, 412))
async def get_tenant(request: web.Request) -> web.Response:
    return json_answer(await resources.get_tenant(store_of(request), tenant_of(request)))


@table.route("PUT", "/admin/v2/tenants/{tenant}", "Create a tenant", body=TENANT_INFO, body_required=False,
             errors=(400, 409, 412),
             description="allowedClusters defaults to every cluster; clusters must exist (412).")
async def create_tenant(request: web.Request) -> web.Response:
    tenant = tenant_of(request)
    await resources.create_tenant(store_of(request), tenant, await json_body(request, required=False))
    return no_content()


@table.route("POST", "/admin/v2/tenants/{tenant}", "Update a tenant's info", body=TENANT_INFO,
             errors=(400, 404, 412))
async def update_tenant(request: web.Request) -> web.Response:
    tenant = tenant_of(request)
    await resources.update_tenant(store_of(request), tenant, await json_body(request))
    return no_content()


@table.route("DELETE", "/admin/v2/tenants/{tenant}", "Delete an empty tenant", errors=(404, 409, 412))
async def delete_tenant(request: web.Request) -> web.Response:
    await resources.delete_tenant(store_of(request), tenant_of(request))
    return no_content()
