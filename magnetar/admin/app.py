"""The admin HTTP server: Pulsar's admin v2 REST API, health, metrics.

Served by the broker process on ``admin_port``. This module wires the parts:
each area of the API is a module with a :class:`~.routes.RouteTable`
(:mod:`.clusters`, :mod:`.tenants`, :mod:`.namespaces`, :mod:`.topics`,
:mod:`.subscriptions`); their routes are registered here, described at
``/admin/v2/openapi.json`` (:mod:`.openapi`), and every error leaves as JSON
``{"reason": ...}`` with Pulsar's status (:mod:`.errors`). See docs/admin.md.
The web console (:mod:`.console`, docs/console.md) is served at ``/console/``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from magnetar.security import tls

from . import (brokers, clusters, compaction, draining, dynamic_config, examine, namespaces, topic_policies, non_persistent, openapi, peek, permissions, schemas,
               subscriptions, tenants, topics)
from .access import access
from .console import assets as console_assets, browse as console_browse, detail as console_detail, \
    history as console_history, lag as console_lag, listing as console_listing, overview as console_overview, \
    produce as console_produce
from .errors import json_errors
from .metrics import BrokerMetrics
from .params import BROKER
from .routes import OBJECT, RouteTable, add_to, json_answer

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker

METRICS = web.AppKey("metrics", BrokerMetrics)
OPENAPI = web.AppKey("openapi", dict)

broker_table = RouteTable("broker")
TABLES = [broker_table, draining.table, dynamic_config.table, brokers.table, permissions.table, clusters.table, tenants.table, namespaces.table, topics.table,
          subscriptions.table, peek.table, examine.table, topic_policies.table, compaction.table, schemas.table, non_persistent.table,
          console_overview.table, console_listing.table, console_detail.table, console_browse.table,
          console_lag.table, console_produce.table]


@broker_table.route("GET", "/admin/v2/brokers/health", "Health check: answers ok while the broker serves",
                    answer={"type": "string"}, errors=())
async def health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@broker_table.route("GET", "/admin/v2/brokers/version", "The broker's version", answer={"type": "string"},
                    errors=())
async def version(request: web.Request) -> web.Response:
    from magnetar import __version__

    return web.Response(text=__version__)


@broker_table.route("GET", "/metrics", "Prometheus metrics (text exposition format)", answer={"type": "string"},
                    errors=())
async def metrics(request: web.Request) -> web.StreamResponse:
    # Streamed: with topic-level series at many topics the text is large,
    # and written a chunk at a time the event loop serves traffic between.
    response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE_LATEST})
    await response.prepare(request)
    async for chunk in request.app[METRICS].chunks():
        await response.write(chunk)
    await response.write_eof()
    return response


@broker_table.route("GET", "/admin/v2/openapi.json", "This API's OpenAPI 3 description", answer=OBJECT, errors=())
async def openapi_json(request: web.Request) -> web.Response:
    return json_answer(request.app[OPENAPI])


def build_app(broker: "Broker") -> web.Application:
    app = web.Application(middlewares=[access, json_errors], client_max_size=2 * 1024 * 1024)
    app[BROKER] = broker
    app[METRICS] = BrokerMetrics(broker)
    app[OPENAPI] = openapi.build(add_to(app, TABLES))
    console_detail.add_owner_routes(app)
    app.cleanup_ctx.append(console_history.keep_history)  # the console's short rate history
    console_assets.add_to(app)  # the web console (docs/console.md): after the API, which wins for /console/api/
    return app


async def start_admin(broker: "Broker", host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve the API on ``port`` (http); returns the runner and the bound port."""
    runner = web.AppRunner(build_app(broker), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound


async def start_admin_tls(runner: web.AppRunner, config, host: str) -> int:
    """The same API over https on ``admin_tls_port`` (client certificates
    checked against ``tls_trust_certs_file`` when given); the bound port.
    Raises TlsSetupError for unusable certificate files, OSError for a busy port."""
    ctx = tls.server_context(config.tls_certificate_file, config.tls_key_file, config.tls_trust_certs_file,
                             config.tls_require_trusted_client_cert)
    site = web.TCPSite(runner, host, config.admin_tls_port, ssl_context=ctx, reuse_address=True)
    await site.start()
    return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
