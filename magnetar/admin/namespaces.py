"""Namespaces and their policies: ``/admin/v2/namespaces/{tenant}/{namespace}``.

Policies are stored as they are sent (Pulsar's shapes, checked by
:mod:`magnetar.broker.namespaces.policies`): a refused body changes nothing. Retention,
message TTL, backlog quotas and publish and dispatch rates are enforced by
the broker (storage trimming, the expiry task, :mod:`magnetar.broker.policies`);
deduplication is read by the deduplication feature; replication clusters by
geo-replication. ``DELETE`` on a policy unsets it (the broker's default applies
again). Loaded topics see a change at once (the broker watches the policies).
"""
from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

from magnetar.broker.server import lifecycle

from magnetar.broker.namespaces import policies

from magnetar.broker.namespaces import resources

from .params import BROKER, flag, json_body, namespace_of, service_of, store_of, tenant_of
from .routes import BOOLEAN, FORCE, INTEGER, STRING_LIST, QueryParam, RouteTable, json_answer, no_content

table = RouteTable("namespaces")

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
RETENTION = {"type": "object", "properties": {"retentionTimeInMinutes": INTEGER, "retentionSizeInMB": INTEGER},
             "required": ["retentionTimeInMinutes", "retentionSizeInMB"]}
BACKLOG_QUOTA = {"type": "object", "properties": {"limitSize": INTEGER, "limitTime": INTEGER,
                                                   "policy": {"type": "string",
                                                              "enum": list(policies.BACKLOG_QUOTA_POLICIES)}}}
DISPATCH_RATE = {"type": "object", "properties": {
    "dispatchThrottlingRateInMsg": INTEGER, "dispatchThrottlingRateInByte": INTEGER,
    "ratePeriodInSecond": INTEGER, "relativeToPublishRate": BOOLEAN}}
QUOTA_TYPE = QueryParam("backlogQuotaType", {"type": "string", "enum": list(policies.BACKLOG_QUOTA_TYPES)},
                        "Which quota: destination_storage (default) or message_age")
POLICIES = {"type": "object", "properties": {
    "replication_clusters": STRING_LIST, "retention_policies": RETENTION, "message_ttl_in_seconds": INTEGER,
    "deduplicationEnabled": BOOLEAN, "backlog_quota_map": {"type": "object", "additionalProperties": BACKLOG_QUOTA},
}}


@table.route("GET", "/admin/v2/namespaces/{tenant}", "List a tenant's namespaces", answer=STRING_LIST,
             errors=(404, 412))
async def list_namespaces(request: web.Request) -> web.Response:
    return json_answer(await resources.list_namespaces(store_of(request), tenant_of(request)))


@table.route("PUT", NS, "Create a namespace", body=POLICIES, body_required=False, errors=(400, 403, 404, 409, 412),
             description="The tenant must exist. An optional Policies body sets policies at once; "
                         "replication_clusters defaults to this broker's cluster (403 if the tenant does not "
                         "allow a listed cluster).")
async def create_namespace(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    store = store_of(request)
    tenant_name = namespace.split("/")[0]
    tenant = await resources.get_tenant(store, tenant_name)
    allowed = tenant.get("allowedClusters", [])
    initial = policies.validate_policies(await json_body(request, required=False),
                                         await resources.list_clusters(store), allowed, tenant_name)
    local = request.app[BROKER].config.cluster_name
    if "replication_clusters" not in initial and local in allowed:
        # As Pulsar: where it was created (a region serves only the namespaces
        # replicated to it, so another default would leave it unserved here).
        initial["replication_clusters"] = [local]
    await resources.create_namespace(store, namespace, initial)
    return no_content()


@table.route("GET", NS, "Get a namespace's policies", answer=POLICIES, errors=(404, 412))
async def get_policies(request: web.Request) -> web.Response:
    return json_answer(await resources.get_namespace(store_of(request), namespace_of(request)))


@table.route("DELETE", NS, "Delete a namespace", query=(FORCE,), errors=(404, 409, 412),
             description="Refused (409) while it has topics, unless force=true, which deletes them first.")
async def delete_namespace(request: web.Request) -> web.Response:
    await lifecycle.delete_namespace(service_of(request), namespace_of(request), force=flag(request, "force"))
    return no_content()


# -- one policy at a time --------------------------------------------------------
def _policy_routes(suffix: str, field: str, schema: dict, validate: Callable[[Any], Any], what: str) -> None:
    """GET / POST / DELETE ``{NS}/{suffix}`` for one policy field."""

    async def get(request: web.Request) -> web.Response:
        doc = await resources.get_namespace(store_of(request), namespace_of(request))
        return json_answer(doc.get(field))

    async def post(request: web.Request) -> web.Response:
        namespace = namespace_of(request)
        value = validate(await json_body(request))
        await resources.set_policy(store_of(request), namespace, field, value)
        return no_content()

    async def delete(request: web.Request) -> web.Response:
        await resources.set_policy(store_of(request), namespace_of(request), field, None)
        return no_content()

    for handler, verb in ((get, "get"), (post, "set"), (delete, "remove")):
        handler.__name__ = f"{verb}_{suffix}"  # OpenAPI operation ids must be unique
    path = f"{NS}/{suffix}"
    table.route("GET", path, f"Get the {what}", answer=schema, errors=(404, 412))(get)
    table.route("POST", path, f"Set the {what}", body=schema, errors=(400, 404, 412))(post)
    table.route("DELETE", path, f"Remove the {what} (the broker default applies)", errors=(404, 412))(delete)


_policy_routes("retention", "retention_policies", RETENTION, policies.validate_retention,
               "retention policy (-1: no limit; both 0: none)")
_policy_routes("messageTTL", "message_ttl_in_seconds", INTEGER, policies.validate_message_ttl,
               "message TTL in seconds (0: messages never expire)")
_policy_routes("deduplication", "deduplicationEnabled", BOOLEAN, policies.validate_deduplication,
               "deduplication switch")
_policy_routes("publishRate", "publish_rate",
               {"type": "object", "properties": {"publishThrottlingRateInMsg": INTEGER,
                                                 "publishThrottlingRateInByte": INTEGER}},
               policies.validate_publish_rate, "publish rate of each topic (producers over it are slowed)")
_policy_routes("dispatchRate", "dispatch_rate", DISPATCH_RATE, policies.validate_dispatch_rate,
               "dispatch rate of each topic (all its subscriptions together)")
_policy_routes("subscriptionDispatchRate", "subscription_dispatch_rate", DISPATCH_RATE,
               policies.validate_dispatch_rate, "dispatch rate of each subscription")
_policy_routes("maxProducersPerTopic", "max_producers_per_topic", INTEGER,
               lambda v: policies.validate_limit("maxProducersPerTopic", v), "producer limit of each topic (0: none)")
_policy_routes("maxConsumersPerTopic", "max_consumers_per_topic", INTEGER,
               lambda v: policies.validate_limit("maxConsumersPerTopic", v), "consumer limit of each topic (0: none)")
_policy_routes("storageProfile", "storage_profile", {"type": "string", "enum": list(policies.STORAGE_PROFILES)},
               policies.validate_storage_profile,
               "storage profile on object storage (latency: commit at once; cost: gather up to an interval)")


@table.route("GET", f"{NS}/schemaCompatibilityStrategy", "Get the schema compatibility strategy",
             answer={"type": "string", "enum": list(policies.SCHEMA_STRATEGIES)}, errors=(404, 412))
async def get_schema_compatibility_strategy(request: web.Request) -> web.Response:
    """UNDEFINED when unset: the broker's schema_compatibility_strategy applies."""
    doc = await resources.get_namespace(store_of(request), namespace_of(request))
    return json_answer(doc.get("schema_compatibility_strategy") or "UNDEFINED")


@table.route("PUT", f"{NS}/schemaCompatibilityStrategy", "Set the schema compatibility strategy",
             body={"type": "string", "enum": list(policies.SCHEMA_STRATEGIES)}, errors=(400, 404, 412))
async def set_schema_compatibility_strategy(request: web.Request) -> web.Response:
    """New schema versions of the namespace's topics are checked with it
    (the _TRANSITIVE ones against every version); UNDEFINED: the broker's."""
    value = policies.validate_schema_strategy(await json_body(request))
    await resources.set_policy(store_of(request), namespace_of(request), "schema_compatibility_strategy",
                               None if value == "UNDEFINED" else value)
    return no_content()


@table.route("GET", f"{NS}/backlogQuotaMap", "Get the backlog quotas by type",
             answer={"type": "object", "additionalProperties": BACKLOG_QUOTA}, errors=(404, 412))
async def get_backlog_quotas(request: web.Request) -> web.Response:
    doc = await resources.get_namespace(store_of(request), namespace_of(request))
    return json_answer(doc.get("backlog_quota_map") or {})


@table.route("POST", f"{NS}/backlogQuota", "Set a backlog quota", query=(QUOTA_TYPE,),
             body=BACKLOG_QUOTA, errors=(400, 404, 412),
             description="destination_storage enforces limitSize (bytes), message_age limitTime (seconds); "
                         "-1: no limit. Policy producer_request_hold (default), producer_exception or "
                         "consumer_backlog_eviction.")
async def set_backlog_quota(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    kind = policies.validate_backlog_quota_type(request.query.get("backlogQuotaType"))
    quota = policies.validate_backlog_quota(await json_body(request))
    store = store_of(request)
    quotas = dict((await resources.get_namespace(store, namespace)).get("backlog_quota_map") or {})
    quotas[kind] = quota
    await resources.set_policy(store, namespace, "backlog_quota_map", quotas)
    return no_content()


@table.route("DELETE", f"{NS}/backlogQuota", "Remove a backlog quota", query=(QUOTA_TYPE,), errors=(400, 404, 412))
async def remove_backlog_quota(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    kind = policies.validate_backlog_quota_type(request.query.get("backlogQuotaType"))
    store = store_of(request)
    quotas = dict((await resources.get_namespace(store, namespace)).get("backlog_quota_map") or {})
    quotas.pop(kind, None)
    await resources.set_policy(store, namespace, "backlog_quota_map", quotas)
    return no_content()


@table.route("GET", f"{NS}/replication", "Get the replication clusters", answer=STRING_LIST, errors=(404, 412))
async def get_replication(request: web.Request) -> web.Response:
    doc = await resources.get_namespace(store_of(request), namespace_of(request))
    return json_answer(doc.get("replication_clusters") or [])


@table.route("POST", f"{NS}/replication", "Set the replication clusters (stored for geo-replication)",
             body=STRING_LIST, errors=(400, 403, 404, 412))
async def set_replication(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    store = store_of(request)
    await resources.get_namespace(store, namespace)  # 404 before judging the body
    tenant = await resources.get_tenant(store, namespace.split("/")[0])
    clusters = policies.validate_replication_clusters(await json_body(request), await resources.list_clusters(store),
                                                      tenant.get("allowedClusters", []), namespace.split("/")[0])
    await resources.set_policy(store, namespace, "replication_clusters", clusters)
    return no_content()

