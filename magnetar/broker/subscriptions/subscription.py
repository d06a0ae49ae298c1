"""A subscription: a named cursor on a topic, its consumers and its dispatcher.

Durable subscriptions keep their cursor (mark-delete position and individually
acknowledged ranges) in storage; readers use non-durable ones that vanish with
their consumer. The subscription type is fixed by its first consumer; a
consumer asking for another type while consumers are attached gets
ConsumerBusy, as in Pulsar.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from magnetar.broker.interval_rates import IntervalRates
from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock
from magnetar.storage import ManagedCursor, Position

from .consumer import Consumer
from .dispatcher import Dispatcher, SharedDispatcher, SingleActiveDispatcher
from magnetar.broker.errors import ConsumerBusy, NotAllowed
from .key_shared import KeySharedDispatcher

from .views import TopicView

log = logging.getLogger(__name__)
SubType = pb.CommandSubscribe.SubType
#: The compactor's own cursor on a topic: not a user's subscription (no quota counts it).
COMPACTION_CURSOR = "__compaction"
#: Cursor property that makes a subscription replicated (PIP-33; Pulsar's name).
REPLICATED_PROPERTY = "pulsar.replicated.subscription"
#: Snapshots a replicated subscription keeps ahead of its mark-delete position.
MAX_CACHED_SNAPSHOTS = 10


class Subscription:
    def __init__(self, topic: TopicView, name: str, cursor: ManagedCursor, durable: bool = True) -> None:
        self.topic = topic
        self.ledger = topic.ledger
        self.name = name
        self.cursor = cursor
        self.durable = durable
        self.type: int | None = None
        self.dispatcher: Dispatcher | None = None
        self.consumers: list[Consumer] = []
        #: Messages consumers asked to have again (negative acks, ack timeouts), over time.
        self.redelivered = 0
        #: Dispatched to this subscription's consumers, all of them over time.
        self.msg_out = 0
        self.bytes_out = 0
        #: Messages its consumers acknowledged, and entries message TTL expired, over time.
        self.acked = 0
        self.expired = 0
        #: Wall-clock ms of the last acknowledgement, delivery, FLOW, expiry,
        #: and move of the mark-delete position (0: none since the topic loaded).
        self.last_acked_ms = 0
        self.last_consumed_ms = 0
        self.last_flow_ms = 0
        self.last_expire_ms = 0
        self.last_mark_delete_advanced_ms = 0
        #: Rates of (msg_out, bytes_out, redelivered, acked, expired) over the last stats interval.
        self.interval_rates = IntervalRates(5)
        #: Replicated subscription (PIP-33): snapshots read from the topic,
        #: (local position, ReplicatedSubscriptionsSnapshot), oldest first.
        self.snapshots: deque[tuple[Position, pb.ReplicatedSubscriptionsSnapshot]] = deque(
            maxlen=MAX_CACHED_SNAPSHOTS)
        self._marker_acks: set[asyncio.Task] = set()

    # -- replicated subscriptions ------------------------------------------------
    @property
    def replicated(self) -> bool:
        return bool(self.cursor.properties.get(REPLICATED_PROPERTY))

    async def set_replicated(self, enabled: bool) -> None:
        """Make the subscription follow its consumers to other clusters (persisted)."""
        if self.durable and enabled != self.replicated:
            await self.cursor.set_properties({REPLICATED_PROPERTY: 1 if enabled else None})

    def on_marker(self, position: Position, metadata: pb.MessageMetadata, data: bytes) -> None:
        if metadata.marker_type != pb.REPLICATED_SUBSCRIPTION_SNAPSHOT or not self.replicated:
            return
        try:
            snapshot = pb.ReplicatedSubscriptionsSnapshot.FromString(bytes(PayloadBlock(memoryview(data)).payload))
        except Exception:  # a damaged marker is skipped, never dispatched
            log.warning("%s: unreadable snapshot marker at %s", self.name, position)
            return
        self.snapshots.append((position, snapshot))

    def acknowledge_markers(self, positions: list[Position]) -> None:
        task = asyncio.get_running_loop().create_task(self.acknowledge(positions))
        self._marker_acks.add(task)
        task.add_done_callback(self._marker_ack_done)

    def _marker_ack_done(self, task: asyncio.Task) -> None:
        self._marker_acks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("%s: acknowledging markers failed: %s", self.name, task.exception())

    def _follow_snapshots(self) -> None:
        """The mark-delete position may have passed snapshots: the newest one
        passed is announced to the other clusters (the older ones are moot)."""
        if not self.snapshots:
            return
        mark = self.cursor.mark_delete_position
        passed = None
        while self.snapshots and self.snapshots[0][0] <= mark:
            passed = self.snapshots.popleft()[1]
        if passed is not None and self.replicated:
            self.topic.replicated_subscription_moved(self.name, passed)

    def add_consumer(self, consumer: Consumer, sub_type: int) -> None:
        """Attach a consumer; raise ConsumerBusy/NotAllowed/ConsumerAssignError when
        the type, compacted reads or Key_Shared ranges forbid it (nothing changes then)."""
        if consumer.read_compacted and sub_type not in (SubType.Exclusive, SubType.Failover):
            raise NotAllowed("read_compacted is only allowed on Exclusive or Failover subscriptions")
        if self.consumers:
            if sub_type != self.type:
                raise ConsumerBusy(
                    f"subscription {self.name} is of type {SubType.Name(self.type)}, "
                    f"not {SubType.Name(sub_type)}"
                )
            if sub_type == SubType.Exclusive:
                raise ConsumerBusy(f"exclusive subscription {self.name} already has a consumer")
        if self.dispatcher is None or self.type != sub_type or (
                sub_type == SubType.Key_Shared and not self.consumers
                and self.dispatcher.mode != KeySharedDispatcher.mode_of(consumer)):
            if self.dispatcher is not None:
                self.dispatcher.close()
                # The old dispatcher's replays and delayed entries die with it:
                # read again from the first unacknowledged entry.
                self.cursor.rewind()
            self.type = sub_type
            batch = self.topic.config.dispatcher_max_read_batch
            if sub_type == SubType.Shared:
                self.dispatcher = SharedDispatcher(self, batch)
            elif sub_type == SubType.Key_Shared:
                self.dispatcher = KeySharedDispatcher(self, batch, KeySharedDispatcher.mode_of(consumer))
            else:
                self.dispatcher = SingleActiveDispatcher(self, batch)
        self.dispatcher.add_consumer(consumer)  # may refuse (Key_Shared ranges) before anything changed
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if self.dispatcher is not None:
            self.dispatcher.remove_consumer(consumer)

    def on_new_entries(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.schedule()

    async def acknowledge(self, positions: list[Position]) -> None:
        mark = self.cursor.mark_delete_position
        if self.dispatcher is not None:
            self.dispatcher.acked(positions)
        await self.cursor.delete(positions)
        if self.dispatcher is not None:
            self.dispatcher.acks_applied()
        self._acks_landed(mark)

    async def acknowledge_batch_index(self, position: Position, remaining: int) -> None:
        """Some messages of a batch entry acknowledged (``remaining``: the
        mask of those that are not); the whole entry once none remains."""
        if await self.cursor.delete_batch_indexes(position, remaining):
            await self.acknowledge([position])

    async def acknowledge_cumulative_in_batch(self, position: Position, remaining: int) -> None:
        """A cumulative acknowledgement that stops inside the batch entry
        ``position`` (batch-index acknowledgement): every entry before it, and
        the messages of this one that ``remaining`` (the mask of those *not*
        acknowledged) leaves out. The rest of the batch is delivered again,
        with its ack set, as in Pulsar."""
        before = Position(position.ledger_id, position.entry_id - 1)
        mark = self.cursor.mark_delete_position
        if self.dispatcher is not None:
            self.dispatcher.acked_cumulative(before)
        await self.cursor.mark_delete_within_batch(position, remaining)
        if self.dispatcher is not None:
            self.dispatcher.acks_applied()
        self._acks_landed(mark)

    async def acknowledge_cumulative(self, position: Position) -> None:
        mark = self.cursor.mark_delete_position
        if self.dispatcher is not None:
            self.dispatcher.acked_cumulative(position)
        await self.cursor.mark_delete(position)
        if self.dispatcher is not None:
            self.dispatcher.acks_applied()
        self._acks_landed(mark)

    def _acks_landed(self, mark_before: Position) -> None:
        """After acknowledgements reached the cursor: the stats' timestamps, then snapshots."""
        now_ms = int(time.time() * 1000)
        self.last_acked_ms = now_ms
        if self.cursor.mark_delete_position != mark_before:
            self.last_mark_delete_advanced_ms = now_ms
        self._follow_snapshots()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        n = len(positions) if positions is not None else consumer.unacked_messages()
        self.redelivered += n
        consumer.redelivered += n
        if self.dispatcher is not None:
            self.dispatcher.redeliver(consumer, positions)

    async def reset_cursor(self, position: Position) -> None:
        """Seek: consumers are told to reconnect, then the cursor moves."""
        for consumer in list(self.consumers):
            consumer.disconnect()
            self.remove_consumer(consumer)
        if self.dispatcher is not None:
            self.dispatcher.reset()
        await self.cursor.reset(position)

    def backlog(self) -> int:
        return self.cursor.backlog()

    def detach_for_transfer(self) -> list[Consumer]:
        """Stop dispatching and let go of the consumers *without* telling them
        (the topic is moving: they are told where to, once it is there).
        Returns them."""
        held = list(self.consumers)
        for consumer in held:
            self.remove_consumer(consumer)
        if self.dispatcher is not None:
            self.dispatcher.close()
        return held

    def close(self) -> None:
        for consumer in list(self.consumers):
            consumer.disconnect()
            self.remove_consumer(consumer)
        if self.dispatcher is not None:
            self.dispatcher.close()
