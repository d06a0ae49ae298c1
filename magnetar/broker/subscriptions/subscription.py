"""A subscription: a named cursor on a topic, its consumers and its dispatcher.

Durable subscriptions keep their cursor (mark-delete position and individually
acknowledged ranges) in storage; readers use non-durable ones that vanish with
their consumer. The subscription type is fixed by its first consumer; a
consumer asking for another type while consumers are attached gets
ConsumerBusy, as in Pulsar.
"""
from __future__ import annotations

import logging

from magnetar.protocol import pb
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
        self.msg_rate_redeliver = 0

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
        if self.dispatcher is not None:
            self.dispatcher.acked(positions)
        await self.cursor.delete(positions)
        if self.dispatcher is not None:
            self.dispatcher.acks_applied()

    async def acknowledge_cumulative(self, position: Position) -> None:
        if self.dispatcher is not None:
            self.dispatcher.acked_cumulative(position)
        await self.cursor.mark_delete(position)
        if self.dispatcher is not None:
            self.dispatcher.acks_applied()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
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
