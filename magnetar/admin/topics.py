"""Persistent topics: ``/admin/v2/persistent/{tenant}/{namespace}/{topic}``.

Listing, creating and deleting topics (non-partitioned and partitioned, with
the rules of :mod:`magnetar.broker.server.lifecycle`), stats, unload and terminate.
Subscription operations are in :mod:`.subscriptions`.

Operations that act on one topic's state (stats, internalStats, terminate)
refuse a partitioned topic's base name with 404 and a hint, as Pulsar does;
use a partition's name or ``partitioned-stats``. Unload applies to every
partition.

More topic routes (e.g. ``PUT/GET {TOPIC}/compaction``) are added here with
``@table.route`` like the ones below; the OpenAPI description follows.
"""
from __future__ import annotations

import asyncio

from aiohttp import web

from magnetar.broker.server import lifecycle

from magnetar.broker.namespaces import policies, resources
from magnetar.broker.topic_name import TopicName
from magnetar.broker.topics.stats import fill_backlog_times
from magnetar.protocol.commands import signed64

from .errors import AdminError, bad_request, not_found
from .params import flag, json_body, namespace_of, service_of, topic_of
from .partitioned_stats import merge_partitions
from .routes import (BOOLEAN, FORCE, INTEGER, MESSAGE_ID, OBJECT, STRING_LIST, QueryParam, RouteTable, json_answer,
                     no_content)

table = RouteTable("topics")

NS = "/admin/v2/persistent/{tenant}/{namespace}"
TOPIC = NS + "/{topic}"
PARTITIONS = {"type": "object", "properties": {"partitions": INTEGER}}
PARTITION_COUNT = {"type": "integer", "minimum": 1, "maximum": lifecycle.MAX_PARTITIONS}


async def _require_namespace(request: web.Request) -> str:
    namespace = namespace_of(request)
    if not await resources.namespace_exists(service_of(request).store, namespace):  # listing: even while deleted
        raise not_found(f"Namespace {namespace} does not exist")
    return namespace


async def loaded_topic(request: web.Request, name: TopicName | None = None):
    """The topic named in the path, loaded; 404 if it does not exist (or is
    a partitioned topic's base name)."""
    service = service_of(request)
    name = name or topic_of(request)
    if await resources.get_partitions(service.store, name):
        raise not_found(f"{name} is a partitioned topic: use a partition ({name}-partition-<i>) "
                        "or partitioned-stats")
    if not await service.topic_exists(name):
        raise not_found(f"Topic {name} does not exist")
    return await service.get_topic(name, create=False)


# -- listing ------------------------------------------------------------------------
@table.route("GET", NS, "List a namespace's topics (partitions included)", answer=STRING_LIST, errors=(404, 412))
async def list_topics(request: web.Request) -> web.Response:
    namespace = await _require_namespace(request)
    return json_answer(await lifecycle.namespace_topics(service_of(request), namespace))


@table.route("GET", NS + "/partitioned", "List a namespace's partitioned topics", answer=STRING_LIST,
             errors=(404, 412))
async def list_partitioned(request: web.Request) -> web.Response:
    namespace = await _require_namespace(request)
    return json_answer(await resources.list_partitioned(service_of(request).store, namespace))


# -- non-partitioned topics --------------------------------------------------------
@table.route("PUT", TOPIC, "Create a non-partitioned topic", errors=(404, 409, 412))
async def create_topic(request: web.Request) -> web.Response:
    await lifecycle.create_topic(service_of(request), topic_of(request))
    return no_content()


@table.route("DELETE", TOPIC, "Delete a topic (or one partition) with its subscriptions and data",
             query=(FORCE,), errors=(404, 409, 412),
             description="Refused (412) while producers or consumers are attached, unless force=true.")
async def delete_topic(request: web.Request) -> web.Response:
    await lifecycle.delete_topic(service_of(request), topic_of(request), force=flag(request, "force"))
    return no_content()


# -- partitioned topics ------------------------------------------------------------
async def _partition_count(request: web.Request) -> int:
    body = await json_body(request)
    try:
        return lifecycle.check_partition_count(body)
    except resources.InvalidInput as exc:
        raise bad_request(str(exc)) from None


@table.route("PUT", TOPIC + "/partitions", "Create a partitioned topic", body=PARTITION_COUNT,
             errors=(400, 404, 409, 412))
async def create_partitioned(request: web.Request) -> web.Response:
    name = topic_of(request)
    count = await _partition_count(request)
    await lifecycle.create_partitioned_topic(service_of(request), name, count)
    return no_content()


@table.route("POST", TOPIC + "/partitions", "Grow a partitioned topic (the count only increases)",
             body=PARTITION_COUNT, errors=(400, 404, 409, 412))
async def update_partitioned(request: web.Request) -> web.Response:
    name = topic_of(request)
    count = await _partition_count(request)
    await lifecycle.update_partitioned_topic(service_of(request), name, count)
    return no_content()


@table.route("GET", TOPIC + "/partitions", "Get a topic's partition count (0: not partitioned)",
             answer=PARTITIONS, errors=(404, 412))
async def get_partitions(request: web.Request) -> web.Response:
    service = service_of(request)
    name = topic_of(request)
    count = await resources.get_partitions(service.store, name)
    if not count and not await service.topic_exists(name):
        if flag(request, "checkAllowAutoCreation"):
            # The official client's HTTP lookup asks this first for a topic it
            # is about to create: answer as PARTITIONED_METADATA does (auto
            # creation, default partitions; TopicNotFound if it may not be made).
            count = await lifecycle.partitioned_metadata(service, name, auto_create=True)
            return json_answer({"partitions": count})
        raise not_found(f"Topic {name} does not exist")
    return json_answer({"partitions": count})


@table.route("DELETE", TOPIC + "/partitions", "Delete a partitioned topic and all its partitions",
             query=(FORCE,), errors=(404, 412))
async def delete_partitioned(request: web.Request) -> web.Response:
    await lifecycle.delete_partitioned_topic(service_of(request), topic_of(request), force=flag(request, "force"))
    return no_content()


# -- state -----------------------------------------------------------------------------
EARLIEST = QueryParam("getEarliestTimeInBacklog", BOOLEAN, "Also read the publish time of each subscription's "
                      "first unacknowledged entry (earliestMsgPublishTimeInBacklog; 0 otherwise)")
PER_PARTITION = QueryParam("perPartition", BOOLEAN, "List each partition's stats under partitions (default true)")


async def _topic_stats(request: web.Request, topic) -> dict:
    doc = topic.stats()
    if flag(request, "getEarliestTimeInBacklog"):
        await fill_backlog_times(topic, doc)
    return doc


@table.route("GET", TOPIC + "/stats", "Get a topic's stats", query=(EARLIEST,), answer=OBJECT, errors=(404, 412))
async def stats(request: web.Request) -> web.Response:
    return json_answer(await _topic_stats(request, await loaded_topic(request)))


@table.route("GET", TOPIC + "/internalStats", "Get a topic's storage-level stats", answer=OBJECT, errors=(404, 412))
async def internal_stats(request: web.Request) -> web.Response:
    return json_answer((await loaded_topic(request)).internal_stats())


@table.route("GET", TOPIC + "/partitioned-stats", "Get a partitioned topic's stats, summed over its partitions",
             query=(PER_PARTITION, EARLIEST), answer=OBJECT, errors=(404, 412))
async def partitioned_stats(request: web.Request) -> web.Response:
    service = service_of(request)
    name = topic_of(request)
    count = await resources.get_partitions(service.store, name)
    if not count:
        raise not_found(f"Partitioned topic {name} does not exist")
    # Loaded together (the service bounds how many load at once), not one
    # after the other: an idle partitioned topic's partitions are unloaded.
    partitions = _partitions(name, count)
    loaded = await asyncio.gather(*(service.get_topic(p, create=True) for p in partitions))
    per_partition = {str(p): await _topic_stats(request, topic) for p, topic in zip(partitions, loaded)}
    total = merge_partitions(per_partition, count)
    if flag(request, "perPartition", default=True):
        total["partitions"] = per_partition
    return json_answer(total)


def _partitions(name: TopicName, count: int) -> list[TopicName]:
    return [name.partition(i) for i in range(count)]


@table.route("GET", TOPIC + "/lastMessageId", "Get the id of the topic's last message", answer=MESSAGE_ID,
             errors=(404, 412))
async def last_message_id(request: web.Request) -> web.Response:
    topic = await loaded_topic(request)
    mid = await topic.last_message_id()
    return json_answer({"ledgerId": signed64(mid.ledgerId), "entryId": signed64(mid.entryId), "partitionIndex": -1})


# -- lifecycle actions -------------------------------------------------------------------
@table.route("PUT", TOPIC + "/unload", "Unload a topic (clients reconnect; it is reloaded on demand)",
             errors=(404, 412))
async def unload(request: web.Request) -> web.Response:
    service = service_of(request)
    for name in await lifecycle.targets(service, topic_of(request)):
        topic = service.topics.get(str(name))
        if topic is not None:
            await service.unload(topic)
    return no_content()


@table.route("POST", TOPIC + "/terminate", "Terminate a topic: no more publishes, ever", answer=MESSAGE_ID,
             errors=(404, 405, 412),
             description="Answers the last message id. Later producers get TopicTerminatedError.")
async def terminate(request: web.Request) -> web.Response:
    service = service_of(request)
    name = topic_of(request)
    if await resources.get_partitions(service.store, name):
        raise AdminError(405, f"{name} is partitioned: terminate its partitions one by one")
    topic = await loaded_topic(request, name)
    last = await topic.terminate()
    return json_answer({"ledgerId": last.ledger_id, "entryId": last.entry_id, "partitionIndex": -1})


# -- topic-level replication clusters (regions: docs/regions.md) ---------------------
@table.route("GET", TOPIC + "/replication", "Get the topic's own replication clusters ([] when the "
             "namespace's apply; ?applied=true: the ones in effect)", answer=STRING_LIST, errors=(412,))
async def get_replication(request: web.Request) -> web.Response:
    name = topic_of(request)
    store = service_of(request).store
    clusters = await resources.topic_replication_clusters(store, name)
    if clusters is None and flag(request, "applied"):
        clusters = (await resources.namespace_policies(store, name.namespace_name)).get("replication_clusters")
    return json_answer(clusters or [])


@table.route("POST", TOPIC + "/replication", "Set the topic's replication clusters (over the namespace's)",
             body=STRING_LIST, errors=(400, 403, 404, 412))
async def set_replication(request: web.Request) -> web.Response:
    name = topic_of(request)
    store = service_of(request).store
    namespace = await _require_namespace(request)
    tenant = await resources.get_tenant(store, namespace.split("/")[0])
    clusters = policies.validate_replication_clusters(await json_body(request), await resources.list_clusters(store),
                                                      tenant.get("allowedClusters", []), name.tenant)
    await resources.set_topic_replication_clusters(store, name, clusters)
    return no_content()


@table.route("DELETE", TOPIC + "/replication", "Remove the topic's replication clusters (the namespace's apply)",
             errors=(412,))
async def remove_replication(request: web.Request) -> web.Response:
    await resources.set_topic_replication_clusters(service_of(request).store, topic_of(request), None)
    return no_content()
