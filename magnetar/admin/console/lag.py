"""Consumer lag across topics: ``GET /console/api/subscriptions`` (every
subscription of the asked namespaces with its backlog, sortable and paged on
the server) and the per-broker part it gathers,
``GET /console/api/local/subscriptions``.

A row is one durable subscription of one topic (a partition of a
partitioned topic is its own row; ``parent`` names the partitioned topic):
its type, backlog (messages not yet acknowledged), consumers, messages
delivered and not yet acknowledged (``unacked``), messages delivered in all
(``delivered``), the rates out and of acknowledgements over the last stats
interval (``msgRateOut``, ``ackRate``), when it last acknowledged
(``lastAcked``, ms; 0: never) and the broker that has the topic loaded. Figures are read
from memory; a topic loaded nowhere has no rows (its subscriptions' cursors
are in storage, not in any broker's memory).

Failure modes: a namespace the role may not read is 403; an unknown sort
key, a bad offset or limit is 400; a broker that does not answer is named in
``unreachable`` and its subscriptions are missing.
"""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.subscriptions.subscription import SubType

from ..errors import bad_request
from ..params import service_of
from ..routes import OBJECT, RouteTable, json_answer
from magnetar.broker.topic_walk import visit_in_slices
from .forward import from_every_broker, own_id
from .listing import MAX_LIMIT, check_readable, int_query, namespaces_param, parent_of
from .overview import readable_namespaces

table = RouteTable("console")

SORTS = ("backlog", "topic", "subscription", "consumers", "unacked", "delivered", "msgRateOut", "ackRate", "lastAcked")


def subscription_rows(topic) -> dict[str, dict]:
    """``subscription -> figures`` of one loaded topic's durable subscriptions."""
    out = {}
    for name, sub in topic.subscriptions.items():
        if not sub.durable:
            continue
        rate_out, _, _, ack_rate, _ = sub.interval_rates.rates
        out[name] = {"type": SubType.Name(sub.type) if sub.type is not None else "Exclusive",
                     "backlog": sub.backlog(), "consumers": len(sub.consumers),
                     "unacked": sum(c.unacked_messages() for c in sub.consumers), "delivered": sub.msg_out,
                     "msgRateOut": rate_out, "ackRate": ack_rate, "lastAcked": sub.last_acked_ms}
    return out


async def local_subscriptions(service, namespaces: set[str]) -> dict[str, dict]:
    """``topic -> subscription -> figures`` for this broker's loaded topics of
    ``namespaces`` (visited in slices, the event loop running between)."""
    out = {}

    def visit(item) -> None:
        name, topic = item
        if not name.startswith("persistent://") or not hasattr(topic, "rates"):
            return
        if name[len("persistent://"):].rsplit("/", 1)[0] in namespaces:
            out[name] = subscription_rows(topic)

    await visit_in_slices(list(service.topics.items()), visit)
    return out


@table.route("GET", "/console/api/local/subscriptions", "Every durable subscription of the topics this broker "
             "has loaded in the given namespaces (?namespaces=t/ns,...)", answer=OBJECT, errors=(401, 403))
async def local(request: web.Request) -> web.Response:
    namespaces = namespaces_param(request)
    await check_readable(request, namespaces)
    return json_answer(await local_subscriptions(service_of(request), set(namespaces)))


async def gathered(request: web.Request, namespaces: list[str]) -> tuple[list[dict], dict[str, str]]:
    """Every subscription's row from every live broker, and the brokers that did not answer."""
    service = service_of(request)
    wanted = set(namespaces)

    async def here() -> dict:
        return await local_subscriptions(service, wanted)

    answers = await from_every_broker(request, "/console/api/local/subscriptions",
                                      {"namespaces": ",".join(namespaces)}, here)
    rows, unreachable = [], {}
    for broker_id, answer in answers.items():
        if isinstance(answer, dict) and "error" in answer and not all(k.startswith("persistent://") for k in answer):
            unreachable[broker_id] = answer["error"]
            continue
        for topic, subs in answer.items():
            parent = parent_of(topic)
            for sub, figures in subs.items():
                rows.append({"topic": topic, "parent": parent if parent != topic else None, "subscription": sub,
                             **figures, "owner": broker_id})
    return rows, unreachable


@table.route("GET", "/console/api/subscriptions", "Consumer lag: every durable subscription of the readable "
             "namespaces with its backlog (?namespace=, q= substring of topic or subscription, sort=, "
             "order=asc|desc, offset=, limit=)", answer=OBJECT, errors=(400, 401, 403))
async def subscriptions(request: web.Request) -> web.Response:
    sort = request.query.get("sort") or "backlog"
    if sort not in SORTS:
        raise bad_request(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    order = request.query.get("order") or ("asc" if sort in ("topic", "subscription") else "desc")
    if order not in ("asc", "desc"):
        raise bad_request(f"order must be asc or desc, got {order!r}")
    offset = int_query(request, "offset", 0, 0, 10**9)
    limit = int_query(request, "limit", 50, 1, MAX_LIMIT)
    namespaces = namespaces_param(request)
    if namespaces:
        await check_readable(request, namespaces)
    else:
        namespaces = await readable_namespaces(request)
    rows, unreachable = await gathered(request, namespaces)
    query = (request.query.get("q") or "").strip().lower()
    if query:
        rows = [r for r in rows if query in r["topic"].lower() or query in r["subscription"].lower()]
    rows.sort(key=lambda r: (r[sort] or 0, r["topic"], r["subscription"]), reverse=order == "desc")
    return json_answer({"total": len(rows), "offset": offset, "limit": limit, "sort": sort, "order": order,
                        "totalBacklog": sum(r["backlog"] for r in rows), "subscriptions": rows[offset:offset + limit],
                        "unreachable": unreachable, "broker": own_id(request)})
