"""The console's cluster view: ``GET /console/api/session`` (who am I, where)
and ``GET /console/api/overview`` (brokers with leader and load; every
namespace's bundles with owner and state).

A standalone broker is the only broker, leader and owner of one bundle per
namespace; its load is sampled here (a cluster member's comes from its load
report, written every ``load_balancer_report_interval_s``). Namespaces the
role may not read are left out.
"""
from __future__ import annotations

from aiohttp import web

from magnetar import __version__
from magnetar.broker.cluster.bundles import split_namespace
from magnetar.broker.cluster.load_report import LoadSampler
from magnetar.broker.namespaces import resources

from ..access import ROLE, may
from ..params import BROKER, service_of
from ..routes import OBJECT, RouteTable, json_answer
from magnetar.broker.topic_walk import visit_in_slices
from .forward import own_id

table = RouteTable("console")
SAMPLER = web.AppKey("console_sampler", LoadSampler)


@table.route("GET", "/console/api/session", "The console's session: role, broker, cluster", answer=OBJECT,
             errors=(401,))
async def session(request: web.Request) -> web.Response:
    broker = request.app[BROKER]
    service = service_of(request)
    authenticator = getattr(service, "authenticator", None)
    return json_answer({"role": request.get(ROLE), "broker": own_id(request), "version": __version__,
                        "cluster": broker.config.cluster_name, "standalone": service.cluster is None,
                        "authentication": bool(authenticator is not None and authenticator.enabled)})


async def _local_load(request: web.Request) -> dict:
    service = service_of(request)
    sampler = request.app.get(SAMPLER)
    if sampler is None:
        sampler = request.app[SAMPLER] = LoadSampler()
    report = sampler.sample({})
    rates = []

    def visit(t) -> None:
        if hasattr(t, "rates"):
            rates.append(t.rates.rates((t.msg_in, t.bytes_in, t.msg_out, t.bytes_out)))

    await visit_in_slices(list(service.topics.values()), visit)  # the event loop runs between slices
    report["msg_rate_in"] = sum(r[0] for r in rates)
    report["throughput_in"] = sum(r[1] for r in rates)
    report["msg_rate_out"] = sum(r[2] for r in rates)
    report["throughput_out"] = sum(r[3] for r in rates)
    report["topics"] = len(service.topics)
    return report


def _broker_row(broker_id: str, load: dict, leader: str | None, bundles: list[str], url: str) -> dict:
    keys = ("cpu", "cpu_cores", "memory_rss", "memory_total", "msg_rate_in", "msg_rate_out", "throughput_in",
            "throughput_out")
    row = {"id": broker_id, "url": url, "leader": broker_id == leader, "bundles": bundles,
           **{k: load.get(k) for k in keys}}
    row["topics"] = load.get("topics", sum((load.get("bundle_topics") or {}).values()))
    return row


async def readable_namespaces(request: web.Request) -> list[str]:
    """Every namespace of every tenant that the role may read."""
    store = service_of(request).store
    found = []
    for tenant in await resources.list_tenants(store):
        for namespace in await resources.list_namespaces(store, tenant):
            if await may(request, "GET", f"/admin/v2/namespaces/{namespace}"):
                found.append(namespace)
    return sorted(found)


@table.route("GET", "/console/api/overview", "Brokers (leader, load) and every readable namespace's bundles "
             "(range, state, owner)", answer=OBJECT, errors=(401, 503))
async def overview(request: web.Request) -> web.Response:
    service = service_of(request)
    member = service.cluster
    namespaces = []
    for namespace in await readable_namespaces(request):
        if member is None:
            bundles = [{"range": b.range, "state": "Owned", "owner": own_id(request)}
                       for b in split_namespace(namespace, 1)]
        else:
            bundles = []
            for b in member.bundles(namespace):
                state = member.channel.get(b)
                bundles.append({"range": b.range, "state": state.state, "owner": state.broker})
        namespaces.append({"name": namespace, "bundles": bundles})
    if member is None:
        me = own_id(request)
        brokers = [_broker_row(me, await _local_load(request), me, [f"{n['name']}/{b['range']}" for n in namespaces
                                                             for b in n["bundles"]], "http://" + me)]
        leader = me
    else:
        # Imported here: a standalone broker loads no cluster code (test_idle_imports).
        from magnetar.broker.cluster.leader import current_leader
        leader = await current_leader(member.store)
        brokers = [_broker_row(b, info.load, leader, sorted(str(x) for x in member.channel.owned_by(b)),
                               info.web_service_url)
                   for b, info in sorted(member.registry.live.items())]
    return json_answer({"cluster": request.app[BROKER].config.cluster_name, "leader": leader, "brokers": brokers,
                        "namespaces": namespaces, "standalone": member is None})
