"""A producer and a consumer over every partition of a partitioned topic.

:class:`PartitionedProducer` holds one :class:`~.producer.AsyncProducer` per
partition, all under one producer name (the first partition's), and sends
each message where :mod:`.partition_routing` says. :class:`PartitionedConsumer`
holds one :class:`~.consumer.AsyncConsumer` per partition on the same
subscription; ``receive`` takes from whichever partition has a message
(round robin among those that do), and acknowledgements go to the partition
named in the message id. Order holds per partition, as in Pulsar.

Both have the methods of their single-topic counterparts that make sense
over several topics. Conditional sends (``expected_offset``) and offset
seeks name one partition's log, so they are refused here: use the partition
(``TOPIC-partition-N``) for them. The partition count is read once, at
creation; partitions added later are not followed yet.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .consumer import AsyncConsumer, _id_of
from .errors import OperationNotSupported, PulsarError, Timeout
from .link import LinkState
from .message import Message
from .message_id import MessageId
from .producer import AsyncProducer

if TYPE_CHECKING:
    from .producer import SendCallback


class _Outgoing:
    """What a custom ``message_router`` is shown of a message before it is sent."""

    __slots__ = ("_data", "_properties", "_key")

    def __init__(self, data: bytes, properties: Mapping[str, str] | None, key: str | None) -> None:
        self._data, self._properties, self._key = data, dict(properties or {}), key

    def data(self) -> bytes:
        return self._data

    def properties(self) -> dict[str, str]:
        return self._properties

    def partition_key(self) -> str:
        return self._key or ""

    def has_partition_key(self) -> bool:
        return bool(self._key)


class PartitionedProducer:
    """One producer per partition, routed by ``route(message, key) -> index``."""

    def __init__(self, topic: str, producers: list[AsyncProducer], route: Callable[[Any, str | None], int]) -> None:
        self._topic = topic
        self._producers = producers
        self._route = route
        self._block_if_full = producers[0]._block_if_full

    # -- accessors -------------------------------------------------------------------
    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._producers[0].producer_name()

    def last_sequence_id(self) -> int:
        return max(p.last_sequence_id() for p in self._producers)

    @property
    def partitions(self) -> list[AsyncProducer]:
        """The partitions' producers, by index."""
        return list(self._producers)

    pid = generation = next_sequence = None  # per partition: see .partitions
    state = property(lambda self: self._producers[0].state)

    def is_connected(self) -> bool:
        return all(p.is_connected() for p in self._producers)

    # -- sending ---------------------------------------------------------------------
    def _pick(self, content: bytes, properties: Mapping[str, str] | None, partition_key: str | None,
              expected_offset: int | None) -> AsyncProducer:
        if expected_offset is not None:
            raise OperationNotSupported(f"{self._topic} is partitioned: a conditional send names one "
                                        "partition's log (send to TOPIC-partition-N)")
        return self._producers[self._route(_Outgoing(content, properties, partition_key), partition_key)]

    async def send(self, content: bytes, properties: Mapping[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: bytes | str | None = None, event_timestamp: int | None = None,
                   sequence_id: int | None = None, expected_offset: int | None = None) -> MessageId:
        """Publish to the routed partition and wait for its receipt (the id
        names the partition)."""
        producer = self._pick(content, properties, partition_key, expected_offset)
        return await producer.send(content, properties, partition_key, ordering_key, event_timestamp, sequence_id)

    def send_async(self, content: bytes, callback: "SendCallback | None", **kwargs: Any) -> None:
        try:
            producer = self._pick(content, kwargs.get("properties"), kwargs.get("partition_key"),
                                  kwargs.pop("expected_offset", None))
        except PulsarError as exc:
            if callback is None:
                raise
            callback(exc.result, None)
            return
        producer.send_async(content, callback, **kwargs)

    async def _wait_for_space(self) -> None:
        # Room in every partition's queue: the next message may go to any.
        for producer in self._producers:
            await producer._wait_for_space()

    async def flush(self) -> None:
        await asyncio.gather(*(p.flush() for p in self._producers))

    async def close(self) -> None:
        await asyncio.gather(*(p.close() for p in self._producers), return_exceptions=True)


class PartitionedConsumer:
    """One consumer per partition on the same subscription."""

    def __init__(self, topic: str, consumers: list[AsyncConsumer]) -> None:
        self._topic = topic
        self._consumers = consumers
        self._type = consumers[0]._type
        self._next = 0
        self._ready = asyncio.Event()
        for consumer in consumers:
            consumer.on_queued = self._ready.set

    # -- accessors -------------------------------------------------------------------
    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._consumers[0].subscription_name()

    def consumer_name(self) -> str:
        return self._consumers[0].consumer_name()

    @property
    def partitions(self) -> list[AsyncConsumer]:
        return list(self._consumers)

    state = property(lambda self: self._consumers[0].state)

    def is_connected(self) -> bool:
        return all(c.is_connected() for c in self._consumers)

    # -- receiving -------------------------------------------------------------------
    def _take(self) -> Message | None:
        n = len(self._consumers)
        for step in range(n):
            index = (self._next + step) % n
            taken = self._consumers[index].take_queued(1)
            if taken:
                self._next = (index + 1) % n
                return taken[0]
        return None

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message from any partition; Timeout after ``timeout_millis``
        (None: wait forever), AlreadyClosed once closed."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_millis is None else loop.time() + timeout_millis / 1000
        while True:
            self._ready.clear()  # before looking: a message queued after the look sets it again
            msg = self._take()
            if msg is not None:
                return msg
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise Timeout(f"no message within {timeout_millis} ms")
            try:
                await asyncio.wait_for(self._ready.wait(), remaining)
            except asyncio.TimeoutError:
                raise Timeout(f"no message within {timeout_millis} ms") from None

    # -- acknowledgements ------------------------------------------------------------
    def _owner(self, msg_or_id: Message | MessageId) -> AsyncConsumer:
        index = _id_of(msg_or_id).partition()
        if not 0 <= index < len(self._consumers):
            raise OperationNotSupported(f"message id {_id_of(msg_or_id)} names no partition of {self._topic}")
        return self._consumers[index]

    def acknowledge(self, msg_or_id: Message | MessageId) -> None:
        self._owner(msg_or_id).acknowledge(msg_or_id)

    def acknowledge_cumulative(self, msg_or_id: Message | MessageId) -> None:
        """Everything up to this message *on its partition* (as in Pulsar)."""
        self._owner(msg_or_id).acknowledge_cumulative(msg_or_id)

    def negative_acknowledge(self, msg_or_id: Message | MessageId) -> None:
        self._owner(msg_or_id).negative_acknowledge(msg_or_id)

    def redeliver_unacknowledged_messages(self) -> None:
        for consumer in self._consumers:
            consumer.redeliver_unacknowledged_messages()

    async def seek(self, target: MessageId | int) -> None:
        """A publish time (ms) moves every partition; a message id, its partition."""
        if isinstance(target, MessageId):
            await self._owner(target).seek(target)
            return
        await asyncio.gather(*(c.seek(target) for c in self._consumers))

    async def seek_offset(self, offset: int) -> None:
        raise OperationNotSupported(f"{self._topic} is partitioned: offsets are per partition "
                                    "(seek on a TOPIC-partition-N consumer)")

    async def get_last_message_id(self) -> MessageId:
        raise OperationNotSupported(f"{self._topic} is partitioned: ask each partition")

    async def unsubscribe(self) -> None:
        await asyncio.gather(*(c.unsubscribe() for c in self._consumers))

    async def close(self) -> None:
        if self.state in (LinkState.CLOSED, LinkState.CLOSING):
            return
        await asyncio.gather(*(c.close() for c in self._consumers), return_exceptions=True)
        self._ready.set()
