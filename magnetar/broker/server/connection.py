"""ServerConnection: the thin asyncio shell around the sans-io protocol.

Bytes from the socket go to :class:`magnetar.protocol.Connection`; each frame
is routed to a handler of :mod:`.handlers` (one module per area), which calls
into topics and subscriptions and writes the answer. Handlers never let an
exception escape: a bad request gets the protocol's error code and a message;
bytes that break framing close this connection (with the reason logged) and
nothing else.

Flow control: while more than ``MAX_PENDING_SENDS`` sends of this connection
wait for storage, the socket is not read (see :mod:`.handlers.produce`).
While the socket's write buffer is full, dispatchers skip this connection's
consumers.
"""
from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import Callable

from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.broker.topics.producer import Producer
from magnetar.protocol import Connection, ProtocolError, Role, ServerError, pb
from magnetar.protocol.commands import FIELD_OF_TYPE, Type, body, command, error, type_name
from magnetar.protocol.fast_send import SendCommandView
from magnetar.protocol.frames import FRAME_OVERHEAD, Frame
from magnetar.security.tls import peer_certificate

from .handlers import auth, consume, fetch, lookup, malformed, produce, schema
from .service import BrokerService

log = logging.getLogger(__name__)


class ServerConnection(asyncio.BufferedProtocol):
    """One client connection; implements :class:`.handlers.session.ClientSession`.

    A buffered protocol: the socket's bytes go straight into buffers of
    the service's pool, shared by its connections (``get_buffer``; see
    FrameDecoder and BufferPool in protocol/frames.py), so a producer's
    large batch entry is received into a buffer of its size, reused once
    its entry has been copied out, not a fresh chunk per read and a growing
    copy of the frame (fresh pages each, and each new page costs a fault)."""

    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.config = service.config
        self.proto = Connection(Role.SERVER, max_frame_size=self.config.max_message_size + FRAME_OVERHEAD,
                                buffers=service.receive_buffers)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.producers: dict[int, Producer] = {}
        self.producers_creating: dict[int, int] = {}
        self.consumers: dict[int, Consumer] = {}
        self.pending_sends = 0
        self.reading_paused = False
        #: Paused for a publish rate limit (handlers/produce.py: throttle), and how often.
        self.rate_paused = False
        self.throttled = 0
        self.writing_paused = False
        self.last_received = time.monotonic()
        self.received_ms = int(time.time() * 1000)
        self._out: list = []
        self._flush_scheduled = False
        self._keepalive: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self.role: str | None = None
        self.client_version = ""
        self.auth = None  # security.connection_auth.ConnectionAuth while authentication is on
        self._handlers: dict[int, Callable[[Frame], None]] = self._routes()

    def _routes(self) -> dict[int, Callable[[Frame], None]]:
        """Command type -> handler of one frame. Synchronous handlers run in
        arrival order; the others become tasks of this connection."""
        spawn, consumer = self.spawn, self._consumer
        return {
            Type.CONNECT: partial(lookup.on_connect, self),
            Type.PING: partial(lookup.on_ping, self),
            Type.PONG: lambda f: None,
            Type.AUTH_RESPONSE: partial(auth.on_auth_response, self),
            Type.PARTITIONED_METADATA: lambda f: spawn(lookup.on_partitioned_metadata(self, f.command.partitionMetadata)),
            Type.LOOKUP: partial(lookup.on_lookup, self),
            Type.GET_TOPICS_OF_NAMESPACE: lambda f: spawn(lookup.on_get_topics(self, f.command.getTopicsOfNamespace)),
            Type.PRODUCER: partial(produce.on_producer_frame, self),
            Type.SEND: partial(produce.on_send, self),
            Type.CLOSE_PRODUCER: partial(produce.on_close_producer, self),
            Type.GET_NEXT_OFFSET: lambda f: spawn(produce.on_get_next_offset(self, f.command.getNextOffset)),
            Type.FETCH_ENTRIES: lambda f: spawn(fetch.on_fetch_entries(self, f.command.fetchEntries)),
            Type.LEASE_PID: lambda f: spawn(produce.on_lease_pid(self, f.command.leasePid.request_id,
                                                                 [f.command.leasePid])),
            Type.LEASE_PID_BATCH: lambda f: spawn(produce.on_lease_pid(self, f.command.leasePidBatch.request_id,
                                                                       list(f.command.leasePidBatch.leases))),
            Type.SUBSCRIBE: partial(consume.on_subscribe, self),
            Type.FLOW: partial(consume.on_flow, self),
            # Consumers are resolved when the frame arrives, not when the task
            # runs: a CLOSE_CONSUMER right behind an ACK must not orphan it.
            Type.ACK: lambda f: spawn(consume.on_ack(self, f.command.ack, consumer(f.command.ack))),
            Type.REDELIVER_UNACKNOWLEDGED_MESSAGES: partial(consume.on_redeliver, self),
            Type.UNSUBSCRIBE: lambda f: spawn(
                consume.on_unsubscribe(self, f.command.unsubscribe, consumer(f.command.unsubscribe))),
            Type.CLOSE_CONSUMER: partial(consume.on_close_consumer, self),
            Type.SEEK: lambda f: spawn(consume.on_seek(self, f.command.seek, consumer(f.command.seek))),
            Type.GET_LAST_MESSAGE_ID: lambda f: spawn(consume.on_get_last_message_id(
                self, f.command.getLastMessageId, consumer(f.command.getLastMessageId))),
            Type.GET_SCHEMA: lambda f: spawn(schema.on_get_schema(self, f.command.getSchema)),
            Type.GET_OR_CREATE_SCHEMA: lambda f: spawn(schema.on_get_or_create_schema(self, f.command.getOrCreateSchema)),
        }

    # -- asyncio.Protocol ----------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        # A verified client certificate (TLS listener): the tls provider's role.
        self.peer_certificate = peer_certificate(transport.get_extra_info("ssl_object"))
        self._keepalive = asyncio.get_running_loop().create_task(self._keepalive_loop())
        self.service.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.proto.decoder.receive_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.proto.decoder.received(nbytes)
        self.data_received(None)

    def data_received(self, data: bytes | None) -> None:
        """Bytes received (``None``: already in the decoder, see buffer_updated)."""
        self.last_received = time.monotonic()
        # The publish time of the SENDs in this chunk: one clock reading, not one per entry.
        self.received_ms = int(time.time() * 1000)
        try:
            frames = self.proto.receive_data(data)
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        handlers, on_plain_send = self._handlers, produce.on_plain_send
        for frame in frames:
            try:
                if frame.command.__class__ is SendCommandView:
                    # The per-entry frame: no route to look up, no text to check.
                    on_plain_send(self, *frame)
                    continue
                if frame.command.type in malformed.NAMED and malformed.refuse_if_malformed(self, frame):
                    continue
                handler = handlers.get(frame.command.type)
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
            if consumer.subscription is not None:  # else its subscribe is pending: cancelled below
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
        self.queue(self.proto.send(cmd))

    def queue(self, *pieces: bytes) -> None:
        """Buffer bytes for the socket; one writelines per loop pass.

        Receipts of one group commit and a dispatcher's MESSAGE frames then
        leave in one system call instead of one each; order is kept because
        every write goes through here.
        """
        self._out.extend(pieces)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def queue_one(self, frame: bytes) -> None:
        """:meth:`queue` of one frame, without packing it in a tuple (once per receipt)."""
        self._out.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)

    def spawn(self, coro) -> None:
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

    def _consumer(self, req) -> Consumer | None:
        return self.consumers.get(req.consumer_id)

    def _on_unsupported(self, frame: Frame) -> None:
        name = type_name(frame.command)
        known = frame.command.type in FIELD_OF_TYPE
        request_id = getattr(body(frame.command), "request_id", None) if known else None
        log.warning("unsupported command %s from %s", name, self.peer)
        if request_id is not None:
            self.write(error(request_id, ServerError.NotAllowedError, f"{name} is not supported by this broker"))
