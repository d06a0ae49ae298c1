"""The admin HTTP server: health, metrics, topic stats (Pulsar admin v2 paths).

Served by the broker process on ``admin_port``. Errors are JSON
``{"reason": ...}`` with Pulsar's status codes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from magnetar.broker.topic_name import InvalidTopicName, parse

if TYPE_CHECKING:
    from magnetar.broker.server import Broker


def _reason(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


class _TopicCollector:
    """Prometheus collector reading live topic state at scrape time."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def collect(self):
        msg_in = CounterMetricFamily("magnetar_topic_messages_in", "Messages published", labels=["topic"])
        bytes_in = CounterMetricFamily("magnetar_topic_bytes_in", "Bytes stored", labels=["topic"])
        storage = GaugeMetricFamily("magnetar_topic_storage_bytes", "Bytes in storage", labels=["topic"])
        backlog = GaugeMetricFamily("magnetar_subscription_backlog_entries", "Entries not yet acknowledged",
                                    labels=["topic", "subscription"])
        producers = GaugeMetricFamily("magnetar_topic_producers", "Attached producers", labels=["topic"])
        service = self.broker.service
        for topic in list(service.topics.values()) if service else []:
            name = str(topic.name)
            msg_in.add_metric([name], topic.msg_in)
            bytes_in.add_metric([name], topic.bytes_in)
            storage.add_metric([name], topic.ledger.total_size)
            producers.add_metric([name], len(topic.producers))
            for sub_name, sub in topic.subscriptions.items():
                backlog.add_metric([name, sub_name], sub.backlog())
        yield from (msg_in, bytes_in, storage, backlog, producers)


def build_app(broker: "Broker") -> web.Application:
    registry = CollectorRegistry()
    registry.register(_TopicCollector(broker))
    routes = web.RouteTableDef()

    @routes.get("/admin/v2/brokers/health")
    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    @routes.get("/metrics")
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @routes.get("/admin/v2/persistent/{tenant}/{namespace}")
    async def list_topics(request: web.Request) -> web.Response:
        ns = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
        return web.json_response(await broker.service.topics_of_namespace(ns))

    async def _topic(request: web.Request):
        raw = "persistent://{tenant}/{namespace}/{topic}".format(**request.match_info)
        try:
            name = parse(raw)
        except InvalidTopicName as exc:
            raise web.HTTPException(reason=str(exc)) from None
        if not await broker.service.topic_exists(name):
            return None
        return await broker.service.get_topic(name, create=False)

    @routes.get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/stats")
    async def stats(request: web.Request) -> web.Response:
        topic = await _topic(request)
        if topic is None:
            return _reason(404, "Topic not found")
        return web.json_response(topic.stats())

    @routes.get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/internalStats")
    async def internal_stats(request: web.Request) -> web.Response:
        topic = await _topic(request)
        if topic is None:
            return _reason(404, "Topic not found")
        return web.json_response(topic.internal_stats())

    app = web.Application()
    app.add_routes(routes)
    return app


async def start_admin(broker: "Broker", host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(build_app(broker), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound
