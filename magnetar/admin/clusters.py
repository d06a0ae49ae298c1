"""Clusters: ``/admin/v2/clusters``. Read-only: the broker records its own
cluster at start (name from ``cluster_name``, URLs from its listeners)."""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.namespaces import resources

from .params import store_of
from .routes import STRING, STRING_LIST, RouteTable, json_answer

table = RouteTable("clusters")

CLUSTER_DATA = {"type": "object", "properties": {"serviceUrl": STRING, "brokerServiceUrl": STRING,
                                               "serviceUrlTls": STRING, "brokerServiceUrlTls": STRING}}


@table.route("GET", "/admin/v2/clusters", "List the clusters", answer=STRING_LIST, errors=())
async def list_clusters(request: web.Request) -> web.Response:
    return json_answer(await resources.list_clusters(store_of(request)))


@table.route("GET", "/admin/v2/clusters/{cluster}", "Get a cluster's data", answer=CLUSTER_DATA)
async def get_cluster(request: web.Request) -> web.Response:
    cluster = request.match_info["cluster"]
    try:
        return json_answer(await resources.get_cluster(store_of(request), cluster))
    except resources.InvalidInput:
        raise resources.ResourceNotFound(f"Cluster {cluster} does not exist") from None


