"""AsyncConsumer: receives from one subscription of one topic (or partition).

Flow control: the consumer grants the broker ``receiver_queue_size`` permits
after subscribing and grants more, in chunks of half the queue, as the
application takes messages (a batch entry uses one permit per member).
Messages the consumer drops itself (already acknowledged batch members,
positions before a reader's start, offsets before a ``seek_offset`` target)
count as taken.

A batch member's ack is remembered client side; the entry is acked on the
wire when all its members are, through :class:`.ack_sender.AckSender`
(grouped every ``ack_group_time_ms``, kept until the broker confirms them,
sent again when they may have been lost). Negative acks and ack timeouts
turn into REDELIVER_UNACKNOWLEDGED_MESSAGES: by entry id on Shared/Key_Shared
subscriptions, as "redeliver everything unacked" on Exclusive/Failover ones
(where the broker rewinds the subscription anyway).

On reconnect the consumer re-subscribes under the same id and name, sends
the acks it kept while disconnected, drops the messages it had queued (the
broker will deliver them again) and grants permits afresh. A non-durable subscription (a reader) restarts after the
last message the application took.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Callable, Mapping

from magnetar.protocol import Type, command, pb
from magnetar.protocol.frames import Frame

from .ack_sender import AckSender
from .acks import BatchAckTracker, Deadlines
from .connection import BrokerConnection
from .enums import ConsumerType, InitialPosition
from .errors import (AlreadyClosed, ChecksumError, CumulativeAcknowledgementNotAllowedError,
                     ConnectError, InvalidConfiguration, InvalidMessage, NotConnected, PulsarError,
                     ServiceUnitNotReady, Timeout)
from .inbound import decode_entry
from .link import BrokerLink, LinkState
from .message import Message
from .message_id import MessageId
from .topic import partition_index

log = logging.getLogger(__name__)

_SHARED_TYPES = (ConsumerType.Shared, ConsumerType.KeyShared)
_UINT64_MAX = (1 << 64) - 1


def _id_of(msg_or_id: Message | MessageId) -> MessageId:
    if isinstance(msg_or_id, Message):
        return msg_or_id.message_id()
    if isinstance(msg_or_id, MessageId):
        return msg_or_id
    raise TypeError(f"expected a Message or MessageId, not {type(msg_or_id).__name__}")


def _is_special(mid: MessageId) -> bool:
    return mid == MessageId.earliest or mid == MessageId.latest


def _passes(mid: MessageId, start: MessageId, inclusive: bool) -> bool:
    """Whether ``mid`` is at or after a reader's start position.

    A whole-entry start (batch index -1) covers every member of that entry.
    """
    if mid.entry_key != start.entry_key:
        return mid.entry_key > start.entry_key
    if start.batch_index() < 0:
        return inclusive
    return mid.batch_index() >= start.batch_index() if inclusive else mid.batch_index() > start.batch_index()


def has_more_after(last: MessageId, ref: MessageId, inclusive: bool) -> bool:
    """Whether the topic's last message ``last`` lies beyond position ``ref``."""
    if last.entry_key != ref.entry_key:
        return last.entry_key > ref.entry_key
    if last.batch_index() >= 0 and ref.batch_index() >= 0:
        return last.batch_index() >= ref.batch_index() if inclusive else last.batch_index() > ref.batch_index()
    if ref.batch_index() >= 0:
        # The broker named the entry only: more members if ref is not its last.
        return inclusive or ref.batch_index() < ref.batch_size() - 1
    return inclusive


class AsyncConsumer(BrokerLink):
    kind = "consumer"

    def __init__(
        self, client, topic: str, subscription_name: str, consumer_id: int, *,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        initial_position: InitialPosition = InitialPosition.Latest, receiver_queue_size: int = 1000,
        consumer_name: str | None = None, negative_ack_redelivery_delay_ms: int = 60000,
        unacked_messages_timeout_ms: int | None = None, ack_group_time_ms: int = 100,
        properties: Mapping[str, str] | None = None, is_read_compacted: bool = False,
        durable: bool = True, start_message_id: MessageId | None = None,
        start_message_id_inclusive: bool = False, replicate_subscription_state_enabled: bool = False,
    ) -> None:
        super().__init__(client, topic)
        if receiver_queue_size < 1:
            raise InvalidConfiguration("receiver_queue_size must be >= 1")
        if unacked_messages_timeout_ms is not None and unacked_messages_timeout_ms < 1:
            raise InvalidConfiguration("unacked_messages_timeout_ms must be positive")
        self.consumer_id = consumer_id
        self._subscription = subscription_name
        self._type = ConsumerType(consumer_type)
        self._initial_position = InitialPosition(initial_position)
        self._queue_size = receiver_queue_size
        self._refill_at = max(1, receiver_queue_size // 2)
        self._name = consumer_name
        self._nack_delay = negative_ack_redelivery_delay_ms / 1000
        self._ack_timeout = None if unacked_messages_timeout_ms is None else unacked_messages_timeout_ms / 1000
        self._metadata = dict(properties or {})
        self._read_compacted = is_read_compacted
        self._replicate_state = replicate_subscription_state_enabled
        self._durable = durable
        self._partition = partition_index(topic)
        # Where a non-durable subscription starts (re-subscriptions too), and
        # the filter that drops messages before it.
        self._start = start_message_id
        self._start_inclusive = start_message_id_inclusive
        self._filter: tuple[MessageId, bool] | None = None
        self._publish_time_floor: int | None = None
        #: After seek_offset: messages below this topic offset are skipped
        #: (the broker starts at the entry holding it, which may begin lower).
        self._offset_floor: int | None = None
        self._set_start(start_message_id, start_message_id_inclusive)
        self._last_dequeued: MessageId | None = None
        self._queue: deque[Message] = deque()
        self._waiters: deque[asyncio.Future] = deque()
        self._permits_owed = 0
        self._accepting = True
        self._active: bool | None = None
        self._end_of_topic = False
        self._tracker = BatchAckTracker()
        self._nacks = Deadlines()
        self._nack_timer: asyncio.TimerHandle | None = None
        self._unacked = Deadlines()
        self._unacked_timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._acks = AckSender(self._loop, consumer_id, ack_group_time_ms / 1000, client.new_request_id,
                               self._ready_connection, f"{subscription_name!r} on {topic}")
        #: Called when received messages land in the queue (a partitioned
        #: consumer waits on all its partitions this way).
        self.on_queued: Callable[[], None] | None = None

    def _set_start(self, start: MessageId | None, inclusive: bool) -> None:
        self._start = start
        self._start_inclusive = inclusive
        self._filter = None if start is None or _is_special(start) else (start, inclusive)

    # -- accessors -------------------------------------------------------------------
    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._name or ""

    def is_active(self) -> bool | None:
        """Failover/Exclusive: whether the broker made this consumer the
        active one (None until it said)."""
        return self._active

    def has_reached_end_of_topic(self) -> bool:
        return self._end_of_topic

    # -- registration -------------------------------------------------------------------
    def _subscribe_start(self) -> pb.MessageIdData | None:
        if self._durable:
            return None
        if self._last_dequeued is not None:
            start, inclusive = self._last_dequeued, False
        elif self._start is not None:
            start, inclusive = self._start, self._start_inclusive
        else:
            return None
        data = start.to_proto()
        if inclusive and not _is_special(start) and start.batch_index() < 0:
            # A batch index asks the broker to start one entry early (it
            # cannot know which members we still need); the filter drops
            # what lies before the start.
            data.batch_index = 0
        return data

    async def _register(self, conn: BrokerConnection, timeout: float) -> None:
        conn.attach_consumer(self.consumer_id, self)
        cmd = command(
            Type.SUBSCRIBE, topic=self._topic, subscription=self._subscription, subType=int(self._type),
            consumer_id=self.consumer_id, request_id=self._client.new_request_id(),
            consumer_name=self._name, durable=self._durable, start_message_id=self._subscribe_start(),
            initialPosition=int(self._initial_position), read_compacted=self._read_compacted or None,
            replicate_subscription_state=self._replicate_state or None,
            metadata=[pb.KeyValue(key=k, value=v) for k, v in self._metadata.items()],
        )
        await conn.request(cmd, timeout)
        if not self._durable and self._last_dequeued is not None:
            self._filter = (self._last_dequeued, False)

    def _detach(self, conn: BrokerConnection) -> None:
        conn.detach_consumer(self.consumer_id, self)

    def _unregister_command(self) -> pb.BaseCommand:
        return command(Type.CLOSE_CONSUMER, consumer_id=self.consumer_id, request_id=self._client.new_request_id())

    def _on_link_up(self) -> None:
        self._accepting = True
        self._permits_owed = 0
        # Acks kept while the link was down go first: the broker applies them
        # before the FLOW lets it dispatch, so what the application already
        # acknowledged is not sent again (a topic that moved, a reconnect).
        self._acks.flush()
        self.conn.send_command(command(Type.FLOW, consumer_id=self.consumer_id, messagePermits=self._queue_size))

    def _on_link_down(self) -> None:
        # The broker redelivers what we had queued; keeping it would deliver twice.
        self._queue.clear()
        self._active = None
        self._acks.link_lost()

    def _on_fatal(self, exc: PulsarError) -> None:
        self._fail_waiters(exc)

    def on_active_consumer_change(self, active: bool) -> None:
        self._active = active

    def on_reached_end_of_topic(self) -> None:
        self._end_of_topic = True

    # -- incoming messages ------------------------------------------------------------
    def on_message(self, cmd: pb.CommandMessage, frame: Frame) -> None:
        try:
            messages, count = decode_entry(self._topic, cmd, frame.block, self._partition)
        except (ChecksumError, InvalidMessage) as exc:
            log.warning("consumer %s on %s: dropping entry: %s", self._name, self._topic, exc)
            self._owe(getattr(exc, "num_messages", 1) or 1)
            if isinstance(exc, ChecksumError) and self._type in _SHARED_TYPES:
                self._redeliver([MessageId.from_proto(cmd.message_id, self._partition).entry()])
            return
        if not self._accepting:
            self._owe(count)
            return
        taken = 0
        queue = self._queue
        for msg in messages:
            mid = msg._id
            if self._filter is not None:
                start, inclusive = self._filter
                if not _passes(mid, start, inclusive):
                    continue
                self._filter = None
            if self._publish_time_floor is not None:
                if msg.publish_timestamp() < self._publish_time_floor:
                    continue
                self._publish_time_floor = None
            if self._offset_floor is not None:
                if msg._offset is not None and msg._offset < self._offset_floor:
                    self._skip_before_seek(mid)
                    continue
                self._offset_floor = None
            if self._tracker.is_acked(mid):
                continue
            queue.append(msg)
            taken += 1
        if taken < count:
            self._owe(count - taken)
        if self._waiters:
            self._hand_to_waiters()
        if queue and self.on_queued is not None:
            self.on_queued()

    def _skip_before_seek(self, mid: MessageId) -> None:
        """Drop a message that precedes a ``seek_offset`` target. A durable
        subscription acknowledges it: the seek moved the subscription past
        it, and an entry with an unacked member would be redelivered whole
        after the next reconnect (when the floor is gone)."""
        if self._durable and self._tracker.ack(mid):
            self._acks.add(mid.entry())

    def _hand_to_waiters(self) -> None:
        while self._waiters and self._queue:
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            msg = self._queue.popleft()
            self._dequeued(msg)
            waiter.set_result(msg)

    def _dequeued(self, msg: Message) -> None:
        mid = msg._id
        self._last_dequeued = mid
        if self._ack_timeout is not None:
            self._unacked.add(mid.entry(), self._loop.time() + self._ack_timeout)
            if self._unacked_timer is None:
                self._unacked_timer = self._loop.call_later(self._ack_timeout, self._on_ack_timeout)
        self._owe(1)

    def _owe(self, permits: int) -> None:
        self._permits_owed += permits
        if self._permits_owed >= self._refill_at and self.state is LinkState.READY and self.conn is not None:
            self.conn.send_command(command(Type.FLOW, consumer_id=self.consumer_id,
                                           messagePermits=self._permits_owed))
            self._permits_owed = 0

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis`` (None:
        wait forever), AlreadyClosed once closed, or the consumer's fatal error."""
        self._check_open()
        if self._queue:
            msg = self._queue.popleft()
            self._dequeued(msg)
            return msg
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        if timeout_millis is None:
            return await waiter
        try:
            await asyncio.wait([waiter], timeout=timeout_millis / 1000)
        except asyncio.CancelledError:
            self._abandon(waiter)
            raise
        if waiter.done():
            return waiter.result()
        self._abandon(waiter)
        raise Timeout(f"no message within {timeout_millis} ms")

    def take_queued(self, limit: int) -> list[Message]:
        """Up to ``limit`` messages already received, without waiting (each
        counts as taken, as by :meth:`receive`). For callers on another
        thread that pay a hop per call: one hop can carry many messages."""
        self._check_open()
        out = []
        queue = self._queue
        while queue and len(out) < limit:
            msg = queue.popleft()
            self._dequeued(msg)
            out.append(msg)
        return out

    def _abandon(self, waiter: asyncio.Future) -> None:
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            # Handed a message just as the caller gave up: keep it for the next receive.
            self._queue.appendleft(waiter.result())
            return
        waiter.cancel()
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    def _fail_waiters(self, exc: PulsarError) -> None:
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(exc)

    # -- acknowledgements ----------------------------------------------------------------
    def acknowledge(self, msg_or_id: Message | MessageId) -> None:
        """Acknowledge one message. Sent with the next ack group."""
        self._check_open()
        mid = _id_of(msg_or_id)
        if self._tracker.ack(mid):
            entry = mid.entry()
            self._unacked.remove(entry)
            self._acks.add(entry)

    def acknowledge_cumulative(self, msg_or_id: Message | MessageId) -> None:
        """Acknowledge every message up to and including this one.

        Raises CumulativeAcknowledgementNotAllowedError on Shared/KeyShared.
        """
        self._check_open()
        if self._type in _SHARED_TYPES:
            raise CumulativeAcknowledgementNotAllowedError("cumulative ack on a shared subscription")
        mid = _id_of(msg_or_id)
        position = self._tracker.ack_cumulative(mid)
        for entry in [e for e in list(self._unacked._due) if e.entry_key < mid.entry_key]:
            self._unacked.remove(entry)
        if position is not None:
            if position.entry_key == mid.entry_key:
                self._unacked.remove(position)
            self._acks.add_cumulative(position)

    def _ready_connection(self) -> BrokerConnection | None:
        return self.conn if self.state is LinkState.READY else None

    # -- redelivery ------------------------------------------------------------------------
    def negative_acknowledge(self, msg_or_id: Message | MessageId) -> None:
        """Ask for the message again after ``negative_ack_redelivery_delay_ms``."""
        self._check_open()
        entry = _id_of(msg_or_id).entry()
        self._unacked.remove(entry)
        self._nacks.add(entry, self._loop.time() + self._nack_delay)
        if self._nack_timer is None:
            self._nack_timer = self._loop.call_later(self._nack_delay, self._on_nack_due)

    def _on_nack_due(self) -> None:
        self._nack_timer = None
        due = self._nacks.pop_due(self._loop.time() + 0.001)
        if due:
            self._redeliver(due)
        self._nack_timer = self._rearm(self._nacks, self._on_nack_due)

    def _on_ack_timeout(self) -> None:
        self._unacked_timer = None
        due = self._unacked.pop_due(self._loop.time() + 0.001)
        if due:
            log.info("consumer %s: %d messages not acked in time, redelivering", self._name, len(due))
            self._redeliver(due)
        self._unacked_timer = self._rearm(self._unacked, self._on_ack_timeout)

    def _rearm(self, deadlines: Deadlines, callback) -> asyncio.TimerHandle | None:
        when = deadlines.earliest()
        if when is None or self.state in (LinkState.CLOSED, LinkState.FAILED):
            return None
        return self._loop.call_at(when, callback)

    def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to deliver every unacknowledged message again."""
        self._redeliver(None)

    def _redeliver(self, entries: list[MessageId] | None) -> None:
        if self.state is not LinkState.READY or self.conn is None:
            return  # re-subscribing redelivers unacked messages anyway
        if entries is not None and self._type in _SHARED_TYPES:
            self.conn.send_command(command(
                Type.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=self.consumer_id,
                message_ids=[e.to_proto(with_batch=False) for e in entries]))
            return
        # The broker rewinds to the first unacked message: what we have
        # queued comes again, so drop it now (and its permits come back).
        dropped = len(self._queue)
        self._queue.clear()
        self._unacked.clear()
        self.conn.send_command(command(Type.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=self.consumer_id))
        if dropped:
            self._owe(dropped)

    # -- positions ------------------------------------------------------------------------------
    async def _last_message_id_reply(self) -> pb.CommandGetLastMessageIdResponse:
        # Asked again, with a backoff, while the topic is between owners (a
        # move or an unload answers ServiceNotReady or drops the connection),
        # until the operation timeout, as the Java client does: the consumer
        # reconnects meanwhile (wait_ready).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._client.operation_timeout
        delay = 0.05
        while True:
            conn = await self.wait_ready()
            try:
                reply = await conn.request(
                    command(Type.GET_LAST_MESSAGE_ID, consumer_id=self.consumer_id,
                            request_id=self._client.new_request_id()),
                    max(0.001, deadline - loop.time()))
                return reply.getLastMessageIdResponse
            except (ServiceUnitNotReady, ConnectError):
                if loop.time() + delay >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def get_last_message_id(self) -> MessageId:
        """The id of the topic's last message (entry id -1 when it is empty)."""
        return MessageId.from_proto((await self._last_message_id_reply()).last_message_id, self._partition)

    async def has_message_available(self) -> bool:
        """Whether a receive would find a message now or once it arrives:
        queued here, or stored after the current position."""
        if self._queue:
            return True
        floor = self._offset_floor
        if floor is not None:
            # Nothing taken since a seek_offset: the target exists once written.
            # (The floor itself may be passed, and cleared, while we ask.)
            return bool(self._queue) or await self._next_offset() > floor
        reply = await self._last_message_id_reply()
        if self._queue:
            return True
        last = MessageId.from_proto(reply.last_message_id, self._partition)
        if last.entry_id() < 0 or last.ledger_id() < 0:
            return False
        if self._last_dequeued is not None:
            return has_more_after(last, self._last_dequeued, False)
        start = self._start
        if start is not None and not _is_special(start):
            return has_more_after(last, start, self._start_inclusive)
        if start == MessageId.earliest:
            return True
        if reply.HasField("consumer_mark_delete_position"):
            mark = MessageId.from_proto(reply.consumer_mark_delete_position, self._partition)
            return has_more_after(last, mark, False)
        return False

    async def _next_offset(self) -> int:
        """The topic's next offset, asked of the broker this consumer is on."""
        conn = await self.wait_ready()
        reply = await conn.request(
            command(Type.GET_NEXT_OFFSET, request_id=self._client.new_request_id(), topic=self._topic),
            self._client.operation_timeout)
        return reply.getNextOffsetResponse.next_offset

    async def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id or a publish time (ms).

        A durable subscription then delivers from the target itself; a
        reader follows its ``start_message_id_inclusive`` setting. Messages
        queued before the seek are dropped.
        """
        if isinstance(target, MessageId):
            inclusive = True if self._durable else self._start_inclusive
            await self._seek({"message_id": target.to_proto(with_batch=False)}, target, inclusive)
        elif isinstance(target, int) and not isinstance(target, bool):
            await self._seek({"message_publish_time": target}, MessageId.earliest, self._start_inclusive,
                             time_floor=target)
        else:
            raise TypeError("seek takes a MessageId or a timestamp in milliseconds")

    async def seek_offset(self, offset: int) -> None:
        """Move the subscription (or reader) to the message at topic offset
        ``offset`` (Magnetar brokers only).

        The next message received is the one at ``offset``, then the rest in
        offset order. The broker starts at the entry that holds ``offset``;
        this consumer skips that entry's messages below it (and a durable
        subscription acknowledges them, as the seek moved past them). On a
        Shared or Key_Shared subscription only this consumer skips: another
        consumer may be handed the entry and see its lower messages.

        An offset below the first retained message starts at the first
        retained message (its offset is then above ``offset``: check
        ``Message.offset`` to notice the gap). An offset not written yet
        (at or past the topic's next offset) waits for it; messages
        published before it arrive and are skipped. Messages queued before
        the seek are dropped.

        Raises ValueError for an offset outside 0..2**64-1, TypeError for a
        non-int, the broker's refusal (a broker without offset seeks sees
        no target: UnknownError from older Magnetar, BrokerMetadataError
        from Apache Pulsar), and the usual Timeout / connection errors.
        """
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise TypeError(f"seek_offset takes an int, not {type(offset).__name__}")
        if not 0 <= offset <= _UINT64_MAX:
            raise ValueError(f"offset {offset} is outside 0..2**64-1")
        await self._seek({"magnetar_offset": offset}, MessageId.earliest, self._start_inclusive,
                         offset_floor=offset)

    async def _seek(self, fields: dict, start: MessageId, inclusive: bool, *,
                    time_floor: int | None = None, offset_floor: int | None = None) -> None:
        """Send SEEK with ``fields`` and start over at the broker's new position.

        ``start`` is where a reader re-subscribes if its subscription is gone
        (another broker); the floors filter what arrives before the target.
        """
        await self.wait_ready()
        await self._acks.flush_confirmed(min(self._client.operation_timeout, 5.0))
        self._acks.drop_unconfirmed()
        conn = await self.wait_ready()
        self._set_start(start, inclusive)
        self._publish_time_floor = time_floor
        self._offset_floor = offset_floor
        if self._durable:
            self._start = None  # durable subscriptions start where the broker's cursor is
        registrations = self.registrations
        self._accepting = False  # anything still in flight predates the seek
        self._last_dequeued = None
        dropped = len(self._queue)
        self._queue.clear()
        self._tracker.clear()
        self._nacks.clear()
        self._unacked.clear()
        self._owe(dropped)
        try:
            await conn.request(command(Type.SEEK, consumer_id=self.consumer_id,
                                       request_id=self._client.new_request_id(), **fields),
                               self._client.operation_timeout)
        except PulsarError:
            # The cursor did not move (or we cannot tell): skip nothing.
            self._publish_time_floor = self._offset_floor = None
            raise
        finally:
            if self.registrations == registrations and self.state is LinkState.READY and self.conn is conn:
                # The broker reset the cursor without closing us: start over
                # on this registration, returning the permits spent meanwhile.
                self._accepting = True
                self._queue.clear()
                if self._permits_owed:
                    conn.send_command(command(Type.FLOW, consumer_id=self.consumer_id,
                                              messagePermits=self._permits_owed))
                    self._permits_owed = 0
        # The broker usually closes the consumer to reset it: return once it
        # is subscribed again, so the next call sees the new position.
        try:
            await self.wait_ready()
        except NotConnected:
            pass

    # -- ending -----------------------------------------------------------------------------------
    async def unsubscribe(self) -> None:
        """Delete the subscription (fails if other consumers are attached)."""
        conn = await self.wait_ready()
        await conn.request(command(Type.UNSUBSCRIBE, consumer_id=self.consumer_id,
                                        request_id=self._client.new_request_id()),
                                self._client.operation_timeout)
        await self._shut(send_close=False)

    async def close(self) -> None:
        """Flush acks and detach from the subscription. Idempotent."""
        if self.state in (LinkState.CLOSED, LinkState.CLOSING):
            return
        await self._shut(send_close=True)

    async def _shut(self, send_close: bool) -> None:
        if self.state is LinkState.READY and send_close:
            await self._acks.flush_confirmed(min(self._client.operation_timeout, 5.0))
        self.state = LinkState.CLOSING
        self._stop_reconnecting()
        self._acks.close()
        for timer in (self._nack_timer, self._unacked_timer):
            if timer is not None:
                timer.cancel()
        conn, self.conn = self.conn, None
        if conn is not None:
            self._detach(conn)
            if send_close and conn.is_open:
                try:
                    await conn.request(command(Type.CLOSE_CONSUMER, consumer_id=self.consumer_id,
                                               request_id=self._client.new_request_id()),
                                       self._client.operation_timeout)
                except PulsarError as exc:
                    log.debug("consumer %s: close not confirmed: %s", self._name, exc)
        self._queue.clear()
        self.state = LinkState.CLOSED
        self._fail_waiters(AlreadyClosed(f"consumer on {self._topic} closed"))
        self._client._forget(self)
