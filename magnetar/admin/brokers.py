"""Brokers, bundles and lookups: ``/admin/v2/brokers``, namespace bundles and
``/lookup/v2/topic``, on Pulsar's paths.

A standalone broker is the only broker, leader and owner of everything; a
cluster member answers from the cluster's registry and bundle state channel
(``magnetar.broker.cluster``). The lookup answers with the owner's URLs (an
unowned bundle is assigned first), so ``http://`` service URLs work.
Failure modes: a malformed topic name is 412, a namespace that does not
exist 404, a bundle still in transition after the lookup timeout 503.
"""
from __future__ import annotations

import time

from aiohttp import web

from magnetar.broker.cluster.bundles import RANGE_EQUALLY_DIVIDE, SPLIT_ALGORITHMS, parse_range, split_namespace, \
    split_point
from magnetar.broker.namespaces import resources

from .errors import AdminError, not_found, precondition_failed
from .params import BROKER, namespace_of, service_of, store_of, topic_of
from .routes import OBJECT, STRING, STRING_LIST, QueryParam, RouteTable, json_answer, no_content

table = RouteTable("brokers")

LOOKUP_DATA = {"type": "object", "properties": {"brokerUrl": STRING, "httpUrl": STRING, "nativeUrl": STRING,
                                                "brokerUrlTls": STRING, "httpUrlTls": STRING}}


def _member(request: web.Request):
    return service_of(request).cluster


def _own_id(request: web.Request) -> str:
    broker = request.app[BROKER]
    return f"{broker.config.advertised_address}:{broker.admin_port}"


@table.route("GET", "/admin/v2/brokers/leaderBroker", "The leader broker", answer=OBJECT, errors=(404,))
async def leader_broker(request: web.Request) -> web.Response:
    member = _member(request)
    if member is None:
        broker = request.app[BROKER]
        return json_answer({"brokerId": _own_id(request), "serviceUrl": broker.config.web_service_url})
    from magnetar.broker.cluster.leader import current_leader  # a member's code: loaded by clustered brokers

    leader = await current_leader(member.store)
    if leader is None:
        raise not_found("no leader broker right now (an election is under way)")
    info = member.registry.live.get(leader)
    return json_answer({"brokerId": leader, "serviceUrl": info.web_service_url if info else ""})


@table.route("GET", "/admin/v2/brokers/{cluster}", "The live brokers of a cluster (host:web port)",
             answer=STRING_LIST)
async def list_brokers(request: web.Request) -> web.Response:
    cluster = request.match_info["cluster"]
    if cluster not in await resources.list_clusters(store_of(request)):
        raise not_found(f"Cluster {cluster} does not exist")
    member = _member(request)
    if member is None:
        return json_answer([_own_id(request)])
    return json_answer(sorted(b for b, info in member.registry.live.items() if info.cluster == cluster))


@table.route("GET", "/admin/v2/broker-stats/load-report",
             "Each live broker's last load report (message rates in, per bundle) and the bundles it owns",
             answer=OBJECT, errors=())
async def load_report(request: web.Request) -> web.Response:
    member = _member(request)
    if member is None:
        return json_answer({_own_id(request): {"load": {}, "bundles": []}})
    return json_answer({broker: {"load": info.load, "bundles": sorted(str(b) for b in member.channel.owned_by(broker)),
                                 "started": info.started, "draining": info.draining}
                        for broker, info in sorted(member.registry.live.items())})


@table.route("GET", "/admin/v2/namespaces/{tenant}/{namespace}/bundles",
             "The namespace's bundles (Pulsar's BundlesData) and, as a Magnetar extension, each one's "
             "state and owner", answer=OBJECT)
async def bundles(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    if not await resources.namespace_exists(store_of(request), namespace):
        raise not_found(f"Namespace {namespace} does not exist")
    member = _member(request)
    parts = member.bundles(namespace) if member is not None else split_namespace(namespace, 1)
    owners, states = {}, {}
    for b in parts:
        if member is None:
            owners[b.range], states[b.range] = _own_id(request), "Owned"
        else:
            state = member.channel.get(b)
            owners[b.range], states[b.range] = (state.broker if state.state == "Owned" else None), state.state
    boundaries = [f"0x{b.lower:08x}" for b in parts] + ["0xffffffff"]
    return json_answer({"boundaries": boundaries, "numBundles": len(parts), "owners": owners, "states": states})


@table.route("PUT", "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload",
             "Move a bundle to another broker (destinationBroker, default the least loaded); clients follow "
             "without a lookup (PIP-307) unless load_balancer_multi_phase_bundle_unload is off",
             query=(QueryParam("destinationBroker", STRING, "Broker id (host:web port) to move the bundle to"),),
             answer=None, errors=(404, 412, 503))
async def unload_bundle(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    member = _member(request)
    if member is None:
        raise precondition_failed("this broker is standalone: it owns every bundle and has nowhere to move one")
    bundle = _bundle_of_request(request, member, namespace)
    try:
        await member.unload(bundle, request.query.get("destinationBroker") or None)
    except ValueError as exc:
        raise precondition_failed(str(exc)) from None
    except TimeoutError:
        raise AdminError(503, f"bundle {bundle} did not reach its new owner in time; it will, or the leader "
                              "will reassign it") from None
    return no_content()


def _bundle_of_request(request: web.Request, member, namespace: str):
    try:
        bundle = parse_range(namespace, request.match_info["bundle"])
    except ValueError as exc:
        raise precondition_failed(str(exc)) from None
    if bundle not in member.bundles(namespace):
        raise not_found(f"{namespace} has no bundle {bundle.range} (list them: GET .../bundles)")
    return bundle


@table.route("PUT", "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split",
             "Split a bundle in two (splitAlgorithmName: range_equally_divide, the default, or "
             "topic_count_equally_divide); its owner keeps both halves and their clients",
             query=(QueryParam("splitAlgorithmName", STRING, "How to choose the cut"),
                    QueryParam("unload", STRING, "Accepted for Pulsar's API; the halves are not unloaded")),
             answer=None, errors=(404, 412, 503))
async def split_bundle(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    member = _member(request)
    if member is None:
        raise precondition_failed("this broker is standalone: its namespaces are one bundle and are not split")
    bundle = _bundle_of_request(request, member, namespace)
    algorithm = request.query.get("splitAlgorithmName") or RANGE_EQUALLY_DIVIDE
    if algorithm not in SPLIT_ALGORITHMS:
        raise precondition_failed(f"unknown splitAlgorithmName {algorithm!r}: use one of {', '.join(SPLIT_ALGORITHMS)}")
    from magnetar.broker.cluster.channel import LostRace  # a member's code: loaded by clustered brokers

    try:
        topics = await service_of(request).topics_of_namespace(namespace) if algorithm != RANGE_EQUALLY_DIVIDE else []
        await member.split(bundle, split_point(bundle, algorithm, topics))
    except (ValueError, LostRace) as exc:
        raise precondition_failed(str(exc)) from None
    except RuntimeError as exc:
        raise AdminError(503, str(exc)) from None
    except TimeoutError:
        raise AdminError(503, f"bundle {bundle} was not split in time; its owner may still finish it") from None
    return no_content()


@table.route("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle",
             "The bundle that holds a topic (Pulsar's topics bundle-range)", answer=OBJECT, errors=(404, 412))
async def topic_bundle(request: web.Request) -> web.Response:
    name = topic_of(request)
    if not await resources.namespace_exists(store_of(request), name.namespace_name):
        raise not_found(f"Namespace {name.namespace_name} does not exist")
    member = _member(request)
    rng = member.bundle_of(name).range if member is not None else "0x00000000_0xffffffff"
    return json_answer({"namespace": name.namespace_name, "bundle": rng})


@table.route("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
             "The broker that serves a topic (assigns its bundle first if nobody owns it)", answer=LOOKUP_DATA,
             errors=(404, 412, 503))
async def lookup(request: web.Request) -> web.Response:
    domain = request.match_info["domain"]
    if domain not in ("persistent", "non-persistent"):
        raise precondition_failed(f"Topic domain must be persistent or non-persistent, not {domain!r}")
    name = topic_of(request)
    service = service_of(request)
    if not await resources.namespace_exists(store_of(request), name.namespace_name):
        raise not_found(f"Namespace {name.namespace_name} does not exist")
    await service.check_served_here(name)  # 412 in a region outside the topic's replication clusters
    member = service.cluster
    started = time.monotonic()
    if member is None:
        broker = request.app[BROKER]
        config = broker.config
        native, http, listeners = config.service_url, config.web_service_url, config.listeners
        native_tls, http_tls = broker.service_url_tls, broker.web_service_url_tls
        service.lookup_answers += 1
    else:
        result = await member.lookup(name)
        native, http, listeners = result.service_url, result.web_service_url, result.listeners
        native_tls, http_tls = result.service_url_tls, result.web_service_url_tls
        service.lookup_answers += 1
        if not result.local:
            service.lookup_redirects += 1
    service.lookup_seconds.observe(time.monotonic() - started)
    # The TLS URLs are "" for a broker without TLS listeners, as Pulsar answers.
    answer = {"brokerUrl": native, "nativeUrl": native, "httpUrl": http, "brokerUrlTls": native_tls,
              "httpUrlTls": http_tls}
    listener = request.query.get("listenerName") or request.headers.get("X-Pulsar-ListenerName")
    if listener:
        url = listeners.get(listener)
        if url is None:
            raise AdminError(503, f"the broker has no listener named {listener!r}: check listenerName "
                                      f"against advertised_listeners")
        key = "brokerUrlTls" if url.startswith("pulsar+ssl://") else "brokerUrl"
        answer[key] = url
        if key == "brokerUrl":
            answer["nativeUrl"] = url
    return json_answer(answer)
