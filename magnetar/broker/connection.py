"""ServerConnection: the thin asyncio shell around the sans-io protocol.

Bytes from the socket go to :class:`magnetar.protocol.Connection`; each frame
is routed to a handler here, which calls into topics and subscriptions and
writes the answer. Handlers never let an exception escape: a bad request gets
the protocol's error code and a message; bytes that break framing close this
connection (with the reason logged) and nothing else.

Flow control: while more than ``MAX_PENDING_SENDS`` sends of this connection
wait for storage, the socket is not read (the client's pending queue fills and
it blocks, as with Pulsar). While the socket's write buffer is full,
dispatchers skip this connection's consumers.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from typing import Callable

from magnetar import __version__
from magnetar.protocol import Connection, ProtocolError, Role, ServerError, pb
from magnetar.protocol.commands import (FIELD_OF_TYPE, Type, body, command, error, message_id, signed64, success,
                                        type_name)
from magnetar.protocol.frames import FRAME_OVERHEAD, Frame, encode_command, encode_payload_command
from magnetar.storage import Entry, Position

from . import lifecycle, topic_list
from .consumer import Consumer
from .entry_format import strip_broker_entry_metadata
from .errors import BrokerError, ConsumerBusy, ExpectedOffsetMismatch, InvalidTopic, NotAllowed
from .producer import Producer
from .service import BrokerService
from .topic import Topic
from .topic_name import InvalidTopicName, parse

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 20
UINT64_MAX = (1 << 64) - 1


def _metadata_flag(req: pb.CommandProducer, key: str) -> bool:
    """Whether the producer's metadata (its ``properties``) sets ``key`` to "true"."""
    return any(kv.key == key and kv.value == "true" for kv in req.metadata)


def wire_position(mid: pb.MessageIdData) -> Position:
    """The position a client's message id names.

    Pulsar's ids are signed 64-bit numbers carried in uint64 fields. A client
    acknowledging cumulatively up to the message *before* a partly consumed
    batch in entry 0 of a ledger sends entry -1 (2^64-1 on the wire): "nothing
    of this ledger". Read unsigned, it would acknowledge the whole ledger and
    the cursor would skip what was not delivered yet.
    """
    return Position(signed64(mid.ledgerId), signed64(mid.entryId))
MAX_PENDING_SENDS = 10_000
DEFAULT_LEASE_MS = 60_000
_SEND_RECEIPT = Type.SEND_RECEIPT
_MESSAGE = Type.MESSAGE
_names = itertools.count()


class ServerConnection(asyncio.Protocol):
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.config = service.config
        self.proto = Connection(Role.SERVER, max_frame_size=self.config.max_message_size + FRAME_OVERHEAD)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.pending_sends = 0
        self.reading_paused = False
        self.writing_paused = False
        self.last_received = time.monotonic()
        self._out: list = []
        self._flush_scheduled = False
        self._keepalive: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._handlers: dict[int, Callable[[Frame], None]] = {
            Type.CONNECT: self._on_connect,
            Type.PING: self._on_ping,
            Type.PONG: lambda f: None,
            Type.PARTITIONED_METADATA: lambda f: self._spawn(self._on_partitioned_metadata(f.command.partitionMetadata)),
            Type.LOOKUP: self._on_lookup,
            Type.PRODUCER: lambda f: self._spawn(self._on_producer(f.command.producer)),
            Type.SEND: self._on_send,
            Type.CLOSE_PRODUCER: self._on_close_producer,
            Type.SUBSCRIBE: lambda f: self._spawn(self._on_subscribe(f.command.subscribe)),
            Type.FLOW: self._on_flow,
            # Consumers are resolved when the frame arrives, not when the task
            # runs: a CLOSE_CONSUMER right behind an ACK must not orphan it.
            Type.ACK: lambda f: self._spawn(self._on_ack(f.command.ack, self._consumer(f.command.ack))),
            Type.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._on_redeliver,
            Type.UNSUBSCRIBE: lambda f: self._spawn(
                self._on_unsubscribe(f.command.unsubscribe, self._consumer(f.command.unsubscribe))),
            Type.CLOSE_CONSUMER: self._on_close_consumer,
            Type.SEEK: lambda f: self._spawn(self._on_seek(f.command.seek, self._consumer(f.command.seek))),
            Type.GET_LAST_MESSAGE_ID: lambda f: self._spawn(self._on_get_last_message_id(
                f.command.getLastMessageId, self._consumer(f.command.getLastMessageId))),
            Type.GET_TOPICS_OF_NAMESPACE: lambda f: self._spawn(self._on_get_topics(f.command.getTopicsOfNamespace)),
            Type.GET_SCHEMA: lambda f: self._spawn(self._on_get_schema(f.command.getSchema)),
            Type.GET_OR_CREATE_SCHEMA: lambda f: self._spawn(self._on_get_or_create_schema(f.command.getOrCreateSchema)),
            Type.GET_NEXT_OFFSET: lambda f: self._spawn(self._on_get_next_offset(f.command.getNextOffset)),
            Type.LEASE_PID: lambda f: self._spawn(self._on_lease_pid(f.command.leasePid.request_id,
                                                                     [f.command.leasePid])),
            Type.LEASE_PID_BATCH: lambda f: self._spawn(self._on_lease_pid(f.command.leasePidBatch.request_id,
                                                                           list(f.command.leasePidBatch.leases))),
        }

    # -- asyncio.Protocol ----------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._keepalive = asyncio.get_running_loop().create_task(self._keepalive_loop())
        self.service.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_received = time.monotonic()
        try:
            frames = self.proto.receive_data(data)
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        for frame in frames:
            handler = self._handlers.get(frame.command.type)
            try:
                if handler is None:
                    self._on_unsupported(frame)
                else:
                    handler(frame)
            except ProtocolError as exc:
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.close()
                return
            except Exception:
                log.exception("error handling %s from %s", type_name(frame.command), self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.proto.close()
        self.service.connections.discard(self)
        if self._keepalive is not None:
            self._keepalive.cancel()
        for producer in list(self.producers.values()):
            producer.topic.remove_producer(producer)
        self.producers.clear()
        for consumer in list(self.consumers.values()):
            consumer.subscription.topic.remove_consumer(consumer)
        self.consumers.clear()
        for task in list(self._tasks):
            task.cancel()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        for consumer in self.consumers.values():
            consumer.subscription.on_new_entries()

    # -- plumbing ------------------------------------------------------------
    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._flush()
            self.transport.close()

    def write(self, cmd: pb.BaseCommand) -> None:
        self._queue(self.proto.send(cmd))

    def _queue(self, *pieces) -> None:
        """Buffer bytes for the socket; one writelines per loop pass.

        Receipts of one group commit and a dispatcher's MESSAGE frames then
        leave in one system call instead of one each; order is kept because
        every write goes through here.
        """
        self._out.extend(pieces)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _keepalive_loop(self) -> None:
        interval = self.config.keepalive_interval_s
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() - self.last_received > 2 * interval:
                log.info("closing connection from %s: no keepalive for %.0f s", self.peer, 2 * interval)
                self.close()
                return
            if self.proto.state.name == "CONNECTED":
                self.write(command(Type.PING))

    # -- handshake, lookup ------------------------------------------------------
    def _on_connect(self, frame: Frame) -> None:
        version = min(PROTOCOL_VERSION, frame.command.connect.protocol_version or PROTOCOL_VERSION)
        self.write(
            command(
                Type.CONNECTED,
                server_version=f"Magnetar {__version__}",
                protocol_version=version,
                max_message_size=self.config.max_message_size,
                feature_flags=pb.FeatureFlags(supports_broker_entry_metadata=True),
            )
        )

    def _on_ping(self, frame: Frame) -> None:
        self.write(command(Type.PONG))

    async def _on_partitioned_metadata(self, req: pb.CommandPartitionedTopicMetadata) -> None:
        Lookup = pb.CommandPartitionedTopicMetadataResponse
        try:
            partitions = await lifecycle.partitioned_metadata(
                self.service, self._topic_name(req.topic), auto_create=req.metadata_auto_creation_enabled)
        except BrokerError as exc:
            self.write(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=req.request_id,
                               response=Lookup.Failed, error=exc.code, message=str(exc)))
            return
        except Exception as exc:  # metadata trouble: the client retries ServiceNotReady
            log.exception("partitioned metadata of %s failed", req.topic)
            self.write(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=req.request_id,
                               response=Lookup.Failed, error=ServerError.ServiceNotReady, message=str(exc)))
            return
        self.write(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=req.request_id, partitions=partitions,
                           response=Lookup.Success))

    def _on_lookup(self, frame: Frame) -> None:
        req = frame.command.lookupTopic
        Lookup = pb.CommandLookupTopicResponse
        try:
            parse(req.topic)
        except InvalidTopicName as exc:
            self.write(command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=Lookup.Failed,
                               error=ServerError.InvalidTopicName, message=str(exc)))
            return
        # One broker owns everything: the client keeps using the URL it dialled.
        self.write(command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=Lookup.Connect,
                           brokerServiceUrl=self.config.service_url, authoritative=True,
                           proxy_through_service_url=True))

    def _on_unsupported(self, frame: Frame) -> None:
        name = type_name(frame.command)
        known = frame.command.type in FIELD_OF_TYPE
        request_id = getattr(body(frame.command), "request_id", None) if known else None
        log.warning("unsupported command %s from %s", name, self.peer)
        if request_id is not None:
            self.write(error(request_id, ServerError.NotAllowedError, f"{name} is not supported by this broker"))

    def _topic_name(self, raw: str):
        try:
            return parse(raw)
        except InvalidTopicName as exc:
            raise InvalidTopic(str(exc)) from None

    # -- producers ---------------------------------------------------------------
    async def _on_producer(self, req: pb.CommandProducer) -> None:
        existing = self.producers.get(req.producer_id)
        if existing is not None:
            # A retried create for a producer that is already there: same answer.
            self.write(command(Type.PRODUCER_SUCCESS, request_id=req.request_id, producer_name=existing.name,
                               last_sequence_id=-1, topic_epoch=existing.epoch or None))
            return
        try:
            name = self._topic_name(req.topic)
            if req.encrypted:
                raise NotAllowed("encrypted producers are not supported")
            topic = await self.service.get_topic(name)
            schema_version = await self.service.schemas.for_producer(
                topic, req.schema if req.HasField("schema") else None)
            producer = Producer(
                producer_id=req.producer_id,
                name=req.producer_name or f"{self.config.cluster_name}-{self.service.broker_id}-{next(_names)}",
                topic=topic,
                access_mode=req.producer_access_mode,
                user_provided_name=req.user_provided_producer_name and bool(req.producer_name),
                idempotent=_metadata_flag(req, "magnetar.idempotent"),
                deduplicate=_metadata_flag(req, "magnetar.deduplicate"),
                address=self.peer,
            )
            producer.on_result = lambda seq, high, fut, p=producer: self._send_result(p, seq, high, fut)
            producer.disconnect = lambda p=producer: self._disconnect_producer(p)
            self.producers[req.producer_id] = producer
            requested_epoch = req.topic_epoch if req.HasField("topic_epoch") else None
            try:
                waiter = await topic.add_producer(producer, requested_epoch)
            except BaseException:
                self.producers.pop(req.producer_id, None)
                raise
            if waiter is not None:
                self.write(command(Type.PRODUCER_SUCCESS, request_id=req.request_id, producer_name=producer.name,
                                   producer_ready=False))
                try:
                    await waiter
                except BaseException:
                    self.producers.pop(req.producer_id, None)
                    raise
            self.write(command(
                Type.PRODUCER_SUCCESS, request_id=req.request_id, producer_name=producer.name,
                last_sequence_id=topic.last_sequence_id(producer.name, producer.deduplicate),
                topic_epoch=producer.epoch if producer.access_mode != pb.Shared else None,
                producer_ready=True, schema_version=schema_version,
            ))
        except BrokerError as exc:
            self.write(error(req.request_id, exc.code, str(exc)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("cannot create producer on %s", req.topic)
            self.write(error(req.request_id, ServerError.ServiceNotReady, f"cannot create producer: {exc}"))

    def _disconnect_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.producer_id) is producer:
            del self.producers[producer.producer_id]
            self.write(command(Type.CLOSE_PRODUCER, producer_id=producer.producer_id, request_id=UINT64_MAX))

    def _on_send(self, frame: Frame) -> None:
        send = frame.command.send
        producer = self.producers.get(send.producer_id)
        if frame.block is None:
            raise ProtocolError("SEND without a payload")
        if producer is None:
            self.write(command(Type.SEND_ERROR, producer_id=send.producer_id, sequence_id=send.sequence_id,
                               error=ServerError.NotAllowedError, message="unknown producer id"))
            return
        if not frame.block.verify_checksum():
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(BrokerError("checksum mismatch", ServerError.ChecksumError))
        else:
            fut = producer.topic.publish(producer, send, frame.block)
        self.pending_sends += 1
        if self.pending_sends > MAX_PENDING_SENDS and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        producer.enqueue(send.sequence_id, send.highest_sequence_id, fut)

    def _send_result(self, producer: Producer, seq: int, highest: int, fut: asyncio.Future) -> None:
        self.pending_sends -= 1
        if self.reading_paused and self.pending_sends < MAX_PENDING_SENDS // 2 and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        exc = fut.exception()
        if exc is None:
            res = fut.result()
            if res.ledger_id < 0:
                # A duplicate whose original is no longer remembered: Pulsar's -1:-1.
                self.write(command(Type.SEND_RECEIPT, producer_id=producer.producer_id, sequence_id=seq,
                                   highest_sequence_id=highest, message_id=message_id(UINT64_MAX, UINT64_MAX)))
                return
            # Built directly: this runs once per stored entry.
            self._queue(encode_command(pb.BaseCommand(type=_SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(
                producer_id=producer.producer_id, sequence_id=seq, highest_sequence_id=highest,
                offset=res.first_offset, message_id=pb.MessageIdData(ledgerId=res.ledger_id, entryId=res.entry_id),
            ))))
            return
        code = exc.code if isinstance(exc, BrokerError) else ServerError.PersistenceError
        cmd = command(Type.SEND_ERROR, producer_id=producer.producer_id, sequence_id=seq, error=code,
                      message=str(exc))
        if isinstance(exc, ExpectedOffsetMismatch):
            cmd.send_error.next_offset = exc.next_offset
            cmd.send_error.offset_epoch = exc.offset_epoch
        self.write(cmd)

    def _on_close_producer(self, frame: Frame) -> None:
        req = frame.command.close_producer
        producer = self.producers.pop(req.producer_id, None)
        if producer is not None:
            producer.topic.remove_producer(producer)
        self.write(success(req.request_id))

    # -- consumers ---------------------------------------------------------------
    async def _on_subscribe(self, req: pb.CommandSubscribe) -> None:
        if req.consumer_id in self.consumers:
            self.write(success(req.request_id))
            return
        try:
            name = self._topic_name(req.topic)
            topic = await self.service.get_topic(name, create=None if req.force_topic_creation else False)
            await self.service.schemas.for_consumer(topic, req.schema if req.HasField("schema") else None)
            consumer = Consumer(
                consumer_id=req.consumer_id,
                name=req.consumer_name or f"consumer-{next(_names)}",
                subscription=None,  # type: ignore[arg-type]  (set by subscribe)
                priority_level=req.priority_level,
                address=self.peer,
                key_shared_meta=req.keySharedMeta if req.HasField("keySharedMeta") else None,
                read_compacted=req.read_compacted,
            )
            consumer.deliver = self._deliver
            consumer.writable = lambda: not self.writing_paused
            consumer.disconnect = lambda c=consumer: self._disconnect_consumer(c)
            consumer.active_change = lambda active, c=consumer: self.write(
                command(Type.ACTIVE_CONSUMER_CHANGE, consumer_id=c.consumer_id, is_active=active)
            ) if c.subscription is not None and c.subscription.type == pb.CommandSubscribe.Failover else None
            self.consumers[req.consumer_id] = consumer
            try:
                await topic.subscribe(
                    req.subscription, req.subType, consumer,
                    durable=req.durable,
                    initial_position=req.initialPosition,
                    start_message_id=req.start_message_id if req.HasField("start_message_id") else None,
                )
            except BaseException:
                self.consumers.pop(req.consumer_id, None)
                raise
            self.write(success(req.request_id))
        except BrokerError as exc:
            self.write(error(req.request_id, exc.code, str(exc)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("cannot subscribe to %s", req.topic)
            self.write(error(req.request_id, ServerError.ServiceNotReady, f"cannot subscribe: {exc}"))

    def _deliver(self, consumer: Consumer, entries: list[Entry], redeliveries: list[int]) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        strip = not self.proto.peer_supports_broker_entry_metadata
        pieces: list = []
        consumer_id = consumer.consumer_id
        for entry, count in zip(entries, redeliveries):
            pos = entry.position
            message = pb.CommandMessage(consumer_id=consumer_id,
                                        message_id=pb.MessageIdData(ledgerId=pos.ledger_id, entryId=pos.entry_id))
            if count:
                message.redelivery_count = count
            data = strip_broker_entry_metadata(entry.data) if strip else entry.data
            pieces.extend(encode_payload_command(pb.BaseCommand(type=_MESSAGE, message=message), data))
        self._queue(*pieces)

    def _disconnect_consumer(self, consumer: Consumer) -> None:
        if self.consumers.get(consumer.consumer_id) is consumer:
            del self.consumers[consumer.consumer_id]
            self.write(command(Type.CLOSE_CONSUMER, consumer_id=consumer.consumer_id, request_id=UINT64_MAX))

    def _on_flow(self, frame: Frame) -> None:
        req = frame.command.flow
        consumer = self.consumers.get(req.consumer_id)
        if consumer is not None:
            consumer.permits += req.messagePermits
            consumer.subscription.on_new_entries()

    def _consumer(self, req) -> Consumer | None:
        return self.consumers.get(req.consumer_id)

    async def _on_ack(self, req: pb.CommandAck, consumer: Consumer | None) -> None:
        try:
            if consumer is None:
                raise BrokerError("unknown consumer id", ServerError.ConsumerNotFound)
            sub = consumer.subscription
            if req.ack_type == pb.CommandAck.Cumulative:
                if sub.type in (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared):
                    raise NotAllowed("cumulative ack is not allowed on a Shared or Key_Shared subscription")
                if req.message_id:
                    mid = req.message_id[0]
                    await sub.acknowledge_cumulative(wire_position(mid))
            else:
                # An ack_set with bits still set acknowledges part of a batch:
                # the entry stays until its last message is acknowledged.
                positions = [wire_position(m) for m in req.message_id
                             if not any(m.ack_set)]
                if positions:
                    await sub.acknowledge(positions)
            if req.HasField("request_id"):
                self.write(command(Type.ACK_RESPONSE, consumer_id=req.consumer_id, request_id=req.request_id))
        except BrokerError as exc:
            if req.HasField("request_id"):
                self.write(command(Type.ACK_RESPONSE, consumer_id=req.consumer_id, request_id=req.request_id,
                                   error=exc.code, message=str(exc)))
            else:
                log.info("ack from %s refused: %s", self.peer, exc)

    def _on_redeliver(self, frame: Frame) -> None:
        req = frame.command.redeliverUnacknowledgedMessages
        consumer = self.consumers.get(req.consumer_id)
        if consumer is None:
            return
        positions = [wire_position(m) for m in req.message_ids] or None
        consumer.subscription.redeliver(consumer, positions)

    async def _on_unsubscribe(self, req: pb.CommandUnsubscribe, consumer: Consumer | None) -> None:
        try:
            if consumer is None:
                raise BrokerError("unknown consumer id", ServerError.ConsumerNotFound)
            sub = consumer.subscription
            others = [c for c in sub.consumers if c is not consumer]
            if others and not req.force:
                raise ConsumerBusy(f"subscription {sub.name} has {len(others)} other consumer(s)")
            self.consumers.pop(req.consumer_id, None)
            await sub.topic.unsubscribe(sub.name)
            self.write(success(req.request_id))
        except BrokerError as exc:
            self.write(error(req.request_id, exc.code, str(exc)))

    def _on_close_consumer(self, frame: Frame) -> None:
        req = frame.command.close_consumer
        consumer = self.consumers.pop(req.consumer_id, None)
        if consumer is not None:
            consumer.subscription.topic.remove_consumer(consumer)
        self.write(success(req.request_id))

    async def _on_seek(self, req: pb.CommandSeek, consumer: Consumer | None) -> None:
        """Move the consumer's subscription to a message id, a publish time or
        (Magnetar) a topic offset; exactly one must be given, else NotAllowed.
        Success once the cursor moved; the subscription's consumers are
        disconnected so they re-subscribe at the new position."""
        try:
            if consumer is None:
                raise BrokerError("unknown consumer id", ServerError.ConsumerNotFound)
            sub = consumer.subscription
            position = await self._seek_position(sub.topic, req)
            await sub.reset_cursor(position)
            self.write(success(req.request_id))
        except BrokerError as exc:
            self.write(error(req.request_id, exc.code, str(exc)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a storage read failed: the client must still get an answer
            log.exception("seek on consumer %d from %s failed", req.consumer_id, self.peer)
            self.write(error(req.request_id, ServerError.PersistenceError, f"seek failed: {exc}"))

    @staticmethod
    async def _seek_position(topic: Topic, req: pb.CommandSeek) -> Position:
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

    async def _on_get_last_message_id(self, req: pb.CommandGetLastMessageId, consumer: Consumer | None) -> None:
        if consumer is None:
            self.write(error(req.request_id, ServerError.ConsumerNotFound, "unknown consumer id"))
            return
        sub = consumer.subscription
        if consumer.read_compacted:
            last = await self.service.compactor.last_message_id(sub.topic)
        else:
            last = await sub.topic.last_message_id()
        mark = sub.cursor.mark_delete_position
        self.write(command(Type.GET_LAST_MESSAGE_ID_RESPONSE, request_id=req.request_id, last_message_id=last,
                           consumer_mark_delete_position=message_id(mark.ledger_id, mark.entry_id & UINT64_MAX)))

    async def _on_get_topics(self, req: pb.CommandGetTopicsOfNamespace) -> None:
        try:
            topics: list[str] = []
            if req.mode != pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:  # only persistent topics exist
                topics = await lifecycle.namespace_topics(self.service, req.namespace)
        except Exception as exc:
            log.info("topics of namespace %r refused: %s", req.namespace, exc)
            self.write(error(req.request_id, ServerError.MetadataError, f"cannot list {req.namespace!r}: {exc}"))
            return
        filtered = False
        if req.HasField("topics_pattern"):
            try:
                topics = topic_list.filter_topics(topics, req.topics_pattern)
                filtered = True
            except re.error as exc:  # the client filters an unfiltered list itself
                log.info("ignoring bad topics pattern %r from %s: %s", req.topics_pattern, self.peer, exc)
        digest = topic_list.topics_hash(topics)
        if req.HasField("topics_hash") and req.topics_hash == digest:
            self.write(command(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=req.request_id,
                               filtered=filtered, topics_hash=digest, changed=False))
            return
        self.write(command(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=req.request_id, topics=topics,
                           filtered=filtered, topics_hash=digest, changed=True))

    async def _on_get_schema(self, req: pb.CommandGetSchema) -> None:
        try:
            fields = await self.service.schemas.get_schema_response(req, self._topic_name(req.topic))
        except BrokerError as exc:
            fields = {"error_code": exc.code, "error_message": str(exc)}
        self.write(command(Type.GET_SCHEMA_RESPONSE, request_id=req.request_id, **fields))

    async def _on_get_or_create_schema(self, req: pb.CommandGetOrCreateSchema) -> None:
        try:
            fields = await self.service.schemas.get_or_create_response(req, self._topic_name(req.topic))
        except BrokerError as exc:
            fields = {"error_code": exc.code, "error_message": str(exc)}
        self.write(command(Type.GET_OR_CREATE_SCHEMA_RESPONSE, request_id=req.request_id, **fields))

    async def _on_get_next_offset(self, req: pb.CommandGetNextOffset) -> None:
        try:
            topic = await self.service.get_topic(self._topic_name(req.topic))
            self.write(command(Type.GET_NEXT_OFFSET_RESPONSE, request_id=req.request_id,
                               next_offset=topic.next_offset))
        except BrokerError as exc:
            self.write(command(Type.GET_NEXT_OFFSET_RESPONSE, request_id=req.request_id, error=exc.code,
                               message=str(exc)))

    async def _on_lease_pid(self, request_id: int, requests: list[pb.CommandLeasePid]) -> None:
        leases = []
        for req in requests:
            lease = pb.PidLease(topic=req.topic, partition=req.partition)
            try:
                name = self._topic_name(req.topic)
                if req.partition >= 0 and name.partition_index < 0:
                    name = name.partition(req.partition)
                topic = await self.service.get_topic(name)
                granted = await topic.dedup.lease(
                    self.service.pid_allocator, req.pid,
                    req.generation if req.HasField("generation") else None,
                    req.expire_ms or DEFAULT_LEASE_MS,
                )
                lease.pid, lease.generation = granted.pid, granted.generation
                lease.sequence_number, lease.expire_ms = granted.next_sequence, granted.expire_ms
            except BrokerError as exc:
                lease.error, lease.message = exc.code, str(exc)
            except Exception as exc:  # storage or metadata trouble: the client may retry
                log.exception("lease on %s failed", req.topic)
                lease.error, lease.message = ServerError.ServiceNotReady, f"lease failed: {exc}"
            leases.append(lease)
        self.write(command(Type.LEASE_PID_RESPONSE, request_id=request_id, leases=leases))
