"""A producer attached to a topic, and the in-order delivery of its receipts.

Every SEND becomes a :class:`PendingSend` that the topic settles (stored,
refused or failed). Receipts must reach the client in send order even when a
refusal is known at once while earlier entries are still being synced, so
pending sends queue here and are reported from the head only.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from magnetar.broker.interval_rates import IntervalRates
from magnetar.protocol import pb
from magnetar.protocol.receipts import receipt_encoder


AccessMode = pb.ProducerAccessMode


class ProducerTopic(Protocol):
    """The topic a producer is attached to (``topics.topic.Topic``, which imports this module)."""

    #: The topic's name (a ``TopicName``).
    name: Any

    def publish_into(self, producer: "Producer", send: pb.CommandSend, block: Any, pending: "PendingSend",
                     received_ms: int) -> None: ...

    def remove_producer(self, producer: "Producer") -> None: ...


class ProducerSink(Protocol):
    """Where a producer's outcomes go: its client's connection
    (``server.handlers.produce.ProducerReports``). A producer is given one
    when it is made; it calls nothing else of the connection.

    Neither call may raise: they run from storage callbacks and topic closes.
    """

    def send_result(self, producer: "Producer", pending: "PendingSend") -> None:
        """Write ``pending``'s receipt or send error; called in arrival order, once per send."""

    def closed(self, producer: "Producer", assigned: tuple[str, str] | None = None) -> None:
        """Tell the client the broker closed ``producer`` (fenced, unloaded,
        terminated); with ``assigned`` (the new owner's plain and TLS URLs),
        to reconnect there without a lookup (the topic moved there)."""


class _DroppingProducerSink:
    """The sink of a producer with no client (tests): outcomes are dropped."""

    __slots__ = ()

    def send_result(self, producer: "Producer", pending: "PendingSend") -> None:
        pass

    def closed(self, producer: "Producer", assigned: tuple[str, str] | None = None) -> None:
        pass


NO_CLIENT: ProducerSink = _DroppingProducerSink()


@dataclass(frozen=True, slots=True)
class PublishResult:
    """Where an entry landed."""

    ledger_id: int
    entry_id: int
    first_offset: int
    num_messages: int


class PendingSend:
    """One SEND between its arrival and its report to the client.

    Settled once, with a stored entry's place (``ledger_id``, ``entry_id``,
    ``first_offset``, ``num_messages``) or an ``error`` (a BrokerError, or a
    storage failure). A send held during a move (PIP-307) is never settled:
    its producer is closed and the client resends elsewhere. Settling tells
    the followers (a duplicate's resend waiting for the original's outcome,
    someone waiting for the producer to drain), then the owning producer,
    which reports its sends in arrival order. Plain attributes and direct
    calls: this runs once per entry, where a future and its callbacks cost a
    turn of the event loop each.
    """

    __slots__ = ("sequence_id", "highest_sequence_id", "owner", "settled", "error",
                 "ledger_id", "entry_id", "first_offset", "num_messages", "_followers", "token", "marker")

    def __init__(self, sequence_id: int, highest_sequence_id: int, owner: "Producer | None" = None) -> None:
        self.sequence_id = sequence_id
        self.highest_sequence_id = highest_sequence_id
        self.owner = owner
        self.settled = False
        self.error: BaseException | None = None
        self.ledger_id = self.entry_id = self.first_offset = -1
        self.num_messages = 0
        self._followers: list | None = None
        #: While its entry is appended and not yet stored, the topic's record
        #: of it rides here (no tuple per entry beside it): its deduplication
        #: token, and a marker hook (PIP-33) or None; ``first_offset`` and
        #: ``num_messages`` are set when it is appended.
        self.token: tuple | None = None
        self.marker = None

    def stored(self, ledger_id: int, entry_id: int, first_offset: int, num_messages: int) -> None:
        """The entry is durable at ``ledger_id:entry_id`` (``-1:-1``: a duplicate
        whose original is no longer known)."""
        if self.settled:
            return
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.first_offset = first_offset
        self.num_messages = num_messages
        # _settle() inlined: this runs once per stored entry.
        self.settled = True
        if self._followers is not None:
            followers, self._followers = self._followers, None
            for callback in followers:
                callback(self)
        owner = self.owner
        if owner is not None:
            # Producer._settled inlined for the usual case: this send is the
            # only one its producer waits for, so it is reported at once.
            queue = owner._pending
            if len(queue) == 1 and queue[0] is self:
                queue.popleft()
                owner.sink.send_result(owner, self)
            else:
                owner._settled(self)

    def failed(self, error: BaseException) -> None:
        """Nothing of this send is stored; the client hears ``error``."""
        if self.settled:
            return
        self.error = error
        self._settle()

    def settle_like(self, original: "PendingSend") -> None:
        """A duplicate: the same outcome as ``original`` (now or once it has one)."""
        if not original.settled:
            original.follow(self.settle_like)
        elif original.error is not None:
            self.failed(original.error)
        else:
            self.stored(original.ledger_id, original.entry_id, original.first_offset, original.num_messages)

    def follow(self, callback: Callable[["PendingSend"], None]) -> None:
        """Call ``callback(self)`` once settled (at once if it is)."""
        if self.settled:
            callback(self)
        elif self._followers is None:
            self._followers = [callback]
        else:
            self._followers.append(callback)

    def result(self) -> PublishResult:
        """The outcome as a PublishResult; raises the error if it failed."""
        if self.error is not None:
            raise self.error
        return PublishResult(self.ledger_id, self.entry_id, self.first_offset, self.num_messages)

    def _settle(self) -> None:
        self.settled = True
        followers, self._followers = self._followers, None
        if followers:
            for callback in followers:
                callback(self)
        if self.owner is not None:
            self.owner._settled(self)


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
    #: Where receipts, send errors and the broker's close go (the client's connection).
    sink: ProducerSink = NO_CLIENT
    address: str = ""
    connected_since: float = 0.0
    msg_in: int = 0
    bytes_in: int = 0
    #: The client library's version (CONNECT) and the producer's metadata (PRODUCER).
    client_version: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    #: Rates of (msg_in, bytes_in) over the last stats interval.
    interval_rates: IntervalRates = field(default_factory=lambda: IntervalRates(2))
    _pending: deque = field(default_factory=deque)
    #: ``receipt(seq, highest_seq, ledger_id, entry_id, offset)``: this
    #: producer's SEND_RECEIPT frame (``protocol.receipts.receipt_encoder``).
    receipt: Callable[[int, int, int, int, int], bytes] = field(init=False)

    #: Geo-replication's producer (named ``pulsar.repl.<source cluster>``):
    #: the entries it brings may be markers for this cluster (PIP-33).
    replicator: bool = field(init=False)

    def __post_init__(self) -> None:
        self.receipt = receipt_encoder(self.producer_id)
        self.replicator = self.name.startswith("pulsar.repl.")

    def expect(self, sequence_id: int, highest_sequence_id: int) -> "PendingSend":
        """A send arrived: its outcome is reported after every earlier one's."""
        send = PendingSend(sequence_id, highest_sequence_id, self)
        self._pending.append(send)
        return send

    def _settled(self, send: "PendingSend") -> None:
        """``send`` has its outcome: report whatever the head of the queue allows."""
        pending = self._pending
        if not pending or pending[0] is not send:
            return  # an earlier send is still waiting: this one is reported after it
        report = self.sink.send_result
        while pending and pending[0].settled:
            report(self, pending.popleft())

    def disconnect(self, assigned: tuple[str, str] | None = None) -> None:
        """Tell the client the broker closed this producer (see :meth:`ProducerSink.closed`)."""
        self.sink.closed(self, assigned)

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
        # The last pending send's receipt goes out right after its followers
        # run; look again on the next turn of the loop.
        self._pending[-1].follow(lambda _send: loop.call_soon(self.when_reported, callback))

    async def reported(self) -> None:
        """Wait until every send accepted so far has been reported."""
        done = asyncio.get_running_loop().create_future()
        self.when_reported(lambda: done.done() or done.set_result(None))
        await done

    @property
    def pending_count(self) -> int:
        return len(self._pending)
