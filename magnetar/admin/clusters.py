"""Clusters: ``/admin/v2/clusters``. The broker records its own cluster at
start (name from ``cluster_name``, URLs from its listeners); others (remote
regions) are created, updated and deleted here, as with pulsar-admin:
PUT creates (409 if it exists), POST replaces its data (404 if unknown),
DELETE forgets it (412 for the broker's own, or one a namespace replicates
to)."""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.namespaces import resources

from .params import BROKER, json_body, store_of
from .routes import STRING, STRING_LIST, RouteTable, json_answer, no_content

table = RouteTable("clusters")

CLUSTER_DATA = {"type": "object", "properties": {name: STRING for name in resources.CLUSTER_FIELDS}}


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




@table.route("PUT", "/admin/v2/clusters/{cluster}", "Create a cluster", body=CLUSTER_DATA, errors=(400, 409, 412))
async def create_cluster(request: web.Request) -> web.Response:
    await resources.create_cluster(store_of(request), request.match_info["cluster"], await json_body(request))
    return no_content()


@table.route("POST", "/admin/v2/clusters/{cluster}", "Update a cluster's data", body=CLUSTER_DATA,
             errors=(400, 404, 412))
async def update_cluster(request: web.Request) -> web.Response:
    await resources.update_cluster(store_of(request), request.match_info["cluster"], await json_body(request))
    return no_content()


@table.route("DELETE", "/admin/v2/clusters/{cluster}", "Delete a cluster", errors=(404, 412))
async def delete_cluster(request: web.Request) -> web.Response:
    own = request.app[BROKER].config.cluster_name
    await resources.delete_cluster(store_of(request), request.match_info["cluster"], own)
    return no_content()
