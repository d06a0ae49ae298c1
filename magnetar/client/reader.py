"""AsyncReader: reads a topic from a chosen position, with no durable state.

A reader is a consumer on a non-durable, exclusive subscription that starts
at ``start_message_id`` (``MessageId.earliest``, ``MessageId.latest`` or a
message's id, that message included only with
``start_message_id_inclusive``), and can be moved with ``seek`` (message id,
publish time) or ``seek_offset`` (topic offset). Nothing is acknowledged;
after a reconnect it resumes after the last message it returned.
"""
from __future__ import annotations

from .consumer import AsyncConsumer
from .message import Message
from .message_id import MessageId


class AsyncReader:
    def __init__(self, consumer: AsyncConsumer) -> None:
        self._consumer = consumer

    def topic(self) -> str:
        return self._consumer.topic()

    def subscription_name(self) -> str:
        return self._consumer.subscription_name()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis``."""
        return await self._consumer.receive(timeout_millis)

    async def read_some(self, limit: int, timeout_millis: int | None = None) -> list[Message]:
        """The next message and up to ``limit - 1`` more already received, in
        order; raises Timeout after ``timeout_millis`` if none comes."""
        first = await self._consumer.receive(timeout_millis)
        return [first, *self._consumer.take_queued(limit - 1)]

    async def has_message_available(self) -> bool:
        return await self._consumer.has_message_available()

    async def seek(self, target: MessageId | int) -> None:
        """Continue from a message id (respecting the inclusive setting) or
        from the first message published at or after a time in ms."""
        await self._consumer.seek(target)

    async def seek_offset(self, offset: int) -> None:
        """Continue from the message at topic offset ``offset``: the next
        :meth:`read_next` returns exactly that message (messages of its
        entry with lower offsets are skipped here), whatever the inclusive
        setting. Older than the first retained message: from the first
        retained one; not written yet: waits for it. See
        :meth:`AsyncConsumer.seek_offset` for the errors."""
        await self._consumer.seek_offset(offset)

    async def get_last_message_id(self) -> MessageId:
        return await self._consumer.get_last_message_id()

    async def close(self) -> None:
        await self._consumer.close()
