"""A producer attached to a topic, and the in-order delivery of its receipts.

Every SEND yields a future (stored, refused or failed). Receipts must reach
the client in send order even when a refusal is known at once while earlier
entries are still being synced, so results queue here and leave from the
head only.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from magnetar.protocol import pb
from magnetar.protocol.receipts import ReceiptTemplate


AccessMode = pb.ProducerAccessMode


class ProducerTopic(Protocol):
    """The topic a producer is attached to (``topics.topic.Topic``, which imports this module)."""

    #: The topic's name (a ``TopicName``).
    name: Any

    def publish(self, producer: "Producer", send: pb.CommandSend, block: Any) -> asyncio.Future: ...

    def remove_producer(self, producer: "Producer") -> None: ...


@dataclass(frozen=True, slots=True)
class PublishResult:
    """Where an entry landed."""

    ledger_id: int
    entry_id: int
    first_offset: int
    num_messages: int


@dataclass(eq=False)
class Producer:
    producer_id: int
    name: str
    topic: ProducerTopic
    access_mode: int = AccessMode.Shared
    #: The topic epoch this producer was admitted under (exclusive modes).
    epoch: int = 0
    user_provided_name: bool = False
    #: Declared with producer metadata ``magnetar.idempotent=true``: its
    #: entries carry pid, generation and sequence in their MessageMetadata.
    idempotent: bool = False
    #: Declared with producer metadata ``magnetar.deduplicate=true``: its
    #: sends are deduplicated by (name, sequence id) as if the topic's
    #: deduplication policy were on, whatever it is.
    deduplicate: bool = False
    #: Set once the producer lost its access: nothing it sends may land.
    fenced: bool = False
    #: Conditional sends must carry this epoch; each refusal moves it on.
    offset_epoch: int = 0
    #: Where to write receipts: callable(seq, highest_seq, result_future).
    on_result: Callable[[int, int, asyncio.Future], None] | None = None
    #: Tells the client the broker closed this producer (fenced, unloaded);
    #: with a URL, to reconnect there without a lookup (the topic moved there).
    disconnect: Callable[..., None] = lambda url=None: None
    address: str = ""
    connected_since: float = 0.0
    msg_in: int = 0
    bytes_in: int = 0
    _pending: deque = field(default_factory=deque)
    #: SEND_RECEIPT frames of this producer, from pre-encoded pieces.
    receipts: ReceiptTemplate = field(init=False)

    #: Geo-replication's producer (named ``pulsar.repl.<source cluster>``):
    #: the entries it brings may be markers for this cluster (PIP-33).
    replicator: bool = field(init=False)

    def __post_init__(self) -> None:
        self.receipts = ReceiptTemplate(self.producer_id)
        self.replicator = self.name.startswith("pulsar.repl.")

    def enqueue(self, sequence_id: int, highest_sequence_id: int, result: asyncio.Future) -> None:
        """Queue a send's outcome; it is reported after every earlier one."""
        self._pending.append((sequence_id, highest_sequence_id, result))
        if len(self._pending) == 1:
            result.add_done_callback(self._drain)

    def _drain(self, _fut: asyncio.Future | None = None) -> None:
        pending = self._pending
        while pending and pending[0][2].done():
            seq, highest, fut = pending.popleft()
            if self.on_result is not None:
                self.on_result(seq, highest, fut)
        if pending:
            pending[0][2].add_done_callback(self._drain)

    def when_reported(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once every send accepted so far has had its
        outcome reported (receipt or error), at once if none is pending.

        Closing a producer waits for this: a client told its producer is
        closed gives up on (and reports as failed) the sends it has not heard
        about, so a receipt that follows the close would turn a stored entry
        into a "failed" one in the application's eyes.
        """
        if not self._pending:
            callback()
            return
        loop = asyncio.get_running_loop()
        # Once the last pending outcome is done, its receipt goes out in the
        # same round of callbacks; look again on the next turn of the loop.
        self._pending[-1][2].add_done_callback(lambda _: loop.call_soon(self.when_reported, callback))

    @property
    def pending_count(self) -> int:
        return len(self._pending)
