"""Subscriptions of a persistent topic:
``/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription(s)...``.

On a partitioned topic every operation applies to each partition (as in
Pulsar); the list is the union of the partitions' subscriptions. Cursor moves
are :mod:`magnetar.broker.subscriptions.cursor_ops`: skipping, clearing and expiring
acknowledge on the subscription's behalf; resetting disconnects its consumers
(they reconnect and read from the new position).
"""
from __future__ import annotations

from aiohttp import web

from magnetar.broker.subscriptions import cursor_ops

from magnetar.broker.server import lifecycle
from magnetar.broker.subscriptions.subscription import Subscription

from .errors import conflict, not_found, precondition_failed
from .params import flag, int_in_path, json_body, message_id, service_of, topic_of
from .routes import FORCE, MESSAGE_ID, STRING_LIST, RouteTable, json_answer, no_content
from .topics import TOPIC

table = RouteTable("subscriptions")

SUB = TOPIC + "/subscription/{subscription}"


async def _topics(request: web.Request) -> list:
    """The loaded topics the request applies to (the partitions of a partitioned topic)."""
    service = service_of(request)
    names = await lifecycle.targets(service, topic_of(request))
    return [await service.get_topic(name, create=True) for name in names]


async def named_subscriptions(request: web.Request) -> list[Subscription]:
    """The named subscription on every target topic; 404 if it is on none."""
    name = request.match_info["subscription"]
    found = [t.subscriptions[name] for t in await _topics(request) if name in t.subscriptions]
    if not found:
        raise not_found(f"Subscription {name} not found")
    return found


@table.route("GET", TOPIC + "/subscriptions", "List a topic's subscriptions", answer=STRING_LIST,
             errors=(404, 412))
async def list_subscriptions(request: web.Request) -> web.Response:
    names = {name for topic in await _topics(request) for name in topic.subscriptions}
    return json_answer(sorted(names))


@table.route("PUT", SUB, "Create a durable subscription", body=MESSAGE_ID, body_required=False,
             errors=(400, 404, 409, 412),
             description='Starts at the message id in the body ("earliest", "latest" or {ledgerId, entryId}); '
                         "latest without a body.")
async def create_subscription(request: web.Request) -> web.Response:
    name = request.match_info["subscription"]
    body = await json_body(request, required=False)
    ledger_id, entry_id, excluded = message_id("latest" if body is None else body)
    topics = await _topics(request)
    if any(name in t.subscriptions for t in topics):
        raise conflict(f"Subscription {name} already exists")
    for topic in topics:
        earliest = ledger_id < 0 or entry_id < 0
        latest = ledger_id >= cursor_ops.INT64_MAX or entry_id >= cursor_ops.INT64_MAX
        position = None if earliest or latest else cursor_ops.position_for_message_id(
            topic, ledger_id, entry_id, excluded)
        try:
            await cursor_ops.create(topic, name, position, earliest=earliest)
        except KeyError:
            raise conflict(f"Subscription {name} already exists") from None
    return no_content()


@table.route("DELETE", SUB, "Delete a subscription", query=(FORCE,), errors=(404, 412),
             description="Refused (412) while consumers are connected, unless force=true.")
async def delete_subscription(request: web.Request) -> web.Response:
    subs = await named_subscriptions(request)
    if any(s.consumers for s in subs) and not flag(request, "force"):
        raise precondition_failed(f"Subscription {subs[0].name} has active connected consumers (use force)")
    for sub in subs:
        await sub.topic.unsubscribe(sub.name)
    return no_content()


@table.route("POST", SUB + "/resetcursor/{timestamp}", "Reset the cursor to a publish time (ms)",
             errors=(400, 404, 412))
async def reset_cursor_to_time(request: web.Request) -> web.Response:
    timestamp = int_in_path(request, "timestamp")
    for sub in await named_subscriptions(request):
        await cursor_ops.reset_to_time(sub, timestamp)
    return no_content()


@table.route("POST", SUB + "/resetcursor", "Reset the cursor to a message id", body=MESSAGE_ID,
             errors=(400, 404, 412))
async def reset_cursor_to_message(request: web.Request) -> web.Response:
    ledger_id, entry_id, excluded = message_id(await json_body(request))
    for sub in await named_subscriptions(request):
        await cursor_ops.reset_to(sub, cursor_ops.position_for_message_id(sub.topic, ledger_id, entry_id, excluded))
    return no_content()


@table.route("POST", SUB + "/skip/{numMessages}", "Skip the next n entries of the backlog", errors=(400, 404, 412))
async def skip(request: web.Request) -> web.Response:
    count = int_in_path(request, "numMessages", low=1)
    for sub in await named_subscriptions(request):
        await cursor_ops.skip(sub, count)
    return no_content()


@table.route("POST", SUB + "/skip_all", "Skip the whole backlog", errors=(404, 412))
async def skip_all(request: web.Request) -> web.Response:
    for sub in await named_subscriptions(request):
        await cursor_ops.clear_backlog(sub)
    return no_content()


@table.route("POST", SUB + "/expireMessages/{expireTimeInSeconds}",
             "Expire the backlog older than the given age (seconds)", errors=(400, 404, 412))
async def expire_messages(request: web.Request) -> web.Response:
    seconds = int_in_path(request, "expireTimeInSeconds")
    for sub in await named_subscriptions(request):
        await cursor_ops.expire(sub, seconds)
    return no_content()


@table.route("POST", TOPIC + "/all_subscription/expireMessages/{expireTimeInSeconds}",
             "Expire the backlog older than the given age on every subscription", errors=(400, 404, 412))
async def expire_all(request: web.Request) -> web.Response:
    seconds = int_in_path(request, "expireTimeInSeconds")
    for topic in await _topics(request):
        for sub in list(topic.subscriptions.values()):
            if sub.durable:
                await cursor_ops.expire(sub, seconds)
    return no_content()

