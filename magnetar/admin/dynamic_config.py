"""Dynamic configuration on Pulsar's paths (``/admin/v2/brokers/configuration``):
settings changed without a restart, for every broker of the cluster
(:mod:`magnetar.broker.dynamic_config`).

Failure modes: 412 with one line for an unknown setting, one that needs a
restart, or a value that does not fit; 404 deleting a setting with no
dynamic value.
"""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.dynamic_config import DYNAMIC, DynamicConfigError

from .errors import not_found, precondition_failed
from .params import BROKER
from .routes import OBJECT, STRING_LIST, RouteTable, json_answer, no_content

table = RouteTable("brokers")


def _dynamic(request: web.Request):
    return request.app[BROKER].dynamic


@table.route("GET", "/admin/v2/brokers/configuration", "The settings that change without a restart",
             answer=STRING_LIST, errors=())
async def list_dynamic(request: web.Request) -> web.Response:
    return json_answer(list(DYNAMIC))


@table.route("GET", "/admin/v2/brokers/configuration/values",
             "The dynamic values set (setting -> value); the others come from each broker's file",
             answer=OBJECT, errors=())
async def dynamic_values(request: web.Request) -> web.Response:
    return json_answer(dict(sorted(_dynamic(request).overrides.items())))


@table.route("GET", "/admin/v2/brokers/configuration/runtime", "Every setting's value in force on this broker",
             answer=OBJECT, errors=())
async def runtime(request: web.Request) -> web.Response:
    return json_answer(_dynamic(request).runtime())


@table.route("POST", "/admin/v2/brokers/configuration/{configName}/{configValue}",
             "Set a dynamic setting for every broker of the cluster, applied without a restart "
             "(Magnetar's or Pulsar's name); 412 for a setting that needs a restart",
             answer=None, errors=(412,))
async def update(request: web.Request) -> web.Response:
    try:
        await _dynamic(request).update(request.match_info["configName"], request.match_info["configValue"])
    except DynamicConfigError as exc:
        raise precondition_failed(str(exc)) from None
    return no_content()


@table.route("DELETE", "/admin/v2/brokers/configuration/{configName}",
             "Remove a dynamic value: every broker goes back to its config file's", answer=None, errors=(404, 412))
async def delete(request: web.Request) -> web.Response:
    try:
        await _dynamic(request).delete(request.match_info["configName"])
    except DynamicConfigError as exc:
        if "no dynamic value" in str(exc):
            raise not_found(str(exc)) from None
        raise precondition_failed(str(exc)) from None
    return no_content()
