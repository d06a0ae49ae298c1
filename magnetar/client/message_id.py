"""MessageId: where a message sits in a topic.

A message id is (ledger, entry) of the stored entry, plus the message's index
inside the entry when the entry is a batch (-1 otherwise) and the partition
index (-1 for a non-partitioned topic). Ids of one topic order by
(ledger, entry, batch_index); a whole-entry id (batch_index -1) sorts before
the entry's batch members.

The wire carries ledger and entry as uint64; Pulsar's sentinels use -1, so
this class holds them signed and converts at the edge:
``MessageId.earliest`` is (-1, -1) (2^64-1 on the wire) and
``MessageId.latest`` is (INT64_MAX, INT64_MAX).
"""
from __future__ import annotations

from magnetar.protocol import pb
from magnetar.protocol.commands import signed64

_U64 = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1


class MessageId:
    """An immutable, hashable, ordered message position.

    Constructor order is (ledger_id, entry_id, batch_index, partition);
    pass keywords when porting code written for the official client, whose
    constructor starts with ``partition``. ``batch_size`` is the number of
    messages in the entry when known; ``offset`` is the message's dense topic
    offset when known (set on the ids ``send`` returns and on received
    messages' ids). Neither is part of equality.
    """

    __slots__ = ("_ledger", "_entry", "_batch", "_partition", "_batch_size", "_offset")

    earliest: "MessageId"
    latest: "MessageId"

    def __init__(
        self, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1, partition: int = -1,
        batch_size: int = 0, offset: int | None = None,
    ) -> None:
        self._ledger = ledger_id
        self._entry = entry_id
        self._batch = batch_index
        self._partition = partition
        self._batch_size = batch_size
        self._offset = offset

    # -- accessors named like the official client's -------------------------
    def ledger_id(self) -> int:
        return self._ledger

    def entry_id(self) -> int:
        return self._entry

    def batch_index(self) -> int:
        return self._batch

    def partition(self) -> int:
        return self._partition

    def batch_size(self) -> int:
        return self._batch_size

    @property
    def offset(self) -> int | None:
        """The message's dense offset in its topic (first offset of its entry
        + batch index), or None when not known: ids built by hand or
        deserialized, and the -1:-1 answer to a duplicate the broker no
        longer remembers."""
        return self._offset

    @property
    def entry_key(self) -> tuple[int, int]:
        """(ledger, entry): the stored entry this message belongs to."""
        return (self._ledger, self._entry)

    def in_batch(self) -> bool:
        """True for a member of a batch entry of more than one message."""
        return self._batch >= 0 and self._batch_size > 1

    def entry(self) -> "MessageId":
        """The whole-entry id (batch index dropped), which acks and redeliveries use."""
        return MessageId(self._ledger, self._entry, -1, self._partition)

    # -- order and identity --------------------------------------------------
    def _key(self) -> tuple[int, int, int, int]:
        return (self._partition, self._ledger, self._entry, self._batch)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageId) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: "MessageId") -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() < other._key()

    def __le__(self, other: "MessageId") -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() <= other._key()

    def __gt__(self, other: "MessageId") -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() > other._key()

    def __ge__(self, other: "MessageId") -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() >= other._key()

    def __repr__(self) -> str:
        return f"MessageId({self._ledger}, {self._entry}, {self._batch}, {self._partition})"

    def __str__(self) -> str:
        return f"({self._ledger},{self._entry},{self._partition},{self._batch})"

    # -- wire ------------------------------------------------------------------
    def to_proto(self, *, with_batch: bool = True) -> pb.MessageIdData:
        data = pb.MessageIdData(ledgerId=self._ledger & _U64, entryId=self._entry & _U64)
        if self._partition != -1:
            data.partition = self._partition
        if with_batch and self._batch != -1:
            data.batch_index = self._batch
            if self._batch_size:
                data.batch_size = self._batch_size
        return data

    @classmethod
    def from_proto(cls, data: pb.MessageIdData, partition: int | None = None) -> "MessageId":
        return cls(
            signed64(data.ledgerId), signed64(data.entryId), data.batch_index,
            data.partition if partition is None else partition, data.batch_size,
        )

    def serialize(self) -> bytes:
        """Bytes of the id (a MessageIdData, like the official client's)."""
        return self.to_proto().SerializeToString()

    @classmethod
    def deserialize(cls, data: bytes) -> "MessageId":
        """The id ``serialize`` produced; raises ValueError on garbage."""
        msg = pb.MessageIdData()
        try:
            msg.ParseFromString(data)
        except Exception as exc:
            raise ValueError(f"not a serialized MessageId: {exc}") from None
        if not msg.IsInitialized():
            raise ValueError("not a serialized MessageId: ledger or entry missing")
        return cls.from_proto(msg)


MessageId.earliest = MessageId(-1, -1)
MessageId.latest = MessageId(INT64_MAX, INT64_MAX)
