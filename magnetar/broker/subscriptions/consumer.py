"""A consumer attached to a subscription: its permits and unacknowledged entries.

The broker counts permits in messages (a batch entry of N messages costs N),
as the client's FLOW does. ``pending`` maps each delivered, unacknowledged
entry to its message count so a closing consumer's entries can be handed to
others.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from magnetar.storage import Entry, Position

from magnetar.broker.interval_rates import IntervalRates

from .views import SubscriptionView


class ConsumerSink(Protocol):
    """Where a consumer's deliveries and notices go: its client's connection
    (``server.handlers.consume.ConsumerReports``). A consumer is given one
    when it is made; it calls nothing else of the connection.

    None of the calls may raise: they run from dispatch and topic closes.
    """

    def deliver(self, consumer: "Consumer", entries: list[Entry], redeliveries: list[int]) -> None:
        """Write ``entries`` (with their redelivery counts) to the client."""

    def writable(self) -> bool:
        """False while the connection's write buffer is full: dispatch skips the consumer."""

    def closed(self, consumer: "Consumer", assigned: tuple[str, str] | None = None) -> None:
        """Tell the client the consumer must reconnect (seek, unload); with
        ``assigned`` (the new owner's plain and TLS URLs), to that broker
        without a lookup (the topic moved there)."""

    def active_change(self, consumer: "Consumer", active: bool) -> None:
        """Tell a failover consumer whether it is the active one."""


class _DroppingConsumerSink:
    """The sink of a consumer with no client (tests): nothing is written."""

    __slots__ = ()

    def deliver(self, consumer: "Consumer", entries: list[Entry], redeliveries: list[int]) -> None:
        pass

    def writable(self) -> bool:
        return True

    def closed(self, consumer: "Consumer", assigned: tuple[str, str] | None = None) -> None:
        pass

    def active_change(self, consumer: "Consumer", active: bool) -> None:
        pass


NO_CLIENT: ConsumerSink = _DroppingConsumerSink()


@dataclass(eq=False)
class Consumer:
    consumer_id: int
    name: str
    subscription: SubscriptionView
    priority_level: int = 0
    #: Where deliveries and the broker's notices go (the client's connection).
    sink: ConsumerSink = NO_CLIENT
    permits: int = 0
    #: Key_Shared: the consumer's KeySharedMeta (mode, sticky ranges, out-of-order), None if not given.
    key_shared_meta: Any = None
    #: Reads the topic's compacted view first (Exclusive/Failover subscriptions and readers).
    read_compacted: bool = False
    #: The partition index of the topic it reads (-1: not a partition).
    partition: int = -1
    pending: dict[Position, int] = field(default_factory=dict)
    address: str = ""
    connected_since: float = field(default_factory=time.time)
    msg_out: int = 0
    bytes_out: int = 0
    #: Messages handed back for redelivery (negative acks, ack timeouts) and
    #: messages acknowledged, over the consumer's life (the stats' rates).
    redelivered: int = 0
    acked: int = 0
    #: Wall-clock ms of the last acknowledgement, delivery, FLOW (0: none yet).
    last_acked_ms: int = 0
    last_consumed_ms: int = 0
    last_flow_ms: int = 0
    #: The client library's version (CONNECT) and the consumer's metadata (SUBSCRIBE).
    client_version: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    #: Rates of (msg_out, bytes_out, redelivered, acked) over the last stats interval.
    interval_rates: IntervalRates = field(default_factory=lambda: IntervalRates(4))
    closed: bool = False

    def can_receive(self) -> bool:
        return not self.closed and self.permits > 0 and self.sink.writable()

    def disconnect(self, assigned: tuple[str, str] | None = None) -> None:
        """Tell the client the consumer must reconnect (see :meth:`ConsumerSink.closed`)."""
        self.sink.closed(self, assigned)

    def active_change(self, active: bool) -> None:
        """Tell a failover consumer whether it is the active one."""
        self.sink.active_change(self, active)

    def unacked_messages(self) -> int:
        return sum(self.pending.values())
