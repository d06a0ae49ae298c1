"""Asking the other brokers: a topic's owner, and every live broker at once.

In a cluster a topic's state lives on its owner, so a console request about
one topic is answered there: :func:`owner_of` names the owner (None when it
is this broker), :func:`forward` replays the request to it with the
caller's ``Authorization`` header (the owner authenticates and authorizes
it again). A forwarded request carries :data:`HOP` and is never forwarded
again, so two brokers that disagree about an owner cannot bounce it.
:func:`from_every_broker` gathers one JSON answer per live broker; a broker
that does not answer in time is reported as such, never hidden.

Failure modes: an owner that cannot be reached is 502 with its address; a
bundle in transition is what the lookup raises (503).
"""
from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from magnetar.broker.topic_name import TopicName

from ..errors import AdminError
from ..params import BROKER, service_of

HOP = "X-Magnetar-Console-Hop"
TIMEOUT = aiohttp.ClientTimeout(total=10)
#: Gathering from every broker: a broker slower than this is reported, not waited for.
GATHER_TIMEOUT = aiohttp.ClientTimeout(total=3)


def own_id(request: web.Request) -> str:
    broker = request.app[BROKER]
    return f"{broker.config.advertised_address}:{broker.admin_port}"


async def owner_of(request: web.Request, name: TopicName) -> str | None:
    """The owner's web service URL, or None when this broker answers."""
    member = service_of(request).cluster
    if member is None or request.headers.get(HOP):
        return None
    result = await member.lookup(name)
    return None if result.local else result.web_service_url


def _headers(request: web.Request) -> dict:
    headers = {HOP: "1"}
    if "Authorization" in request.headers:
        headers["Authorization"] = request.headers["Authorization"]
    if "Content-Type" in request.headers:
        headers["Content-Type"] = request.headers["Content-Type"]
    return headers


async def forward(request: web.Request, base_url: str, path: str | None = None) -> web.Response:
    """The owner's answer to this request (same method, query, body), sent on."""
    url = base_url.rstrip("/") + (path or request.path)
    body = await request.read()
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.request(request.method, url, params=request.query, data=body or None,
                                       headers=_headers(request)) as answer:
                payload = await answer.read()
                return web.Response(status=answer.status, body=payload,
                                    content_type=answer.content_type or "application/json")
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        raise AdminError(502, f"the topic's owner {base_url} did not answer: {exc or type(exc).__name__}") from None


def own_url(request: web.Request) -> str:
    """This broker's own admin URL (plain http, as the cluster registry has it)."""
    return "http://" + own_id(request)


async def from_every_broker(request: web.Request, path: str, params: dict, local) -> dict[str, object]:
    """``broker id -> decoded JSON answer`` of ``GET path`` on every live
    broker; this one answers with ``await local()`` instead. A broker that
    failed maps to ``{"error": reason}``."""
    member = service_of(request).cluster
    me = own_id(request)
    brokers = {} if member is None else {
        broker_id: info.web_service_url for broker_id, info in member.registry.live.items() if broker_id != me}

    async def ask(session: aiohttp.ClientSession, url: str) -> object:
        try:
            async with session.get(url.rstrip("/") + path, params=params, headers=_headers(request)) as answer:
                if answer.status != 200:
                    return {"error": f"{answer.status}: {(await answer.text())[:200]}"}
                return await answer.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            return {"error": f"did not answer: {exc or type(exc).__name__}"}

    async with aiohttp.ClientSession(timeout=GATHER_TIMEOUT) as session:
        answers = await asyncio.gather(local(), *(ask(session, url) for url in brokers.values()))
    return dict(zip([me, *brokers], answers))
