"""Draining and stopping a cluster member from the admin API.

- ``POST /admin/v2/brokers/drain`` (Magnetar's): the broker moves every
  bundle it owns to the others without client lookups and takes no new one
  (:mod:`magnetar.broker.cluster.drain`); it keeps running. Answers what
  moved and what could not (those stay with it).
- ``POST /admin/v2/brokers/undrain``: it takes bundles again.
- ``POST /admin/v2/brokers/shutdown`` (Pulsar's path and query): drain,
  answer 204, then stop the process as SIGTERM would.

Failure modes: a standalone broker answers 412 to drain (it has nowhere to
move its topics; shutdown still stops it); a metadata store that does not
answer the draining mark is 503.
"""
from __future__ import annotations

import asyncio

from aiohttp import web

from .errors import AdminError, precondition_failed
from .params import BROKER, service_of
from .routes import OBJECT, STRING, QueryParam, RouteTable, json_answer, no_content

table = RouteTable("brokers")

#: Bounds of a drain asked through the API (a stop's come from the config).
DRAIN_TIMEOUT_S = 60.0
MOVE_TIMEOUT_S = 10.0


def _member_or_412(request: web.Request):
    member = service_of(request).cluster
    if member is None:
        raise precondition_failed("this broker is standalone: it owns every topic and has nowhere to move them")
    return member


async def _drain(member) -> dict:
    try:
        result = await member.drain(DRAIN_TIMEOUT_S, MOVE_TIMEOUT_S)
    except Exception as exc:  # the draining mark could not be written
        raise AdminError(503, f"cannot drain: {exc}") from None
    return result.doc()


@table.route("POST", "/admin/v2/brokers/drain",
             "Move every bundle this broker owns to the other brokers (clients follow without a lookup) "
             "and take no new one until undrain or a restart; answers what moved and what could not",
             answer=OBJECT, errors=(412, 503))
async def drain(request: web.Request) -> web.Response:
    return json_answer(await _drain(_member_or_412(request)))


@table.route("POST", "/admin/v2/brokers/undrain", "Take bundles again after a drain", answer=None,
             errors=(412, 503))
async def undrain(request: web.Request) -> web.Response:
    member = _member_or_412(request)
    try:
        await member.undrain()
    except Exception as exc:
        raise AdminError(503, f"cannot undrain: {exc}") from None
    return no_content()


@table.route("POST", "/admin/v2/brokers/shutdown",
             "Stop this broker gracefully (Pulsar's): a cluster member first moves its bundles to the "
             "others; then the process stops as on SIGTERM",
             query=(QueryParam("maxConcurrentUnloadPerSec", STRING, "Accepted for Pulsar's API"),
                    QueryParam("forcedTerminateTopic", STRING, "Accepted for Pulsar's API")),
             answer=None, errors=(412, 503))
async def shutdown(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    stop = getattr(broker, "request_stop", None)
    if stop is None:
        raise precondition_failed("this broker runs inside another program, which stops it: not stopping")
    member = service_of(request).cluster
    if member is not None:
        await _drain(member)
    # After the answer has left: the stop closes the admin listener.
    asyncio.get_running_loop().call_later(0.2, stop)
    return no_content()


@table.route("GET", "/admin/v2/brokers/transitions",
             "Bundles moving now (Assigning, Releasing, Splitting) with their brokers: empty when the "
             "cluster has settled", answer=OBJECT, errors=())
async def transitions(request: web.Request) -> web.Response:
    member = service_of(request).cluster
    if member is None:
        return json_answer({})
    from magnetar.broker.cluster.channel import ASSIGNING, RELEASING, SPLITTING  # a member's code

    return json_answer({str(b): {"state": s.state, "broker": s.broker, "source": s.source}
                        for b, s in sorted(member.channel.table.items(), key=lambda kv: str(kv[0]))
                        if s.state in (ASSIGNING, RELEASING, SPLITTING)})
