"""Consumers: SUBSCRIBE, delivery of MESSAGE frames, FLOW, ACK, REDELIVER,
UNSUBSCRIBE, CLOSE_CONSUMER, SEEK, GET_LAST_MESSAGE_ID.

Consumers are resolved when a frame arrives, not when its task runs (the
routing in ``server.connection`` does it), so a CLOSE_CONSUMER right behind
an ACK cannot orphan the ack. Failure modes: an unknown consumer id gets
ConsumerNotFound; a storage failure during a seek gets PersistenceError.
"""
from __future__ import annotations

import asyncio
import itertools
import logging

from magnetar.broker.entries.entry_format import strip_broker_entry_metadata
from magnetar.broker.errors import BrokerError, ConsumerBusy, NotAllowed
from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.broker.topics.topic import Topic
from magnetar.log_budget import LogBudget
from magnetar.metadata import MetadataError
from magnetar.protocol import ServerError, pb
from magnetar.protocol.commands import Type, command, error, message_id, signed64, success
from magnetar.protocol.frames import Frame, encode_payload_command
from magnetar.storage import Entry, Position, StorageError

from .. import permissions
from .session import UINT64_MAX, ClientSession, topic_name

log = logging.getLogger(__name__)
# While etcd stalls every ack can fail, thousands a second: a few lines per
# window say so, and the count of the rest rides on the next line written.
ack_log = LogBudget(log)

_MESSAGE = Type.MESSAGE
_names = itertools.count()


def wire_position(mid: pb.MessageIdData) -> Position:
    """The position a client's message id names.

    Pulsar's ids are signed 64-bit numbers carried in uint64 fields. A client
    acknowledging cumulatively up to the message *before* a partly consumed
    batch in entry 0 of a ledger sends entry -1 (2^64-1 on the wire): "nothing
    of this ledger". Read unsigned, it would acknowledge the whole ledger and
    the cursor would skip what was not delivered yet.
    """
    return Position(signed64(mid.ledgerId), signed64(mid.entryId))


def subscribed(consumer: Consumer | None) -> Consumer:
    """The consumer, once its SUBSCRIBE has completed; ConsumerNotFound before
    (a client may send frames for a consumer whose subscribe is pending)."""
    if consumer is None:
        raise BrokerError("unknown consumer id", ServerError.ConsumerNotFound)
    if consumer.subscription is None:
        raise BrokerError("the consumer's subscribe has not completed", ServerError.ConsumerNotFound)
    return consumer


def on_subscribe(session: ClientSession, frame: Frame) -> None:
    """SUBSCRIBE: the consumer is registered now, in frame order (a FLOW,
    ACK or CLOSE_CONSUMER right behind it finds it, not ready yet: see
    :func:`subscribed`); the subscribing itself runs as a task."""
    req = frame.command.subscribe
    if req.consumer_id in session.consumers:
        session.write(success(req.request_id))
        return
    try:
        name = topic_name(req.topic)
        if not req.subscription:
            raise NotAllowed("a subscription needs a name")
    except BrokerError as exc:
        session.write(error(req.request_id, exc.code, str(exc)))
        return
    consumer = Consumer(
        consumer_id=req.consumer_id,
        name=req.consumer_name or f"consumer-{next(_names)}",
        subscription=None,  # type: ignore[arg-type]  (set by subscribe)
        priority_level=req.priority_level,
        address=session.peer,
        key_shared_meta=req.keySharedMeta if req.HasField("keySharedMeta") else None,
        read_compacted=req.read_compacted,
        partition=name.partition_index,
        sink=ConsumerReports(session),
        client_version=session.client_version,
        metadata={kv.key: kv.value for kv in req.metadata},
    )
    session.consumers[req.consumer_id] = consumer
    session.spawn(_subscribe(session, req, name, consumer))


async def _subscribe(session: ClientSession, req: pb.CommandSubscribe, name, consumer: Consumer) -> None:
    """The rest of SUBSCRIBE; a CLOSE_CONSUMER meanwhile (the consumer left
    ``session.consumers``) is checked after each step."""
    try:
        await permissions.check(session.service.authorizer, session.service.store, session.role, "consume", name,
                                req.subscription)
        await session.service.check_served_here(name)
        topic = await session.service.get_topic(name, create=None if req.force_topic_creation else False)
        await session.service.schemas.for_consumer(topic, req.schema if req.HasField("schema") else None)
        _check_still_wanted(session, consumer)
        await topic.subscribe(
            req.subscription, req.subType, consumer,
            durable=req.durable,
            initial_position=req.initialPosition,
            start_message_id=req.start_message_id if req.HasField("start_message_id") else None,
            replicated=req.replicate_subscription_state,
        )
        try:
            _check_still_wanted(session, consumer)
        except BrokerError:
            topic.remove_consumer(consumer)
            raise
        session.write(success(req.request_id))
    except BaseException as exc:
        if session.consumers.get(req.consumer_id) is consumer:
            del session.consumers[req.consumer_id]
        if isinstance(exc, BrokerError):
            session.write(error(req.request_id, exc.code, str(exc)))
        elif isinstance(exc, (StorageError, MetadataError, OSError)):  # the disk is full or failing: a retry may find room
            log.warning("cannot subscribe to %s: storage: %s", req.topic, exc)
            session.write(error(req.request_id, ServerError.ServiceNotReady, f"cannot subscribe: {exc}"))
        elif isinstance(exc, Exception):
            log.exception("cannot subscribe to %s", req.topic)
            session.write(error(req.request_id, ServerError.ServiceNotReady, f"cannot subscribe: {exc}"))
        else:
            raise


def _check_still_wanted(session: ClientSession, consumer: Consumer) -> None:
    if session.consumers.get(consumer.consumer_id) is not consumer:
        raise BrokerError("the consumer was closed while subscribing", ServerError.ConsumerNotFound)


class ConsumerReports:
    """A consumer's sink (``subscriptions.consumer.ConsumerSink``) on its client's connection."""

    __slots__ = ("session",)

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    def deliver(self, consumer: Consumer, entries: list[Entry], redeliveries: list[int]) -> None:
        """MESSAGE frames for ``entries``, queued as one socket write."""
        session = self.session
        transport = session.transport
        if transport is None or transport.is_closing():
            return
        strip = not session.proto.peer_supports_broker_entry_metadata
        pieces: list = []
        consumer_id = consumer.consumer_id
        # Pulsar's brokers put the partition in every message id of a partition:
        # routers, seeks and acks by id on partitioned topics depend on it.
        partition = consumer.partition if consumer.partition >= 0 else None
        sub = consumer.subscription
        batch_acks = sub.cursor.batch_acks if sub is not None and sub.cursor is not None else None
        for entry, count in zip(entries, redeliveries):
            pos = entry.position
            message = pb.CommandMessage(consumer_id=consumer_id,
                                        message_id=pb.MessageIdData(ledgerId=pos.ledger_id, entryId=pos.entry_id,
                                                                    partition=partition))
            if count:
                message.redelivery_count = count
            if batch_acks and pos in batch_acks:
                message.ack_set.extend(ack_set_words(batch_acks[pos]))
            data = strip_broker_entry_metadata(entry.data) if strip else entry.data
            pieces.extend(encode_payload_command(pb.BaseCommand(type=_MESSAGE, message=message), data))
        session.queue(*pieces)

    def writable(self) -> bool:
        return not self.session.writing_paused

    def closed(self, consumer: Consumer, assigned: tuple[str, str] | None = None) -> None:
        """CLOSE_CONSUMER: the client re-subscribes, at ``assigned`` (plain and TLS URLs) at once
        when given (PIP-307: the topic moved there), else after a lookup."""
        session = self.session
        if session.consumers.get(consumer.consumer_id) is consumer:
            del session.consumers[consumer.consumer_id]
            session.write(command(Type.CLOSE_CONSUMER, consumer_id=consumer.consumer_id, request_id=UINT64_MAX,
                                  assignedBrokerServiceUrl=assigned[0] if assigned else None,
                                  assignedBrokerServiceUrlTls=assigned[1] if assigned and assigned[1] else None))

    def active_change(self, consumer: Consumer, active: bool) -> None:
        """ACTIVE_CONSUMER_CHANGE, for failover subscriptions only."""
        sub = consumer.subscription
        if sub is not None and sub.type == pb.CommandSubscribe.Failover:
            self.session.write(command(Type.ACTIVE_CONSUMER_CHANGE, consumer_id=consumer.consumer_id,
                                       is_active=active))


def ack_set_mask(words) -> int:
    """Pulsar's ack set (a BitSet as signed 64-bit words) as a Python int."""
    mask = 0
    for i, word in enumerate(words):
        mask |= (word & 0xFFFF_FFFF_FFFF_FFFF) << (64 * i)
    return mask


def ack_set_words(mask: int) -> list[int]:
    """The inverse of :func:`ack_set_mask`: signed 64-bit words."""
    words = []
    while mask:
        word = mask & 0xFFFF_FFFF_FFFF_FFFF
        words.append(word - (1 << 64) if word >= 1 << 63 else word)
        mask >>= 64
    return words


def on_flow(session: ClientSession, frame: Frame) -> None:
    req = frame.command.flow
    consumer = session.consumers.get(req.consumer_id)
    if consumer is not None:
        consumer.permits += req.messagePermits
        consumer.last_flow_ms = session.received_ms
        if consumer.subscription is not None:  # else: its subscribe is pending; permits count once it lands
            consumer.subscription.last_flow_ms = session.received_ms
            consumer.subscription.on_new_entries()


async def on_ack(session: ClientSession, req: pb.CommandAck, consumer: Consumer | None) -> None:
    try:
        sub = subscribed(consumer).subscription
        if req.ack_type == pb.CommandAck.Cumulative:
            if sub.type in (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared):
                raise NotAllowed("cumulative ack is not allowed on a Shared or Key_Shared subscription")
            if req.message_id:
                mid = req.message_id[0]
                if any(mid.ack_set):  # up to a message inside a batch: the rest of it stays
                    await sub.acknowledge_cumulative_in_batch(wire_position(mid), ack_set_mask(mid.ack_set))
                else:
                    await sub.acknowledge_cumulative(wire_position(mid))
        else:
            # An ack_set with bits still set acknowledges part of a batch
            # (batch-index acknowledgement): the entry stays, and is delivered
            # again with that ack set, until its last message is acknowledged.
            positions = [wire_position(m) for m in req.message_id if not any(m.ack_set)]
            if positions:
                await sub.acknowledge(positions)
            for m in req.message_id:
                if any(m.ack_set):
                    await sub.acknowledge_batch_index(wire_position(m), ack_set_mask(m.ack_set))
        if req.HasField("request_id"):
            session.write(command(Type.ACK_RESPONSE, consumer_id=req.consumer_id, request_id=req.request_id))
    except BrokerError as exc:
        if req.HasField("request_id"):
            session.write(command(Type.ACK_RESPONSE, consumer_id=req.consumer_id, request_id=req.request_id,
                                  error=exc.code, message=str(exc)))
        else:
            ack_log.log(logging.INFO, "ack refused", "ack from %s refused: %s", session.peer, exc)
    except StorageError as exc:
        # The cursor closed under the ack (the topic moved or was unloaded):
        # its next owner delivers those entries again.
        ack_log.log(logging.INFO, "ack not applied", "ack from %s not applied: %s", session.peer, exc)
        if req.HasField("request_id"):
            session.write(command(Type.ACK_RESPONSE, consumer_id=req.consumer_id, request_id=req.request_id,
                                  error=ServerError.ServiceNotReady, message=str(exc)))


def on_redeliver(session: ClientSession, frame: Frame) -> None:
    req = frame.command.redeliverUnacknowledgedMessages
    consumer = session.consumers.get(req.consumer_id)
    if consumer is None or consumer.subscription is None:
        return
    positions = [wire_position(m) for m in req.message_ids] or None
    consumer.subscription.redeliver(consumer, positions)


async def on_unsubscribe(session: ClientSession, req: pb.CommandUnsubscribe, consumer: Consumer | None) -> None:
    try:
        sub = subscribed(consumer).subscription
        others = [c for c in sub.consumers if c is not consumer]
        if others and not req.force:
            raise ConsumerBusy(f"subscription {sub.name} has {len(others)} other consumer(s)")
        session.consumers.pop(req.consumer_id, None)
        await sub.topic.unsubscribe(sub.name)
        session.write(success(req.request_id))
    except BrokerError as exc:
        session.write(error(req.request_id, exc.code, str(exc)))


def on_close_consumer(session: ClientSession, frame: Frame) -> None:
    req = frame.command.close_consumer
    consumer = session.consumers.pop(req.consumer_id, None)
    if consumer is not None and consumer.subscription is not None:
        consumer.subscription.topic.remove_consumer(consumer)  # (pending: _subscribe sees it gone)
    session.write(success(req.request_id))


async def on_seek(session: ClientSession, req: pb.CommandSeek, consumer: Consumer | None) -> None:
    """Move the consumer's subscription to a message id, a publish time or
    (Magnetar) a topic offset; exactly one must be given, else NotAllowed.
    Success once the cursor moved; the subscription's consumers are
    disconnected so they re-subscribe at the new position."""
    try:
        sub = subscribed(consumer).subscription
        if sub.cursor is None:
            raise NotAllowed(f"{sub.topic.name}: a non-persistent topic keeps no messages to seek to")
        position = await seek_position(sub.topic, req)
        await sub.reset_cursor(position)
        session.write(success(req.request_id))
    except BrokerError as exc:
        session.write(error(req.request_id, exc.code, str(exc)))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a storage read failed: the client must still get an answer
        log.exception("seek on consumer %d from %s failed", req.consumer_id, session.peer)
        session.write(error(req.request_id, ServerError.PersistenceError, f"seek failed: {exc}"))


async def seek_position(topic: Topic, req: pb.CommandSeek) -> Position:
    """The first entry to read for a SEEK; NotAllowed unless it names exactly one target."""
    given = [f for f in ("message_id", "message_publish_time", "magnetar_offset") if req.HasField(f)]
    if len(given) != 1:
        # Pulsar picks one when several are set; a silent choice would hide a client bug.
        raise NotAllowed("seek takes exactly one of message_id, message_publish_time, magnetar_offset; "
                         f"got {', '.join(given) or 'none'}")
    if given[0] == "magnetar_offset":
        return await topic.position_of_offset(req.magnetar_offset)
    if given[0] == "message_publish_time":
        return await topic.find_position_by_time(req.message_publish_time)
    return topic.read_position_for(req.message_id)


async def on_get_last_message_id(session: ClientSession, req: pb.CommandGetLastMessageId, consumer: Consumer | None) -> None:
    try:
        sub = subscribed(consumer).subscription
    except BrokerError as exc:
        session.write(error(req.request_id, exc.code, str(exc)))
        return
    if sub.cursor is None:
        session.write(error(req.request_id, ServerError.NotAllowedError,
                            f"{sub.topic.name}: a non-persistent topic has no last message id"))
        return
    try:
        if consumer.read_compacted:
            last = await session.service.compactor.last_message_id(sub.topic)
        else:
            last = await sub.topic.last_message_id()
    except (StorageError, MetadataError, OSError) as exc:
        # The topic closed under the request (it is moving or unloading) or
        # its storage failed: an answer the client retries, never silence
        # (it would wait out its operation timeout).
        session.write(error(req.request_id, ServerError.ServiceNotReady,
                            f"{sub.topic.name}: last message id not available now: {exc}"))
        return
    mark = sub.cursor.mark_delete_position
    mark_id = message_id(mark.ledger_id, mark.entry_id & UINT64_MAX)
    if consumer.partition >= 0:
        # Ids of a partition carry its index, as its MESSAGEs do: the client
        # compares them (has_message_available).
        last = pb.MessageIdData(ledgerId=last.ledgerId, entryId=last.entryId, batch_index=last.batch_index,
                                partition=consumer.partition) if last.HasField("batch_index") else \
            pb.MessageIdData(ledgerId=last.ledgerId, entryId=last.entryId, partition=consumer.partition)
        mark_id.partition = consumer.partition
    session.write(command(Type.GET_LAST_MESSAGE_ID_RESPONSE, request_id=req.request_id, last_message_id=last,
                          consumer_mark_delete_position=mark_id))
