"""Message: what a consumer or reader receives. Read-only.

The metadata objects are shared by all members of a batch and only
interpreted when an accessor asks, so receiving costs little per message.
"""
from __future__ import annotations

import base64

from magnetar.protocol import pb

from .message_id import MessageId


class Message:
    __slots__ = ("_topic", "_id", "_meta", "_single", "_data", "_redelivery_count", "_offset")

    def __init__(
        self, topic: str, message_id: MessageId, metadata: pb.MessageMetadata,
        single: pb.SingleMessageMetadata | None, data: bytes, redelivery_count: int = 0,
        offset: int | None = None,
    ) -> None:
        self._topic = topic
        self._id = message_id
        self._meta = metadata
        self._single = single
        self._data = data
        self._redelivery_count = redelivery_count
        self._offset = offset

    def data(self) -> bytes:
        return self._data

    def value(self) -> bytes:
        """The payload (this client has no schemas: bytes in, bytes out)."""
        return self._data

    def properties(self) -> dict[str, str]:
        source = self._single if self._single is not None else self._meta
        return {kv.key: kv.value for kv in source.properties}

    def partition_key(self) -> str:
        """The message key ('' when none)."""
        if self._single is not None:
            return self._single.partition_key
        return self._meta.partition_key

    def partition_key_bytes(self) -> bytes:
        """The key as bytes: a key the producer sent base64-encoded (flag
        ``partition_key_b64_encoded``, how Pulsar clients send binary keys)
        decoded, any other its UTF-8 (text flagged but not base64 stays text)."""
        source = self._single if self._single is not None else self._meta
        if source.partition_key_b64_encoded:
            try:
                return base64.b64decode(source.partition_key, validate=True)
            except ValueError:
                pass
        return source.partition_key.encode()

    def has_partition_key(self) -> bool:
        source = self._single if self._single is not None else self._meta
        return source.HasField("partition_key")

    def ordering_key(self) -> str:
        """The ordering key decoded as UTF-8 ('' when none); see ordering_key_bytes."""
        return self.ordering_key_bytes().decode("utf-8", "replace")

    def ordering_key_bytes(self) -> bytes:
        if self._single is not None:
            return self._single.ordering_key
        return self._meta.ordering_key

    def publish_timestamp(self) -> int:
        """Milliseconds since the epoch, set by the producer."""
        return self._meta.publish_time

    def event_timestamp(self) -> int:
        """The application's event time in ms, 0 when none was set."""
        if self._single is not None and self._single.event_time:
            return self._single.event_time
        return self._meta.event_time

    def message_id(self) -> MessageId:
        return self._id

    def redelivery_count(self) -> int:
        return self._redelivery_count

    def topic_name(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._meta.producer_name

    def sequence_id(self) -> int:
        if self._single is not None and self._single.HasField("sequence_id"):
            return self._single.sequence_id
        return self._meta.sequence_id + max(self._id.batch_index(), 0)

    @property
    def offset(self) -> int | None:
        """The message's dense offset in its topic, or None when the broker
        sent no broker entry metadata index."""
        return self._offset

    def __repr__(self) -> str:
        return f"Message(id={self._id!r}, topic={self._topic!r}, size={len(self._data)})"
