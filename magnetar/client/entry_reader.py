"""AsyncEntryReader: a reader that hands over whole stored entries, undecoded.

A columnar consumer (the Spark connector) turns many messages into column
buffers at once; a :class:`Message` per batch member would be the most
expensive part of its read. This reader queues each delivered entry as a
:class:`RawEntry` (its metadata parsed once, the payload still compressed
and unsplit) and leaves splitting batches to the caller.

Same subscription semantics as :class:`~.reader.AsyncReader`: non-durable,
exclusive, starting at a message id (a whole entry: batch index -1), nothing
acknowledged. Read-ahead is the receiver queue: the broker may deliver up to
``receiver_queue_size`` messages (counted per batch member) before the
caller takes any, refilled by halves as entries are taken. After a
reconnect it resumes after the last entry the caller took.

Failure modes: an entry whose checksum does not match or that cannot be
parsed is *not* dropped silently: :meth:`read_entries` raises InvalidMessage
for it (a reader that skipped it would lose its messages). Timeout when
nothing arrives in time; AlreadyClosed; the consumer's fatal errors.
"""
from __future__ import annotations

import asyncio
import uuid
from collections import deque
from typing import NamedTuple

from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.frames import Frame

from .consumer import AsyncConsumer
from .enums import ConsumerType
from .errors import InvalidConfiguration, InvalidMessage, PulsarError, Timeout
from .message_id import MessageId


class RawEntry(NamedTuple):
    """One delivered entry. ``first_offset`` is the topic offset of its first
    message (None without broker entry metadata); ``count`` its messages."""

    ledger_id: int
    entry_id: int
    first_offset: int | None
    count: int
    metadata: pb.MessageMetadata
    metadata_bytes: memoryview
    payload: memoryview


def raw_entry(cmd: pb.CommandMessage, frame: Frame) -> RawEntry:
    """Parse a MESSAGE frame's entry. Raises InvalidMessage (checksum, format)."""
    block = frame.block
    try:
        if block is None:
            raise ProtocolError("MESSAGE without a payload")
        if not block.verify_checksum():
            raise ProtocolError("checksum mismatch")
        meta = block.metadata
        bem = block.broker_entry_metadata
        count = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
        first = bem.index - count + 1 if bem is not None and bem.HasField("index") else None
        return RawEntry(cmd.message_id.ledgerId, cmd.message_id.entryId, first, count, meta, block.metadata_bytes,
                        block.payload)
    except ProtocolError as exc:
        raise InvalidMessage(f"entry {cmd.message_id.ledgerId}:{cmd.message_id.entryId}: {exc}") from None


class AsyncEntryReader(AsyncConsumer):
    """Create with :func:`create_entry_reader`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._entries: deque[RawEntry | InvalidMessage] = deque()
        self._arrived: asyncio.Future | None = None

    # -- incoming ----------------------------------------------------------------------------------
    def on_message(self, cmd: pb.CommandMessage, frame: Frame) -> None:
        try:
            item: RawEntry | InvalidMessage = raw_entry(cmd, frame)
        except InvalidMessage as exc:
            item = exc
        if not self._accepting:
            self._owe(item.count if isinstance(item, RawEntry) else 1)
            return
        if self._filter is not None and isinstance(item, RawEntry):
            start, inclusive = self._filter
            key = (item.ledger_id, item.entry_id)
            if key < start.entry_key or (key == start.entry_key and start.batch_index() < 0 and not inclusive):
                self._owe(item.count)
                return
            self._filter = None
        self._entries.append(item)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    def _on_link_down(self) -> None:
        super()._on_link_down()
        self._entries.clear()  # the broker delivers them again after the last entry taken

    def _on_fatal(self, exc: PulsarError) -> None:
        super()._on_fatal(exc)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_exception(exc)

    # -- taking ------------------------------------------------------------------------------------
    async def read_entries(self, max_messages: int, timeout_millis: int) -> list[RawEntry]:
        """The next entries in order, at least one, more while they are
        already here and hold at most ``max_messages`` messages in all.
        Raises Timeout if none arrives within ``timeout_millis``."""
        self._check_open()
        if not self._entries:
            self._arrived = self._loop.create_future()
            try:
                await asyncio.wait_for(asyncio.shield(self._arrived), timeout_millis / 1000)
            except asyncio.TimeoutError:
                raise Timeout(f"no entry within {timeout_millis} ms") from None
            finally:
                self._arrived = None
            self._check_open()
        out: list[RawEntry] = []
        taken = 0
        while self._entries:
            item = self._entries[0]
            if isinstance(item, InvalidMessage):
                if out:
                    break  # hand over what came before it first
                self._entries.popleft()
                raise item
            if out and taken + item.count > max_messages:
                break
            self._entries.popleft()
            out.append(item)
            taken += item.count
            self._last_dequeued = MessageId(item.ledger_id, item.entry_id, -1, self._partition)
            self._owe(item.count)
        return out

    async def close(self) -> None:
        await super().close()
        self._entries.clear()


async def create_entry_reader(client, topic: str, start_message_id: MessageId, *, inclusive: bool = True,
                              receiver_queue_size: int = 100_000) -> AsyncEntryReader:
    """An entry reader of ``topic`` (one partition, or a non-partitioned
    topic) on ``client`` (an AsyncClient), positioned at ``start_message_id``
    (an entry, MessageId.earliest or MessageId.latest)."""
    client._check_open()
    if not isinstance(start_message_id, MessageId):
        raise InvalidConfiguration("start_message_id must be a MessageId")
    topic = await client._single_partition_topic(topic)
    reader = AsyncEntryReader(client, topic, f"entry-reader-{uuid.uuid4().hex[:10]}", next(client._consumer_ids), consumer_type=ConsumerType.Exclusive,
                              receiver_queue_size=receiver_queue_size, durable=False,
                              start_message_id=start_message_id, start_message_id_inclusive=inclusive)
    await client._start(reader)
    return reader
