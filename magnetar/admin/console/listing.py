"""Topic listings with figures: ``GET /console/api/topics`` and the per-broker
part it gathers, ``GET /console/api/local/topics``.

A listing names every topic of the asked namespaces (all readable ones when
none is asked). A partitioned topic is one row under its base name, its
figures the totals of its partitions and ``partitions`` their count
(``partitions=1``: every partition a row of its own instead, as Pulsar lists
them), with
the figures of the broker that has it loaded: rates in and out, backlog
(summed over the subscriptions), storage size, producers, subscriptions and
that broker's id; for a topic that replicates, each remote's replicator
figures and the replicated subscriptions. A topic loaded nowhere shows zeros and no owner. Search
(a substring of the name), sorting and paging run on the server, so the page
gets one page of rows however many topics there are; the per-topic figures
are read from memory, never from storage.

Failure modes: a namespace the role may not read is 403; an unknown sort
key, a bad offset or limit is 400; a broker that does not answer is named in
``unreachable`` and its topics show no figures.
"""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.namespaces import resources
from magnetar.broker.server import lifecycle

from ..access import may
from ..errors import AdminError, bad_request
from ..params import service_of
from ..routes import OBJECT, RouteTable, json_answer
from magnetar.broker.topic_walk import visit_in_slices
from .forward import from_every_broker, own_id
from .history import HISTORY
from .overview import readable_namespaces

table = RouteTable("console")

FIGURES = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "backlog", "storageSize",
           "producers", "subscriptions")
SORTS = ("name", *FIGURES)
MAX_LIMIT = 500


def summary(topic) -> dict:
    """The listing's figures of one loaded topic (memory only)."""
    rate_in, throughput_in, rate_out, throughput_out = topic.rates.rates(
        (topic.msg_in, topic.bytes_in, topic.msg_out, topic.bytes_out))
    subs = topic.subscriptions.values()
    return {"msgRateIn": rate_in, "msgRateOut": rate_out, "msgThroughputIn": throughput_in,
            "msgThroughputOut": throughput_out, "backlog": sum(s.backlog() for s in subs if s.durable),
            "storageSize": topic.ledger.total_size, "producers": len(topic.producers),
            "subscriptions": len(topic.subscriptions), **_replication(topic)}


def _replication(topic) -> dict:
    """Regions: each remote's replicator figures and the replicated subscriptions (absent when none)."""
    if not topic.replicators:
        return {}
    return {"replication": {remote: r.stats() for remote, r in topic.replicators.items()},
            "replicatedSubscriptions": sorted(n for n, s in topic.subscriptions.items() if s.replicated)}


async def local_summaries(service, namespaces: set[str], history=None, history_of: str = "") -> dict[str, dict]:
    """This broker's loaded topics of ``namespaces``: ``name -> figures``
    (with ``history``, a RateHistory: the rate ring of each partition of the
    partitioned topic ``history_of`` as well). Visits the loaded topics in
    slices, the event loop running between (broker/topic_walk.py)."""
    out = {}

    def visit(item) -> None:
        name, topic = item
        if not name.startswith("persistent://") or not hasattr(topic, "rates"):
            return
        if name[len("persistent://"):].rsplit("/", 1)[0] in namespaces:
            out[name] = summary(topic)
            if history is not None and history_of and parent_of(name) == history_of:
                out[name]["history"] = history.of(name)

    await visit_in_slices(list(service.topics.items()), visit)
    return out


def parent_of(name: str) -> str:
    """A partition's base name (``name`` itself when it is not a partition)."""
    base, sep, index = name.rpartition("-partition-")
    return base if sep and index.isdigit() else name


def parent_row(name: str, count: int, figures: dict[str, dict]) -> dict:
    """A partitioned topic's row: its partitions' figures summed; ``owner``
    the one broker that has them all, or how many brokers share them."""
    parts = [figures[f"{name}-partition-{i}"] for i in range(count) if f"{name}-partition-{i}" in figures]
    row: dict = {"name": name, "partitions": count, "loadedPartitions": len(parts)}
    for key in FIGURES:
        row[key] = sum(p.get(key) or 0 for p in parts)
    # A subscription of a partitioned topic is one on each partition: not a sum.
    row["subscriptions"] = max((p.get("subscriptions") or 0 for p in parts), default=0)
    owners = sorted({p["owner"] for p in parts})
    row["owner"] = owners[0] if len(owners) == 1 else (f"{len(owners)} brokers" if owners else None)
    row["owners"] = owners
    return row


def namespaces_param(request: web.Request) -> list[str]:
    raw = request.query.get("namespaces") or request.query.get("namespace") or ""
    return [n for n in raw.split(",") if n]


async def check_readable(request: web.Request, namespaces: list[str]) -> None:
    for namespace in namespaces:
        if not await may(request, "GET", f"/admin/v2/persistent/{namespace}"):
            raise AdminError(403, f"role {request.get('magnetar.role')!r} may not read namespace {namespace}")


@table.route("GET", "/console/api/local/topics", "Figures of the topics this broker has loaded in the given "
             "namespaces (?namespaces=t/ns,...; historyOf=a partitioned topic: its partitions' rate history too)",
             answer=OBJECT, errors=(401, 403))
async def local_topics(request: web.Request) -> web.Response:
    namespaces = namespaces_param(request)
    await check_readable(request, namespaces)
    history_of = request.query.get("historyOf") or ""
    return json_answer(await local_summaries(service_of(request), set(namespaces), request.app.get(HISTORY),
                                             history_of))


def int_query(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise bad_request(f"{name} must be in {low}..{high}, got {value}")
    return value


@table.route("GET", "/console/api/topics", "One page of topics with their figures (?namespace=, q= substring, "
             "sort=, order=asc|desc, offset=, limit=, replicated=1: only topics that replicate, partitions=1: "
             "each partition a row)", answer=OBJECT, errors=(400, 401, 403))
async def topics(request: web.Request) -> web.Response:
    service = service_of(request)
    sort = request.query.get("sort") or "name"
    if sort not in SORTS:
        raise bad_request(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    order = request.query.get("order") or ("asc" if sort == "name" else "desc")
    if order not in ("asc", "desc"):
        raise bad_request(f"order must be asc or desc, got {order!r}")
    offset = int_query(request, "offset", 0, 0, 10**9)
    limit = int_query(request, "limit", 50, 1, MAX_LIMIT)
    query = (request.query.get("q") or "").strip().lower()
    flat = request.query.get("partitions") in ("1", "true")
    namespaces = namespaces_param(request)
    if namespaces:
        await check_readable(request, namespaces)
    else:
        namespaces = await readable_namespaces(request)
    names: list[str] = []
    parents: dict[str, int] = {}
    for namespace in namespaces:
        listed = await lifecycle.namespace_topics(service, namespace)
        names += listed
        if not flat:
            # Counted from the listing, which has every partition: no metadata read per topic.
            partitioned = set(await resources.list_partitioned(service.store, namespace))
            for name in listed:
                base = parent_of(name)
                if base in partitioned:
                    parents[base] = parents.get(base, 0) + 1
    if parents:
        names = [n for n in names if parent_of(n) not in parents] + list(parents)
    if query:
        # A partitioned topic's row matches when its name or one of its partitions' does.
        names = [n for n in names if query in n.lower()
                 or (n in parents and any(query in f"{n}-partition-{i}".lower() for i in range(parents[n])))]
    replicated_only = request.query.get("replicated") in ("1", "true")
    wanted = set(namespaces)

    async def local() -> dict:
        return await local_summaries(service, wanted)

    answers = await from_every_broker(request, "/console/api/local/topics", {"namespaces": ",".join(namespaces)},
                                      local)
    figures: dict[str, dict] = {}
    unreachable = {}
    for broker_id, answer in answers.items():
        if isinstance(answer, dict) and "error" in answer and not all(k.startswith("persistent://") for k in answer):
            unreachable[broker_id] = answer["error"]
            continue
        for name, row in answer.items():
            figures[name] = {**row, "owner": broker_id}
    rows = [parent_row(n, parents[n], figures) if n in parents else {"name": n, **figures.get(n, {"owner": None})}
            for n in names]
    if replicated_only:
        rows = [r for r in rows if r.get("replication")]
    if sort == "name":
        rows.sort(key=lambda r: r["name"], reverse=order == "desc")
    else:
        rows.sort(key=lambda r: (r.get(sort) or 0, r["name"]), reverse=order == "desc")
    return json_answer({"total": len(rows), "offset": offset, "limit": limit, "sort": sort, "order": order,
                        "namespaces": namespaces, "topics": rows[offset:offset + limit], "unreachable": unreachable,
                        "broker": own_id(request)})
