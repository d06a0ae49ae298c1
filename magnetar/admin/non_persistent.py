"""Non-persistent topics: ``/admin/v2/non-persistent/{tenant}/{namespace}[/{topic}/stats]``.

A non-persistent topic exists while a broker serves it (see
``broker/topics/non_persistent.py``), so these answer for the topics *this*
broker serves: in a cluster, ask the owner (its lookup names it).
"""
from __future__ import annotations

from aiohttp import web

from .errors import not_found
from .params import namespace_of, service_of
from .routes import OBJECT, STRING_LIST, RouteTable, json_answer

table = RouteTable("non-persistent topics")

NS = "/admin/v2/non-persistent/{tenant}/{namespace}"


@table.route("GET", NS, "List the non-persistent topics this broker serves in a namespace", answer=STRING_LIST,
             errors=(412,))
async def list_topics(request: web.Request) -> web.Response:
    return json_answer(service_of(request).non_persistent_topics_of(namespace_of(request)))


@table.route("GET", NS + "/{topic}/stats", "Get a non-persistent topic's stats (rates, drops, consumers)",
             answer=OBJECT, errors=(404, 412))
async def stats(request: web.Request) -> web.Response:
    name = f"non-persistent://{namespace_of(request)}/{request.match_info['topic']}"
    topic = service_of(request).non_persistent.get(name)
    if topic is None or topic.closed:
        raise not_found(f"Topic {name} is not served by this broker")
    return json_answer(topic.stats())
