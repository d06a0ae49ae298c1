"""Topic-level policies on Pulsar's paths: ``{topic}/retention``,
``/messageTTL`` (``?messageTTL=`` seconds), ``/deduplicationEnabled``,
``/maxProducers``, ``/maxConsumers``, ``/publishRate``, ``/dispatchRate``,
``/subscriptionDispatchRate``, ``/backlogQuotaMap`` and
``/backlogQuota`` (``?backlogQuotaType=``).

A policy set on a topic wins over its namespace's (:mod:`magnetar.broker.
namespaces.applied`); on a partitioned topic it applies to every partition.
GET answers the topic's own value (204 when it has none) or, with
``applied=true``, the value in force. DELETE removes the topic's own: the
namespace's applies again. The answer comes once the loaded topic applies
the change (other brokers' partitions follow the watch). Failure
modes: 404 for a topic that does not exist, 400 for a bad value.
"""
from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

from magnetar.broker.namespaces import policies, resources
from magnetar.broker.namespaces.applied import applied_policies

from .errors import not_found
from .namespaces import BACKLOG_QUOTA, DISPATCH_RATE, QUOTA_TYPE, RETENTION
from .params import flag, json_body, service_of, topic_of
from .routes import BOOLEAN, INTEGER, QueryParam, RouteTable, json_answer, no_content
from .topics import TOPIC

table = RouteTable("topic policies")
APPLIED = QueryParam("applied", BOOLEAN, "The value in force (the namespace's when the topic sets none)")


async def _existing_topic(request: web.Request):
    service = service_of(request)
    name = topic_of(request)
    base = name.partitioned_base
    if not (await service.topic_exists(name) or await resources.get_partitions(service.store, base)):
        raise not_found(f"Topic {name} does not exist")
    return name


def _routes(suffix: str, field: str, schema: dict, validate: Callable[[Any], Any], what: str,
            from_query: str | None = None) -> None:
    """GET / POST / DELETE ``{TOPIC}/{suffix}`` for one topic-level policy."""

    async def get(request: web.Request) -> web.Response:
        name = await _existing_topic(request)
        store = service_of(request).store
        doc = await (applied_policies(store, name) if flag(request, "applied")
                     else resources.topic_policies(store, name))
        value = doc.get(field)
        return no_content() if value is None else json_answer(value)

    async def post(request: web.Request) -> web.Response:
        name = await _existing_topic(request)
        if from_query:
            try:
                body: Any = int(request.query.get(from_query, ""))
            except ValueError:
                raise resources.InvalidInput(f"{from_query} must be an integer query parameter") from None
        else:
            body = await json_body(request)
        await resources.set_topic_policy(service_of(request).store, name, field, validate(body))
        await service_of(request).refresh_policies_of(name)
        return no_content()

    async def delete(request: web.Request) -> web.Response:
        name = await _existing_topic(request)
        await resources.set_topic_policy(service_of(request).store, name, field, None)
        await service_of(request).refresh_policies_of(name)
        return no_content()

    for handler, verb in ((get, "get"), (post, "set"), (delete, "remove")):
        handler.__name__ = f"{verb}_topic_{suffix}"  # OpenAPI operation ids must be unique
    path = f"{TOPIC}/{suffix}"
    table.route("GET", path, f"Get the topic's {what}", query=(APPLIED,), answer=schema, errors=(404,))(get)
    query = (QueryParam(from_query, INTEGER, what),) if from_query else ()
    table.route("POST", path, f"Set the topic's {what}", query=query, body=None if from_query else schema,
                errors=(400, 404))(post)
    table.route("DELETE", path, f"Remove the topic's {what} (the namespace's applies)", errors=(404,))(delete)


_routes("retention", "retention_policies", RETENTION, policies.validate_retention, "retention policy")
_routes("messageTTL", "message_ttl_in_seconds", INTEGER, policies.validate_message_ttl,
        "message TTL in seconds", from_query="messageTTL")
_routes("deduplicationEnabled", "deduplicationEnabled", BOOLEAN, policies.validate_deduplication,
        "deduplication switch")
_routes("maxProducers", "max_producers", INTEGER, lambda v: policies.validate_limit("maxProducers", v), "producer limit")
_routes("publishRate", "publish_rate", {"type": "object", "properties": {"publishThrottlingRateInMsg": INTEGER,
                                                                       "publishThrottlingRateInByte": INTEGER}},
        policies.validate_publish_rate, "publish rate (producers over it are slowed)")
_routes("dispatchRate", "dispatch_rate", DISPATCH_RATE, policies.validate_dispatch_rate,
        "dispatch rate (all subscriptions together)")
_routes("subscriptionDispatchRate", "subscription_dispatch_rate", DISPATCH_RATE, policies.validate_dispatch_rate,
        "dispatch rate of each subscription")
_routes("maxConsumers", "max_consumers", INTEGER, lambda v: policies.validate_limit("maxConsumers", v), "consumer limit")


@table.route("GET", f"{TOPIC}/backlogQuotaMap", "Get the topic's backlog quotas by type", query=(APPLIED,),
             answer={"type": "object", "additionalProperties": BACKLOG_QUOTA}, errors=(404,))
async def get_topic_backlog_quotas(request: web.Request) -> web.Response:
    name = await _existing_topic(request)
    store = service_of(request).store
    doc = await (applied_policies(store, name) if flag(request, "applied") else resources.topic_policies(store, name))
    return json_answer(doc.get("backlog_quota_map") or {})


@table.route("POST", f"{TOPIC}/backlogQuota", "Set a backlog quota of the topic", query=(QUOTA_TYPE,),
             body=BACKLOG_QUOTA, errors=(400, 404))
async def set_topic_backlog_quota(request: web.Request) -> web.Response:
    name = await _existing_topic(request)
    kind = policies.validate_backlog_quota_type(request.query.get("backlogQuotaType"))
    quota = policies.validate_backlog_quota(await json_body(request))
    store = service_of(request).store
    quotas = dict((await resources.topic_policies(store, name)).get("backlog_quota_map") or {})
    quotas[kind] = quota
    await resources.set_topic_policy(store, name, "backlog_quota_map", quotas)
    await service_of(request).refresh_policies_of(name)
    return no_content()


@table.route("DELETE", f"{TOPIC}/backlogQuota", "Remove a backlog quota of the topic", query=(QUOTA_TYPE,),
             errors=(400, 404))
async def remove_topic_backlog_quota(request: web.Request) -> web.Response:
    name = await _existing_topic(request)
    kind = policies.validate_backlog_quota_type(request.query.get("backlogQuotaType"))
    store = service_of(request).store
    quotas = dict((await resources.topic_policies(store, name)).get("backlog_quota_map") or {})
    quotas.pop(kind, None)
    await resources.set_topic_policy(store, name, "backlog_quota_map", quotas or None)
    await service_of(request).refresh_policies_of(name)
    return no_content()
