"""The OpenAPI 3 description of the admin API, built from the route tables.

Served at ``/admin/v2/openapi.json``. Every registered :class:`~.routes.Route`
appears with its path and query parameters, request body, success answer
and error statuses; the error body is always ``{"reason": "..."}``.
"""
from __future__ import annotations

from magnetar import __version__

from .routes import Route

_STATUS_TEXT = {
    400: "Malformed request or invalid value",
    404: "Unknown cluster, tenant, namespace, topic or subscription",
    405: "Not allowed on this kind of resource",
    409: "Conflict: it already exists, or is not empty",
    412: "Precondition failed: invalid name, unknown cluster, or in use",
    503: "The broker is not serving",
}

ERROR = {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}


def _operation(route: Route) -> dict:
    params = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
              for name in route.path_params]
    params += [{"name": q.name, "in": "query", "required": False, "schema": q.schema, "description": q.description}
               for q in route.query]
    responses: dict = {}
    if route.answer is None:
        responses[str(route.ok)] = {"description": "Done"}
    else:
        media = "application/octet-stream" if route.answer.get("format") == "binary" else "application/json"
        responses[str(route.ok)] = {"description": "OK", "content": {media: {"schema": route.answer}}}
    for status in sorted(set(route.errors) | {500}):
        responses[str(status)] = {
            "description": _STATUS_TEXT.get(status, "Internal or storage error"),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    op: dict = {
        "operationId": f"{route.tag}_{route.handler.__name__}",
        "summary": route.summary,
        "tags": [route.tag],
        "parameters": params,
        "responses": responses,
    }
    if route.description:
        op["description"] = route.description
    if route.body is not None:
        op["requestBody"] = {"required": route.body_required,
                             "content": {"application/json": {"schema": route.body}}}
    return op


def build(routes: list[Route]) -> dict:
    paths: dict[str, dict] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Magnetar admin API",
            "version": __version__,
            "description": "Pulsar admin v2 paths served by a Magnetar broker. Errors are JSON {\"reason\": ...}.",
        },
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": {"Error": ERROR}},
    }
