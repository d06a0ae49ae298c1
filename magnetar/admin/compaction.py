"""Topic compaction: ``PUT/GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction``.

PUT starts compacting the topic in the background (204), or answers 409 if a
run is already going, as Pulsar does. GET answers the status of the last run
in Pulsar's LongRunningProcessStatus form: ``{"status": "NOT_RUN" | "RUNNING"
| "SUCCESS" | "ERROR", "lastError": "..."}``. The status lives in the broker's
memory: after a restart it is NOT_RUN again (the compacted view itself is
durable). See :mod:`magnetar.broker.topics.compaction`.
"""
from __future__ import annotations

from aiohttp import web

from .errors import conflict
from .params import service_of
from .routes import RouteTable, json_answer, no_content
from .topics import TOPIC, loaded_topic

table = RouteTable("compaction")

STATUS = {
    "type": "object",
    "properties": {"status": {"type": "string", "enum": ["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]},
                   "lastError": {"type": "string"}},
}


@table.route("PUT", TOPIC + "/compaction", "Start compacting a topic (latest value per key)", errors=(404, 409))
async def trigger_compaction(request: web.Request) -> web.Response:
    topic = await loaded_topic(request)
    if not service_of(request).compactor.trigger(topic):
        raise conflict(f"compaction of {topic.name} is already running")
    return no_content()


@table.route("GET", TOPIC + "/compaction", "Status of the topic's last compaction", answer=STATUS, errors=(404,))
async def compaction_status(request: web.Request) -> web.Response:
    topic = await loaded_topic(request)
    return json_answer(service_of(request).compactor.status_of(str(topic.name)))
