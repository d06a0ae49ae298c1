"""One topic in the console, answered by its owner:

- ``GET /console/api/topic/{tenant}/{namespace}/{topic}``: the admin API's
  stats and internal stats, each producer's fenced flag, the schema, the
  bundle, the owner, the rate history (:mod:`.history`; ``history=0``:
  without it); for a partitioned topic's base name, each partition's
  figures and owner, their totals and each subscription's totals (gathered
  from every broker: answered by the broker asked);
- ``{any method} /console/api/owner/{tenant}/{namespace}/{topic}/{rest}``:
  the admin API's ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/{rest}``
  called on the owner (subscription actions: skip, reset cursor...), which
  authorizes it as it would a direct call.

A broker that is not the owner forwards the request (:mod:`.forward`).
Failure modes: the admin API's (404 unknown topic, 403 not allowed, 503 a
bundle in transition); 502 when the owner does not answer.
"""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.namespaces import resources
from magnetar.broker.topics.stats import topic_internal_stats, topic_stats
from magnetar.broker.topics.schemas import to_proto
from magnetar.protocol import pb

from ..access import may
from ..errors import AdminError, bad_request, not_found
from ..params import service_of, topic_of
from ..routes import OBJECT, RouteTable, json_answer
from .forward import forward, from_every_broker, own_id, own_url, owner_of
from .history import HISTORY, history_of, summed
from .lag import gathered
from .listing import local_summaries, parent_row

table = RouteTable("console")
TOPIC = "{tenant}/{namespace}/{topic}"


def schema_of(versions: list[dict]) -> dict | None:
    if not versions:
        return None
    schema = to_proto(versions[-1])
    return {"version": len(versions) - 1, "type": pb.Schema.Type.Name(schema.type),
            "data": schema.schema_data.decode(errors="replace")}


@table.route("GET", f"/console/api/topic/{TOPIC}", "A topic's stats, internal stats, producers' fencing, "
             "schema and owner (answered by the owner)", answer=OBJECT, errors=(401, 403, 404, 502, 503))
async def topic_detail(request: web.Request) -> web.Response:
    service = service_of(request)
    name = topic_of(request)
    path = f"/admin/v2/persistent/{name.tenant}/{name.namespace}/{name.local}/stats"
    if not await may(request, "GET", path):
        raise AdminError(403, f"role {request.get('magnetar.role')!r} may not read {name}")
    with_history = request.query.get("history") != "0"
    count = await resources.get_partitions(service.store, name)
    if count:
        return json_answer(await partitioned_detail(request, name, count, with_history))
    owner = await owner_of(request, name)
    if owner is not None:
        return await forward(request, owner)
    if not await service.topic_exists(name):
        raise not_found(f"Topic {name} does not exist")
    topic = await service.get_topic(name, create=False)
    stats = topic_stats(topic)
    fenced = {p.name: bool(p.fenced) for p in topic.producers.values()}
    for publisher in stats["publishers"]:
        publisher["fenced"] = fenced.get(publisher["producerName"], False)
    member = service.cluster
    bundle = member.bundle_of(name).range if member is not None else "0x00000000_0xffffffff"
    return json_answer({"name": str(name), "partitioned": False, "owner": own_id(request), "bundle": bundle,
                        "stats": stats, "internalStats": topic_internal_stats(topic),
                        "schema": schema_of(await service.schemas.versions(name)),
                        "history": history_of(request, str(name)) if with_history else []})


async def partitioned_detail(request: web.Request, name, count: int, with_history: bool) -> dict:
    """A partitioned topic: each partition's figures and owner (gathered from
    every broker, as the topic listing is), their totals, and each
    subscription's totals over the partitions."""
    namespace = f"{name.tenant}/{name.namespace}"
    service = service_of(request)
    names = [str(name.partition(i)) for i in range(count)]
    wanted = set(names)

    # The rate history only when asked (a page's first load): it is the bulk of the answer.
    history_topic = str(name) if with_history else ""

    async def here_figures() -> dict:
        return await local_summaries(service, {namespace}, request.app.get(HISTORY), history_topic)

    figures = await from_every_broker(request, "/console/api/local/topics",
                                      {"namespaces": namespace, "historyOf": history_topic}, here_figures)
    rows: dict[str, dict] = {}
    unreachable = {}
    for broker_id, answer in figures.items():
        if isinstance(answer, dict) and "error" in answer and not all(k.startswith("persistent://") for k in answer):
            unreachable[broker_id] = answer["error"]
            continue
        for topic, row in answer.items():
            if topic in wanted:
                rows[topic] = {**row, "owner": broker_id}
    history = summed([rows[n].pop("history", None) or [] for n in names if n in rows])
    partitions = [{"name": n, "index": i, **rows.get(n, {"owner": None})} for i, n in enumerate(names)]
    subscriptions: dict[str, dict] = {}
    sub_rows, _ = await gathered(request, [namespace])
    for r in sub_rows:
        if r["topic"] not in wanted:
            continue
        total = subscriptions.setdefault(r["subscription"], {"type": r["type"], "backlog": 0, "consumers": 0,
                                                             "unacked": 0, "delivered": 0, "partitions": 0})
        for key in ("backlog", "consumers", "unacked", "delivered"):
            total[key] += r[key]
        total["partitions"] += 1
    return {"name": str(name), "partitioned": True, "partitions": partitions,
            "totals": parent_row(str(name), count, {p["name"]: p for p in partitions if p.get("owner")}),
            "subscriptions": subscriptions, "unreachable": unreachable, "history": history}


async def at_owner(request: web.Request) -> web.Response:
    name = topic_of(request)
    rest = request.match_info["rest"]
    if any(part in (".", "..") for part in rest.split("/")):
        raise bad_request(f"the path after the topic may not climb out of it: {rest!r}")
    path = f"/admin/v2/persistent/{name.tenant}/{name.namespace}/{name.local}/{rest}"
    owner = await owner_of(request, name)
    return await forward(request, owner or own_url(request), path)



def add_owner_routes(app: web.Application) -> None:
    """``/console/api/owner/...`` for GET, PUT, POST and DELETE (outside the
    OpenAPI description: it is the admin API's topic paths, described there)."""
    for method in ("GET", "PUT", "POST", "DELETE"):
        app.router.add_route(method, f"/console/api/owner/{TOPIC}/{{rest:.+}}", at_owner)
