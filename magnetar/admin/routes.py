"""Routes that describe themselves: each handler is registered with what the
OpenAPI description needs (summary, query parameters, body, answers).

A module of the admin API builds one :class:`RouteTable` and decorates its
handlers; :mod:`.app` adds every table's routes to the aiohttp application
and :mod:`.openapi` describes the same list, so a route cannot exist without
its description.

Bodies and answers are given as small JSON-schema dicts (the helpers below).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Reusable schemas.
STRING = {"type": "string"}
INTEGER = {"type": "integer"}
BOOLEAN = {"type": "boolean"}
OBJECT = {"type": "object"}
STRING_LIST = {"type": "array", "items": STRING}
BYTES = {"type": "string", "format": "binary"}
MESSAGE_ID = {
    "type": "object",
    "properties": {"ledgerId": INTEGER, "entryId": INTEGER, "partitionIndex": INTEGER, "isExcluded": BOOLEAN},
    "required": ["ledgerId", "entryId"],
}


@dataclass(frozen=True)
class QueryParam:
    name: str
    schema: dict
    description: str


FORCE = QueryParam("force", BOOLEAN, "Proceed even if the resource is in use or not empty")


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    query: tuple[QueryParam, ...] = ()
    body: dict | None = None
    body_required: bool = True
    ok: int = 204
    answer: dict | None = None
    errors: tuple[int, ...] = ()
    description: str = ""

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)


@dataclass
class RouteTable:
    """The routes of one area of the API (one OpenAPI tag)."""

    tag: str
    routes: list[Route] = field(default_factory=list)

    def route(self, method: str, path: str, summary: str, *, query: tuple[QueryParam, ...] = (),
              body: dict | None = None, body_required: bool = True, answer: dict | None = None,
              errors: tuple[int, ...] = (404,), description: str = "") -> Callable[[Handler], Handler]:
        """Register the decorated handler. It answers 200 with ``answer`` (a
        schema), or 204 when ``answer`` is None."""

        def register(handler: Handler) -> Handler:
            self.routes.append(Route(method, path, handler, summary, self.tag, tuple(query), body,
                                     body_required, 204 if answer is None else 200, answer, tuple(errors),
                                     description or (handler.__doc__ or "").strip()))
            return handler

        return register


def add_to(app: web.Application, tables: list[RouteTable]) -> list[Route]:
    """Register every route of ``tables`` on ``app``; returns them all."""
    routes = [r for table in tables for r in table.routes]
    for r in routes:
        app.router.add_route(r.method, r.path, r.handler)
    return routes


def no_content() -> web.Response:
    return web.Response(status=204)


def json_answer(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status)
