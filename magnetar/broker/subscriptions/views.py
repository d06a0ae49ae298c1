"""What the subscription room needs from the objects around it, as protocols.

A subscription belongs to a topic, and consumers and dispatchers belong to a
subscription; the concrete classes live above (``topics.topic.Topic``) or
beside (``subscription.Subscription``, which imports the dispatchers). These
protocols name the few members used from below, so the arrows of the
broker's imports keep pointing one way and each module reads on its own.
"""
from __future__ import annotations

from typing import Any, Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.storage import Entry, ManagedCursor, ManagedLedger, Position

from .throttle import DispatchRates


class TopicView(Protocol):
    """The topic a subscription reads (implemented by ``topics.topic.Topic``)."""

    ledger: ManagedLedger
    config: BrokerConfig
    #: The topic's subscriptions by name (``SubscriptionView`` values).
    subscriptions: dict[str, Any]
    #: The topic may hold markers (it is geo-replicated): dispatchers look.
    filter_markers: bool
    #: Messages and bytes dispatched from the topic (dispatchers add to them).
    msg_out: int
    bytes_out: int
    #: Event-loop time before which dispatchers send nothing (0: none): the
    #: topic just moved here, and its consumers' grouped acks come first.
    dispatch_hold_until: float
    #: The dispatch rate limits of the topic and of each subscription
    #: (``throttle.UNLIMITED`` when none applies).
    dispatch_rates: DispatchRates

    def replicated_subscription_moved(self, name: str, snapshot: Any) -> None:
        """A replicated subscription's mark-delete passed ``snapshot`` (a
        ``pb.ReplicatedSubscriptionsSnapshot``): tell the other clusters."""

    def next_write_position(self) -> Position: ...

    async def find_position_by_time(self, publish_time_ms: int) -> Position: ...

    async def read_compacted(self, dispatcher: Any, consumer: Any, want: int) -> list[Entry] | None:
        """Entries of the topic's compacted view for a read_compacted consumer,
        or None when the dispatcher must read the ledger itself."""


class SubscriptionView(Protocol):
    """A subscription as its consumers and dispatchers see it
    (implemented by ``subscription.Subscription``)."""

    name: str
    topic: TopicView
    ledger: ManagedLedger
    cursor: ManagedCursor
    durable: bool
    msg_out: int
    bytes_out: int
    #: Messages acknowledged, and the wall-clock ms of the last delivery (the stats).
    acked: int
    last_consumed_ms: int

    def on_marker(self, position: Position, metadata: Any, data: bytes) -> None:
        """A dispatcher read a marker entry (it will not be dispatched)."""

    def acknowledge_markers(self, positions: list[Position]) -> None:
        """Acknowledge marker entries a dispatcher skipped."""
