"""The blocking facade: ``Client``, ``Producer``, ``Consumer``, ``Reader``.

Each :class:`Client` runs its own asyncio loop in one daemon thread; blocking
calls submit a coroutine to it and wait for the result. Fire-and-forget calls
(acknowledge, send_async ...) are only scheduled, so they cost the caller no
round trip; they run in call order, before anything submitted later.

Callbacks (``send_async``) run on the client's loop thread: they must not
call blocking methods of the same client (that raises RuntimeError instead
of deadlocking).
"""
from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Mapping, TypeVar

from .aio import AsyncClient
from .consumer import _SHARED_TYPES, AsyncConsumer
from .enums import CompressionType, ConsumerType, InitialPosition, ProducerAccessMode
from .errors import AlreadyClosed, CumulativeAcknowledgementNotAllowedError
from .link import LinkState
from .message import Message
from .message_id import MessageId
from .partition_routing import HashingScheme, PartitionsRoutingMode
from .producer import AsyncProducer
from .reader import AsyncReader

if TYPE_CHECKING:
    from .table_view import TableView

T = TypeVar("T")


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="magnetar-client", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("blocking client call from the client's own loop thread (a callback?)")
        if self.loop.is_closed():
            coro.close()
            raise AlreadyClosed("client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result()
        except BaseException:
            # Interrupted (KeyboardInterrupt): do not leave e.g. a receive
            # behind that would swallow the next message.
            fut.cancel()
            raise

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.loop.is_closed():
            raise AlreadyClosed("client is closed")
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()
            self.loop.close()


class Client:
    """A blocking Pulsar client; see :class:`AsyncClient` for the options."""

    def __init__(self, service_url: str, operation_timeout_seconds: float = 30, **options: Any) -> None:
        self._aio = AsyncClient(service_url, operation_timeout_seconds, **options)
        self._loop = _LoopThread()

    @property
    def aio(self) -> AsyncClient:
        return self._aio

    def create_producer(
        self, topic: str, producer_name: str | None = None, initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000, compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000, block_if_queue_full: bool = False, batching_enabled: bool = False,
        batching_max_messages: int = 1000, batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10, properties: Mapping[str, str] | None = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared, idempotent: bool = False,
        pid: int | None = None, pid_lease_ms: int = 60000,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
        message_router: Callable[[Any, int], int] | None = None,
    ) -> "Producer":
        """See :meth:`AsyncClient.create_producer` (idempotence, ``pid``,
        partitioned topics and their routing)."""
        producer = self._loop.run(self._aio.create_producer(
            topic, producer_name=producer_name, initial_sequence_id=initial_sequence_id,
            send_timeout_millis=send_timeout_millis, compression_type=compression_type,
            max_pending_messages=max_pending_messages, block_if_queue_full=block_if_queue_full,
            batching_enabled=batching_enabled, batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms, properties=properties,
            access_mode=access_mode, idempotent=idempotent, pid=pid, pid_lease_ms=pid_lease_ms,
            message_routing_mode=message_routing_mode, hashing_scheme=hashing_scheme, message_router=message_router,
        ))
        return Producer(self._loop, producer)

    def subscribe(
        self, topic: str, subscription_name: str, consumer_type: ConsumerType = ConsumerType.Exclusive,
        receiver_queue_size: int = 1000, consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None, negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False, properties: Mapping[str, str] | None = None,
        initial_position: InitialPosition = InitialPosition.Latest,
        replicate_subscription_state_enabled: bool = False, ack_group_time_ms: int = 100,
    ) -> "Consumer":
        consumer = self._loop.run(self._aio.subscribe(
            topic, subscription_name, consumer_type=consumer_type, receiver_queue_size=receiver_queue_size,
            consumer_name=consumer_name, unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            is_read_compacted=is_read_compacted, properties=properties, initial_position=initial_position,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            ack_group_time_ms=ack_group_time_ms,
        ))
        return Consumer(self._loop, consumer)

    def create_reader(
        self, topic: str, start_message_id: MessageId, start_message_id_inclusive: bool = False,
        receiver_queue_size: int = 1000, reader_name: str | None = None,
        subscription_role_prefix: str | None = None, is_read_compacted: bool = False,
    ) -> "Reader":
        reader = self._loop.run(self._aio.create_reader(
            topic, start_message_id, start_message_id_inclusive=start_message_id_inclusive,
            receiver_queue_size=receiver_queue_size, reader_name=reader_name,
            subscription_role_prefix=subscription_role_prefix, is_read_compacted=is_read_compacted,
        ))
        return Reader(self._loop, reader)

    def create_table_view(self, topic: str) -> "TableView":
        """A key -> latest value map of ``topic`` (see :mod:`.table_view`)."""
        from .table_view import TableView

        return TableView(self._loop, self._loop.run(self._aio.create_table_view(topic)))

    def get_topic_partitions(self, topic: str) -> list[str]:
        return self._loop.run(self._aio.get_topic_partitions(topic))

    def get_next_offset(self, topic: str) -> int:
        """The offset the next message appended to ``topic`` will get."""
        return self._loop.run(self._aio.get_next_offset(topic))

    def close(self) -> None:
        """Close everything and stop the loop thread. Idempotent."""
        if self._loop.loop.is_closed():
            return
        try:
            self._loop.run(self._aio.close())
        finally:
            self._loop.stop()

    shutdown = close

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Producer:
    def __init__(self, loop: _LoopThread, producer: AsyncProducer) -> None:
        self._loop = loop
        self._p = producer

    def topic(self) -> str:
        return self._p.topic()

    def producer_name(self) -> str:
        return self._p.producer_name()

    def last_sequence_id(self) -> int:
        return self._p.last_sequence_id()

    @property
    def pid(self) -> int | None:
        """The leased producer id (idempotent producers), else None."""
        return self._p.pid

    @property
    def generation(self) -> int | None:
        """The generation of the leased producer id, else None."""
        return self._p.generation

    @property
    def next_sequence(self) -> int | None:
        """The next sequence number under the pid (idempotent producers), else None."""
        return self._p.next_sequence

    def is_connected(self) -> bool:
        return self._p.is_connected()

    def send(self, content: bytes, properties: Mapping[str, str] | None = None, partition_key: str | None = None,
             ordering_key: bytes | str | None = None, event_timestamp: int | None = None,
             sequence_id: int | None = None, expected_offset: int | None = None) -> MessageId:
        """Publish and wait for the receipt; returns the message's id, whose
        ``.offset`` is the message's topic offset. With ``expected_offset``
        the publish is conditional (ExpectedOffsetMismatch when refused)."""
        return self._loop.run(self._p.send(content, properties, partition_key, ordering_key, event_timestamp,
                                           sequence_id, expected_offset))

    def send_async(self, content: bytes, callback: Callable[[Any, MessageId | None], Any] | None,
                   properties: Mapping[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: bytes | str | None = None, event_timestamp: int | None = None,
                   sequence_id: int | None = None, expected_offset: int | None = None) -> None:
        """Queue a message; ``callback(result, msg_id)`` runs on the loop thread."""
        kwargs = dict(properties=properties, partition_key=partition_key, ordering_key=ordering_key,
                      event_timestamp=event_timestamp, sequence_id=sequence_id, expected_offset=expected_offset)
        if self._p._block_if_full:
            self._loop.run(self._enqueue_when_room(content, callback, kwargs))
        else:
            self._loop.call_soon(lambda: self._p.send_async(content, callback, **kwargs))

    async def _enqueue_when_room(self, content: bytes, callback, kwargs: dict) -> None:
        await self._p._wait_for_space()
        self._p.send_async(content, callback, **kwargs)

    def flush(self) -> None:
        self._loop.run(self._p.flush())

    def close(self) -> None:
        self._loop.run(self._p.close())


class Consumer:
    def __init__(self, loop: _LoopThread, consumer: AsyncConsumer) -> None:
        self._loop = loop
        self._c = consumer

    def topic(self) -> str:
        return self._c.topic()

    def subscription_name(self) -> str:
        return self._c.subscription_name()

    def consumer_name(self) -> str:
        return self._c.consumer_name()

    def is_connected(self) -> bool:
        return self._c.is_connected()

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis``."""
        return self._loop.run(self._c.receive(timeout_millis))

    def _schedule(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._c.state in (LinkState.CLOSED, LinkState.CLOSING):
            raise AlreadyClosed(f"consumer on {self._c.topic()} is closed")
        self._loop.call_soon(fn, *args)

    def acknowledge(self, msg_or_id: Message | MessageId) -> None:
        self._schedule(self._c.acknowledge, msg_or_id)

    def acknowledge_cumulative(self, msg_or_id: Message | MessageId) -> None:
        if self._c._type in _SHARED_TYPES:
            raise CumulativeAcknowledgementNotAllowedError("cumulative ack on a shared subscription")
        self._schedule(self._c.acknowledge_cumulative, msg_or_id)

    def negative_acknowledge(self, msg_or_id: Message | MessageId) -> None:
        self._schedule(self._c.negative_acknowledge, msg_or_id)

    def redeliver_unacknowledged_messages(self) -> None:
        self._schedule(self._c.redeliver_unacknowledged_messages)

    def seek(self, message_id_or_timestamp_ms: MessageId | int) -> None:
        self._loop.run(self._c.seek(message_id_or_timestamp_ms))

    def seek_offset(self, offset: int) -> None:
        """Move the subscription to the message at topic ``offset``: the next
        receive returns it (see AsyncConsumer.seek_offset)."""
        self._loop.run(self._c.seek_offset(offset))

    def get_last_message_id(self) -> MessageId:
        return self._loop.run(self._c.get_last_message_id())

    def unsubscribe(self) -> None:
        self._loop.run(self._c.unsubscribe())

    def close(self) -> None:
        self._loop.run(self._c.close())


class Reader:
    """Blocking reader. Each call to the loop thread costs a hop (~100 us), so
    ``read_next`` brings back every message already received (up to
    ``READ_AHEAD``) and hands them out from here: about one hop per hundred
    messages instead of two per message. Seeking drops what was brought back."""

    READ_AHEAD = 500

    def __init__(self, loop: _LoopThread, reader: AsyncReader) -> None:
        self._loop = loop
        self._r = reader
        self._ahead: deque[Message] = deque()

    def topic(self) -> str:
        return self._r.topic()

    def is_connected(self) -> bool:
        return self._r.is_connected()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        if not self._ahead:
            self._ahead.extend(self._loop.run(self._r.read_some(self.READ_AHEAD, timeout_millis)))
        return self._ahead.popleft()

    def has_message_available(self) -> bool:
        return bool(self._ahead) or self._loop.run(self._r.has_message_available())

    def seek(self, message_id_or_timestamp_ms: MessageId | int) -> None:
        self._ahead.clear()
        self._loop.run(self._r.seek(message_id_or_timestamp_ms))

    def seek_offset(self, offset: int) -> None:
        """Continue from the message at topic ``offset``: the next read_next
        returns it (see AsyncReader.seek_offset)."""
        self._ahead.clear()
        self._loop.run(self._r.seek_offset(offset))

    def get_last_message_id(self) -> MessageId:
        return self._loop.run(self._r.get_last_message_id())

    def close(self) -> None:
        self._ahead.clear()
        self._loop.run(self._r.close())
